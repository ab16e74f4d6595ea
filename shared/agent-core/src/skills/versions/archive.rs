//! A skill's files from an uploaded zip, and a version's files as a zip to download. The archive is
//! hostile: its declared sizes are not trusted (each entry is read through a bound on what it
//! really inflates to), and its names are checked before any becomes a key.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};

use super::{Problem, SkillFileBytes, MAX_SKILL_BYTES, MAX_SKILL_FILES};
use crate::skills::bundle::BUNDLE_DIR;

/// Most entries a zip may list (folders and skipped files included) before any is read.
const MAX_ENTRIES: usize = 4 * MAX_SKILL_FILES;
/// Longest path of a file inside a skill, in bytes.
pub const MAX_PATH_BYTES: usize = 512;

/// The files of a skill in `zip`: the skill's folder is the archive's root, or its one top folder.
/// Folders, macOS's `__MACOSX/` and `.DS_Store` are left out; anything else wrong is a problem
/// naming the entry.
pub fn read_zip(zip: &[u8]) -> Result<Vec<SkillFileBytes>, Vec<Problem>> {
    let mut archive = zip::ZipArchive::new(Cursor::new(zip))
        .map_err(|err| vec![Problem::archive(format!("the upload is not a readable zip file: {err}"))])?;
    if archive.len() > MAX_ENTRIES {
        return Err(vec![Problem::archive(format!(
            "the zip lists {} entries; a skill may have at most {MAX_SKILL_FILES} files",
            archive.len()
        ))]);
    }
    // The reader keeps one entry per name: a name listed twice is found in the directory itself.
    if archive.has_duplicate_names() {
        let twice = duplicate_names(zip);
        return Err(match twice.is_empty() {
            true => vec![Problem::archive("the zip lists a file name twice")],
            false => twice.iter().map(|name| Problem::file(name, "appears twice in the upload")).collect(),
        });
    }
    let mut problems = Vec::new();
    let mut files: Vec<SkillFileBytes> = Vec::new();
    let mut total: u64 = 0;
    for i in 0..archive.len() {
        let mut entry = match archive.by_index(i) {
            Ok(entry) => entry,
            Err(err) => {
                problems.push(Problem::archive(format!("entry {i} cannot be read: {err}")));
                continue;
            }
        };
        let name = match entry.name() {
            Ok(name) => name.into_owned(),
            Err(err) => {
                problems.push(Problem::archive(format!("entry {i} has a name that is not text: {err}")));
                continue;
            }
        };
        if entry.is_dir() || skipped_entry(&name) {
            continue;
        }
        if entry.is_symlink() {
            problems.push(Problem::file(&name, "is a symbolic link; a skill's files must be regular files"));
            continue;
        }
        if let Err(why) = check_path(&name) {
            problems.push(Problem::file(&name, why));
            continue;
        }
        // The declared size is only a hint: the bound is on the bytes really inflated.
        let remaining = MAX_SKILL_BYTES.saturating_sub(total);
        let mut bytes = Vec::with_capacity(entry.size().min(remaining).min(1 << 20) as usize);
        match (&mut entry).take(remaining + 1).read_to_end(&mut bytes) {
            Ok(_) if bytes.len() as u64 > remaining => {
                return Err(vec![Problem::archive(format!(
                    "the files inflate to more than {MAX_SKILL_BYTES} bytes, the most a skill may hold"
                ))]);
            }
            Ok(_) => {}
            Err(err) => {
                problems.push(Problem::file(&name, format!("cannot be inflated: {err}")));
                continue;
            }
        }
        total += bytes.len() as u64;
        files.push(SkillFileBytes { path: name, bytes });
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    strip_top_folder(&mut files);
    check_files(&files)?;
    Ok(files)
}

/// The names a zip's central directory lists more than once, read from its records directly (the
/// reader keeps one entry per name). Zip64 directories are not walked: then nothing is named.
fn duplicate_names(zip: &[u8]) -> Vec<String> {
    const END: [u8; 4] = *b"PK\x05\x06";
    const ENTRY: [u8; 4] = *b"PK\x01\x02";
    let u16_at = |at: usize| zip.get(at..at + 2).map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
    let u32_at = |at: usize| zip.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    // The end record is in the last 64 KiB and 22 bytes (its comment is at most 64 KiB).
    let search_from = zip.len().saturating_sub(22 + 65_535);
    let Some(end) = (search_from..zip.len().saturating_sub(21)).rev().find(|&at| zip[at..at + 4] == END) else {
        return Vec::new();
    };
    let (Some(count), Some(mut at)) = (u16_at(end + 10), u32_at(end + 16)) else { return Vec::new() };
    let mut seen = std::collections::BTreeSet::new();
    let mut twice = std::collections::BTreeSet::new();
    for _ in 0..count.min(MAX_ENTRIES) {
        if zip.get(at..at + 4) != Some(&ENTRY[..]) {
            break;
        }
        let (Some(name_len), Some(extra_len), Some(comment_len)) = (u16_at(at + 28), u16_at(at + 30), u16_at(at + 32))
        else {
            break;
        };
        let Some(name) = zip.get(at + 46..at + 46 + name_len) else { break };
        let name = String::from_utf8_lossy(name).into_owned();
        if !seen.insert(name.clone()) {
            twice.insert(name);
        }
        at += 46 + name_len + extra_len + comment_len;
    }
    twice.into_iter().collect()
}

/// Entries a zip made on macOS or Windows carries that are no part of the skill.
fn skipped_entry(name: &str) -> bool {
    name.starts_with("__MACOSX/") || name.rsplit('/').next().is_some_and(|file| file == ".DS_Store")
}

/// Why `path` cannot name a file inside a skill: absolute, escaping, empty or odd segments,
/// backslashes or control characters.
pub fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("has an empty name".to_owned());
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("has a path longer than {MAX_PATH_BYTES} bytes"));
    }
    if path.starts_with('/') || path.as_bytes().get(1) == Some(&b':') {
        return Err("is an absolute path; paths must be relative to the skill's folder".to_owned());
    }
    if path.contains('\\') {
        return Err("holds a backslash; use `/` between folders".to_owned());
    }
    if path.chars().any(char::is_control) {
        return Err("holds a control character".to_owned());
    }
    for segment in path.split('/') {
        match segment {
            "" => return Err("has an empty folder name (`//` or a trailing `/`)".to_owned()),
            "." | ".." => return Err("has a `.` or `..` segment, which could leave the skill's folder".to_owned()),
            _ => {}
        }
    }
    Ok(())
}

/// The files' common top folder removed when the archive holds the skill's folder rather than
/// its contents (`my-skill/SKILL.md`).
fn strip_top_folder(files: &mut [SkillFileBytes]) {
    if files.iter().any(|file| file.path == "SKILL.md") {
        return;
    }
    let Some(top) = files.first().and_then(|file| file.path.split_once('/')).map(|(top, _)| format!("{top}/")) else {
        return;
    };
    if files.iter().all(|file| file.path.starts_with(&top)) {
        for file in files.iter_mut() {
            file.path = file.path[top.len()..].to_owned();
        }
    }
}

/// The checks every way in shares (a zip, a folder, a list of files): the count, the total, the
/// names (unique, also ignoring case, and none under the runtime's `.bundle/`).
pub fn check_files(files: &[SkillFileBytes]) -> Result<(), Vec<Problem>> {
    let mut problems = Vec::new();
    if files.len() > MAX_SKILL_FILES {
        problems.push(Problem::archive(format!(
            "the skill has {} files; at most {MAX_SKILL_FILES} are allowed",
            files.len()
        )));
    }
    let total: u64 = files.iter().map(|file| file.bytes.len() as u64).sum();
    if total > MAX_SKILL_BYTES {
        problems.push(Problem::archive(format!("the files hold {total} bytes; at most {MAX_SKILL_BYTES} are allowed")));
    }
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for file in files {
        if let Err(why) = check_path(&file.path) {
            problems.push(Problem::file(&file.path, why));
            continue;
        }
        if file.path.starts_with(BUNDLE_DIR) || file.path == BUNDLE_DIR.trim_end_matches('/') {
            problems.push(Problem::file(&file.path, "is under `.bundle/`, which the runtime writes; leave it out"));
            continue;
        }
        match seen.insert(file.path.to_lowercase(), &file.path) {
            Some(other) if other == file.path => {
                problems.push(Problem::file(&file.path, "appears twice in the upload"))
            }
            Some(other) => problems.push(Problem::file(
                &file.path,
                format!("differs from {other:?} only by case, which some systems cannot keep apart"),
            )),
            None => {}
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// `files` as a zip (deflated), for a download: paths as stored, in the order given.
pub fn write_zip<'a>(files: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Result<Vec<u8>, String> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644);
    for (path, bytes) in files {
        writer.start_file(path, options).map_err(|err| err.to_string())?;
        writer.write_all(bytes).map_err(|err| err.to_string())?;
    }
    Ok(writer.finish().map_err(|err| err.to_string())?.into_inner())
}
