//! The validation an uploaded skill passes before anything is stored: the bounds and names every
//! way in shares, then its SKILL.md read by the very parser the catalog index uses (so an upload
//! is refused for what would make `skills validate` skip it), its frontmatter name held to the
//! skill it is uploaded as, and what its scripts need.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use super::{check_files, Problem, SkillFileBytes};
use crate::ids::SkillPath;
use crate::skills::frontmatter::{parse_skill_md, MAX_SKILL_MD_BYTES};
use crate::skills::index::SkillEntry;

/// Where a skill declares its Python needs, inside its folder (as the bundle builder reads them).
const DECLARATIONS: [&str; 2] = ["requirements.txt", "scripts/requirements.txt"];
/// Largest script read for imports.
pub const MAX_SCRIPT_BYTES: usize = 1024 * 1024;
/// Python's own modules (`sys.stdlib_module_names`, 3.11): never a need.
const STDLIB: &str = "\
    abc aifc antigravity argparse array ast asynchat asyncio asyncore atexit audioop base64 bdb \
    binascii bisect builtins bz2 cProfile calendar cgi cgitb chunk cmath cmd code codecs codeop \
    collections colorsys compileall concurrent configparser contextlib contextvars copy copyreg \
    crypt csv ctypes curses dataclasses datetime dbm decimal difflib dis distutils doctest email \
    encodings ensurepip enum errno faulthandler fcntl filecmp fileinput fnmatch fractions ftplib \
    functools gc genericpath getopt getpass gettext glob graphlib grp gzip hashlib heapq hmac html \
    http idlelib imaplib imghdr imp importlib inspect io ipaddress itertools json keyword lib2to3 \
    linecache locale logging lzma mailbox mailcap marshal math mimetypes mmap modulefinder msilib \
    msvcrt multiprocessing netrc nis nntplib nt ntpath nturl2path numbers opcode operator optparse \
    os ossaudiodev pathlib pdb pickle pickletools pipes pkgutil platform plistlib poplib posix \
    posixpath pprint profile pstats pty pwd py_compile pyclbr pydoc pydoc_data pyexpat queue quopri \
    random re readline reprlib resource rlcompleter runpy sched secrets select selectors shelve \
    shlex shutil signal site smtpd smtplib sndhdr socket socketserver spwd sqlite3 sre_compile \
    sre_constants sre_parse ssl stat statistics string stringprep struct subprocess sunau symtable \
    sys sysconfig syslog tabnanny tarfile telnetlib tempfile termios textwrap this threading time \
    timeit tkinter token tokenize tomllib trace traceback tracemalloc tty turtle turtledemo types \
    typing unicodedata unittest urllib uu uuid venv warnings wave weakref webbrowser winreg \
    winsound wsgiref xdrlib xml xmlrpc zipapp zipfile zipimport zlib zoneinfo";

/// A skill that may be stored: its catalog entry (no version yet), what was repaired, and what
/// its scripts need.
#[derive(Debug, Clone)]
pub struct Checked {
    pub entry: SkillEntry,
    pub warnings: Vec<String>,
    /// Distributions its `requirements.txt` declares.
    pub needs: Vec<String>,
    /// Modules imported only inside `try: … except ImportError` (the script runs without them,
    /// or stops asking for them: either way the sandbox cannot install them then).
    pub optional_needs: Vec<String>,
}

/// Checks `files` as the skill `skill`: every problem found, by file, or what it would be.
pub fn check_skill(skill: &SkillPath, files: &[SkillFileBytes]) -> Result<Checked, Vec<Problem>> {
    check_files(files)?;
    let Some(skill_md) = files.iter().find(|file| file.path == "SKILL.md") else {
        return Err(vec![Problem::archive(
            "there is no SKILL.md at the skill's root (or in the zip's one top folder)",
        )]);
    };
    if skill_md.bytes.len() as u64 > MAX_SKILL_MD_BYTES {
        return Err(vec![Problem::file("SKILL.md", format!("is larger than {MAX_SKILL_MD_BYTES} bytes"))]);
    }
    let Ok(text) = std::str::from_utf8(&skill_md.bytes) else {
        return Err(vec![Problem::file("SKILL.md", "is not UTF-8 text")]);
    };
    let parsed =
        parse_skill_md(text, skill.name()).map_err(|reason| vec![Problem::file("SKILL.md", reason.to_string())])?;
    let frontmatter = parsed.frontmatter;
    if frontmatter.name != skill.name() {
        return Err(vec![Problem::file(
            "SKILL.md",
            format!("its frontmatter names the skill {:?}, but it is uploaded as {:?}", frontmatter.name, skill.name()),
        )]);
    }
    // The name matches: the parser's note that it does not is moot.
    let warnings: Vec<String> =
        parsed.warnings.into_iter().filter(|warning| !warning.contains("differs from its folder")).collect();
    let entry = SkillEntry {
        path: skill.clone(),
        etag: hex::encode(Sha256::digest(&skill_md.bytes)),
        size: skill_md.bytes.len() as u64,
        name: frontmatter.name,
        description: frontmatter.description,
        category: frontmatter.category,
        tools: frontmatter.tools,
        declared_tools: frontmatter.declared_tools,
        warnings: warnings.clone(),
        unmet_needs: Vec::new(),
        version: None,
    };
    Ok(Checked { entry, warnings, needs: declared_needs(files), optional_needs: optional_needs(files) })
}

/// The distributions `requirements.txt` (in the skill's folder or its `scripts/`) names, sorted.
pub fn declared_needs(files: &[SkillFileBytes]) -> Vec<String> {
    let mut needs = BTreeSet::new();
    for file in files.iter().filter(|file| DECLARATIONS.contains(&file.path.as_str())) {
        let text = String::from_utf8_lossy(&file.bytes);
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() || line.starts_with('-') {
                continue;
            }
            let name: String = line.chars().take_while(|c| c.is_ascii_alphanumeric() || "._-".contains(*c)).collect();
            if !name.is_empty() {
                needs.insert(name.to_ascii_lowercase().replace('_', "-"));
            }
        }
    }
    needs.into_iter().collect()
}

/// Top-level modules the Python scripts import only inside a `try:` whose `except` names
/// `ImportError` or `ModuleNotFoundError`, leaving out Python's own, sorted. `skills validate`
/// reports them with this same scan, so it and an upload name the same ones.
pub fn optional_needs(files: &[SkillFileBytes]) -> Vec<String> {
    let stdlib: BTreeSet<&str> = STDLIB.split_whitespace().collect();
    let mut found = BTreeSet::new();
    for file in files.iter().filter(|file| file.path.ends_with(".py") && file.bytes.len() <= MAX_SCRIPT_BYTES) {
        let text = String::from_utf8_lossy(&file.bytes);
        for module in guarded_imports(&text) {
            if !stdlib.contains(module.as_str()) {
                found.insert(module);
            }
        }
    }
    found.into_iter().collect()
}

/// The modules imported in the body of each `try:` block of `source` that an
/// `except (ModuleNotFoundError|ImportError…)` at the same indentation closes.
fn guarded_imports(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    // Open `try:` blocks: their indentation, the imports seen in their bodies, and whether the
    // lines now read are still the body (not a handler's).
    let mut open: Vec<(usize, Vec<String>, bool)> = Vec::new();
    for line in source.lines() {
        let code = line.split('#').next().unwrap_or("");
        let trimmed = code.trim();
        if trimmed.is_empty() {
            continue;
        }
        let indent = code.len() - code.trim_start().len();
        while open.last().is_some_and(|(at, _, _)| indent < *at) {
            open.pop();
        }
        if let Some((at, imports, in_body)) = open.last_mut() {
            if indent == *at {
                let handler = trimmed.starts_with("except");
                if handler && (trimmed.contains("ImportError") || trimmed.contains("ModuleNotFoundError")) {
                    found.append(imports);
                }
                *in_body = false;
                if !handler && !trimmed.starts_with("else") && !trimmed.starts_with("finally") {
                    open.pop();
                }
            } else if *in_body {
                imports.extend(imported_modules(trimmed));
            }
        }
        if trimmed == "try:" {
            open.push((indent, Vec::new(), true));
        }
    }
    found
}

/// The top-level modules one `import …` or `from … import …` line names (relative imports none).
fn imported_modules(statement: &str) -> Vec<String> {
    let top = |name: &str| name.trim().split('.').next().unwrap_or("").to_owned();
    if let Some(rest) = statement.strip_prefix("import ") {
        return rest
            .split(',')
            .map(|part| top(part.split(" as ").next().unwrap_or("")))
            .filter(|name| is_module_name(name))
            .collect();
    }
    if let Some(rest) = statement.strip_prefix("from ") {
        let module = rest.split_whitespace().next().unwrap_or("");
        if !module.starts_with('.') && is_module_name(&top(module)) {
            return vec![top(module)];
        }
    }
    Vec::new()
}

fn is_module_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_imports_are_optional_and_others_are_not() {
        let source = "import os\nimport numpy\ntry:\n    import torch\n    from rdkit.Chem import AllChem\nexcept ImportError:\n    print('install torch')\ntry:\n    import yaml\nexcept KeyError:\n    pass\ndef f():\n    try:\n        import scholarly as s, tomllib\n    except (ModuleNotFoundError, ValueError):\n        return None\n";
        assert_eq!(guarded_imports(source), vec!["torch", "rdkit", "scholarly", "tomllib"]);
        let files = vec![SkillFileBytes { path: "scripts/run.py".into(), bytes: source.as_bytes().to_vec() }];
        assert_eq!(optional_needs(&files), vec!["rdkit", "scholarly", "torch"]);
    }

    #[test]
    fn declared_needs_are_normalised_names() {
        let files = vec![SkillFileBytes {
            path: "scripts/requirements.txt".into(),
            bytes: b"# pins\nPython_PPTX>=1.0 # slides\n-r other.txt\n\nrdkit\n".to_vec(),
        }];
        assert_eq!(declared_needs(&files), vec!["python-pptx", "rdkit"]);
    }
}
