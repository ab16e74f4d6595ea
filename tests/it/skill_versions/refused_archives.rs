//! Hostile and unusable uploads: each is refused with a `problems` entry naming the file at fault
//! (or the archive as a whole), the larger-than-direct body with 413, and nothing is stored.

use std::io::{Cursor, Write};

use local_stack::stack::Stack;
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

use super::{poderes, problems, stored_versions, text, upload, versions, zip_of, Answered, OWNER, SKILL};

const MIB: usize = 1024 * 1024;

/// What a refused upload must answer: its status, the file its problem names (`None`: the
/// archive as a whole) and words its message holds.
struct Refusal {
    what: &'static str,
    zip: Vec<u8>,
    status: u16,
    file: Option<&'static str>,
    says: &'static str,
}

fn refusal(what: &'static str, zip: Vec<u8>, file: Option<&'static str>, says: &'static str) -> Refusal {
    Refusal { what, zip, status: 400, file, says }
}

/// The SKILL.md every archive below carries, so each is refused for its one fault.
fn skill_md() -> Vec<u8> {
    poderes("Instrucciones.").into_bytes()
}

/// A zip of SKILL.md and one entry `name` of `size` zeros, written in pieces (deflated: a few
/// hundred KiB for 100 MiB).
fn zeros(entries: &[(&str, usize)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options =
        SimpleFileOptions::default().compression_method(CompressionMethod::Deflated).compression_level(Some(1));
    writer.start_file("SKILL.md", options).unwrap();
    writer.write_all(&skill_md()).unwrap();
    let piece = vec![0u8; MIB];
    for (name, size) in entries {
        writer.start_file(*name, options.large_file(*size > 1 << 31)).unwrap();
        let mut left = *size;
        while left > 0 {
            let take = left.min(MIB);
            writer.write_all(&piece[..take]).unwrap();
            left -= take;
        }
    }
    writer.finish().unwrap().into_inner()
}

/// A zip whose entries are named `names` exactly, duplicates included: written under stand-in
/// names of the same length (the writer refuses duplicates), then renamed in the local headers and
/// the central directory alike (no checksum covers a name).
fn named_exactly(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let stand_ins: Vec<String> = entries
        .iter()
        .enumerate()
        .map(|(i, (name, _))| format!("{:Q<width$}", format!("Q{i}"), width = name.len()))
        .collect();
    let files: Vec<(&str, &[u8])> =
        stand_ins.iter().zip(entries).map(|(stand_in, (_, bytes))| (stand_in.as_str(), *bytes)).collect();
    let mut zip = zip_of(&files);
    for (stand_in, (name, _)) in stand_ins.iter().zip(entries) {
        assert_eq!(stand_in.len(), name.len());
        let mut at = 0;
        while let Some(found) = zip[at..].windows(stand_in.len()).position(|w| w == stand_in.as_bytes()) {
            zip[at + found..at + found + name.len()].copy_from_slice(name.as_bytes());
            at += found + name.len();
        }
    }
    zip
}

/// A zip of SKILL.md and a symbolic link `name` to `target` (mode 0o120777).
fn with_symlink(name: &str, target: &str) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().unix_permissions(0o644);
    writer.start_file("SKILL.md", options).unwrap();
    writer.write_all(&skill_md()).unwrap();
    writer.add_symlink(name, target, SimpleFileOptions::default().unix_permissions(0o777)).unwrap();
    writer.finish().unwrap().into_inner()
}

/// SKILL.md and `count - 1` small files.
fn many_files(count: usize) -> Vec<u8> {
    let skill = skill_md();
    let names: Vec<String> = (1..count).map(|i| format!("notas/n{i:04}.md")).collect();
    let mut files: Vec<(&str, &[u8])> = vec![("SKILL.md", skill.as_slice())];
    files.extend(names.iter().map(|name| (name.as_str(), b"nota".as_slice())));
    zip_of(&files)
}

/// Bytes that compress poorly.
fn noise(size: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_u32;
    (0..size)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

/// Checks each refusal, and answers what did not go as it should (all of them, not the first).
async fn check(http: &local_stack::lambda::Function, refusals: Vec<Refusal>) -> Vec<String> {
    let mut wrong = Vec::new();
    for refusal in refusals {
        let answer: Answered = upload(http, OWNER, SKILL, &refusal.zip, None).await;
        if answer.status != refusal.status {
            wrong.push(format!("{}: {}", refusal.what, text(&answer)));
            continue;
        }
        if refusal.status != 400 {
            let message = answer.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
            if !message.contains(refusal.says) {
                wrong.push(format!("{}: the message does not say {:?}: {message}", refusal.what, refusal.says));
            }
            continue;
        }
        if answer.code() != "invalid_skill" || answer.json()["problems"].as_array().is_none_or(Vec::is_empty) {
            wrong.push(format!("{}: no problems listed: {}", refusal.what, text(&answer)));
            continue;
        }
        let found = problems(&answer);
        let named = found.iter().any(|(file, message)| {
            file.as_deref() == refusal.file && message.to_lowercase().contains(&refusal.says.to_lowercase())
        });
        if !named {
            wrong.push(format!("{}: no problem ({:?}, {:?}…) in {found:?}", refusal.what, refusal.file, refusal.says));
        }
    }
    wrong
}

/// Nothing of a refused upload is stored, and the skill has no versions.
async fn assert_nothing_stored(stack: &Stack, http: &local_stack::lambda::Function) {
    assert_eq!(stored_versions(stack, OWNER).await, Vec::<String>::new(), "nothing under skill-versions/");
    assert_eq!(stack.object_keys(&format!("{OWNER}/")).await, Vec::<String>::new(), "nothing of the tenant at all");
    let listed = versions(http, OWNER, SKILL).await;
    assert_eq!(listed.status, 404, "{}", text(&listed));
}

#[tokio::test]
async fn hostile_archives_are_refused_naming_the_entry_and_store_nothing() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let skill = skill_md();
    let with = |name: &'static str| named_exactly(&[("SKILL.md", skill.as_slice()), (name, b"contenido".as_slice())]);
    let refusals = vec![
        // 100 MiB of zeros in one entry: a bomb, stopped at what really inflates.
        refusal("a 100 MiB entry", zeros(&[("datos.bin", 100 * MIB)]), None, "inflate"),
        // Several entries whose sum passes 64 MiB, none alone.
        refusal(
            "66 MiB in all",
            zeros(&[("a.bin", 22 * MIB), ("b.bin", 22 * MIB), ("c.bin", 22 * MIB)]),
            None,
            "bytes",
        ),
        refusal("2,000 entries", many_files(2000), None, "entries"),
        refusal("257 files", many_files(257), None, "256"),
        refusal("an escaping path", with("../evil"), Some("../evil"), ".."),
        refusal("an escaping path inside", with("docs/../../evil"), Some("docs/../../evil"), ".."),
        refusal("an absolute path", with("/abs/path"), Some("/abs/path"), "absolute"),
        refusal("a backslash", with("docs\\evil.md"), Some("docs\\evil.md"), "backslash"),
        refusal("a symbolic link", with_symlink("enlace", "/etc/passwd"), Some("enlace"), "link"),
        refusal("the runtime's .bundle/", with(".bundle/x.tar"), Some(".bundle/x.tar"), "bundle"),
    ];
    let wrong = check(&http, refusals).await;
    assert!(wrong.is_empty(), "refusals that went wrong:\n{}", wrong.join("\n"));
    assert_nothing_stored(&stack, &http).await;
}

#[tokio::test]
async fn unusable_skills_and_bodies_are_refused_and_store_nothing() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let only = |name: &'static str, bytes: &str| zip_of(&[(name, bytes.as_bytes())]);
    let big = zip_of(&[("SKILL.md", &skill_md()), ("ruido.bin", &noise(4 * MIB + 1))]);
    let refusals = vec![
        refusal("no SKILL.md", only("notas.md", "Sin SKILL.md."), None, "SKILL.md"),
        refusal(
            "another skill's name",
            only("SKILL.md", &super::skill_md("otro", "Otra.", "x")),
            Some("SKILL.md"),
            "otro",
        ),
        refusal(
            "no description",
            only("SKILL.md", "---\nname: poderes\n---\n\n# Poderes\n"),
            Some("SKILL.md"),
            "description",
        ),
        refusal("no frontmatter", only("SKILL.md", "# Poderes, sin frontmatter\n"), Some("SKILL.md"), ""),
        refusal("not a zip", b"esto no es un zip, solo texto".to_vec(), None, "zip"),
        Refusal { what: "over 4 MiB", zip: big, status: 413, file: None, says: "/versions/uploads" },
    ];
    let wrong = check(&http, refusals).await;
    assert!(wrong.is_empty(), "refusals that went wrong:\n{}", wrong.join("\n"));
    assert_nothing_stored(&stack, &http).await;
}

/// Apart from the others: the zip crate's reader keeps one entry per name, so a reader that does
/// not look for duplicates would store one of them without a word.
#[tokio::test]
async fn duplicate_names_are_refused_naming_the_file_and_store_nothing() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let skill = skill_md();
    let refusals = vec![
        refusal(
            "a name twice",
            named_exactly(&[("SKILL.md", skill.as_slice()), ("notas.md", b"una"), ("notas.md", b"otra")]),
            Some("notas.md"),
            "",
        ),
        refusal(
            "SKILL.md twice",
            named_exactly(&[("SKILL.md", skill.as_slice()), ("SKILL.md", poderes("Otra.").as_bytes())]),
            Some("SKILL.md"),
            "",
        ),
        refusal(
            "names differing by case",
            named_exactly(&[("SKILL.md", skill.as_slice()), ("Notas.md", b"una"), ("notas.md", b"otra")]),
            Some("notas.md"),
            "case",
        ),
    ];
    let wrong = check(&http, refusals).await;
    assert!(wrong.is_empty(), "refusals that went wrong:\n{}", wrong.join("\n"));
    assert_nothing_stored(&stack, &http).await;
}
