//! The image's declared list: `functions/sandbox/image/` holds the Debian packages (`debian.txt`,
//! with the release and mirror), the pinned Python packages (`requirements.txt`) and the pinned npm
//! packages (`package.json` with its lockfile). Its hash names the image.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Where the list lives, from the workspace root.
pub const LIST_DIR: &str = "functions/sandbox/image";
/// The files whose contents make the image; any change to one is a new image.
pub const LIST_FILES: [&str; 5] =
    ["debian.txt", "requirements.txt", "package.json", "package-lock.json", "customize.sh"];
/// Bumped when the way the image is made changes (the hooks, the layout), so the hash moves too.
const RECIPE_VERSION: &str = "sandbox-image recipe 1";

/// `debian.txt` read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebianList {
    pub suite: String,
    pub mirror: String,
    pub packages: Vec<String>,
}

impl DebianList {
    /// Parses the file: `suite:` and `mirror:` lines, then one package a line; `#` comments.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (mut suite, mut mirror, mut packages) = (None, None, Vec::new());
        for (number, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            if let Some(value) = line.strip_prefix("suite:") {
                suite = Some(value.trim().to_owned());
            } else if let Some(value) = line.strip_prefix("mirror:") {
                mirror = Some(value.trim().to_owned());
            } else if line.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c)) {
                packages.push(line.to_owned());
            } else {
                return Err(format!("debian.txt line {}: `{line}` is not a Debian package name", number + 1));
            }
        }
        let suite = suite.ok_or("debian.txt has no `suite:` line")?;
        let mirror = mirror.ok_or("debian.txt has no `mirror:` line")?;
        if packages.is_empty() {
            return Err("debian.txt lists no package".into());
        }
        Ok(Self { suite, mirror, packages })
    }
}

/// The list as read from the workspace.
pub struct List {
    pub dir: PathBuf,
    pub debian: DebianList,
    /// The first 16 hex digits of the SHA-256 over the recipe and the list's files.
    pub hash: String,
}

impl List {
    pub fn read(root: &Path) -> Result<Self, String> {
        let dir = root.join(LIST_DIR);
        let mut hasher = Sha256::new();
        hasher.update(RECIPE_VERSION.as_bytes());
        for name in LIST_FILES {
            let bytes =
                std::fs::read(dir.join(name)).map_err(|err| format!("could not read {LIST_DIR}/{name}: {err}"))?;
            // Length-prefixed, so moving a line from one file to the next changes the hash.
            hasher.update(name.as_bytes());
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
        }
        let text = std::fs::read_to_string(dir.join("debian.txt")).map_err(|err| format!("debian.txt: {err}"))?;
        let debian = DebianList::parse(&text)?;
        let hash = hex::encode(hasher.finalize())[..16].to_owned();
        Ok(Self { dir, debian, hash })
    }
}

/// The wheel platform tags the image's Python accepts (x86_64, glibc 2.41 in trixie), for
/// `pip download --platform`: every manylinux tag from the oldest to the image's glibc.
pub fn wheel_platforms() -> Vec<String> {
    let mut tags: Vec<String> =
        ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"].map(str::to_owned).to_vec();
    tags.extend((5..=41).map(|minor| format!("manylinux_2_{minor}_x86_64")));
    tags
}

/// The image's Python, as `pip download --python-version` wants it.
pub const PYTHON_VERSION: &str = "3.13";

/// `python3 -m pip download` of wheels only, for the image's Python and architecture whatever
/// Python runs pip; the caller adds what to fetch and where.
pub fn pip_download() -> std::process::Command {
    let mut pip = std::process::Command::new("python3");
    pip.args(["-m", "pip", "download", "--disable-pip-version-check", "--no-input", "--only-binary=:all:"]).args([
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
    ]);
    for platform in wheel_platforms() {
        pip.args(["--platform", &platform]);
    }
    // A wheel directory of the machine (pip's PIP_FIND_LINKS) must not stand in for the index.
    pip.env_remove("PIP_FIND_LINKS");
    pip
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_list_parses_and_names_the_document_tools() {
        let list = List::read(&crate::root()).expect("the list reads");
        assert_eq!(list.debian.suite, "trixie");
        for tool in ["libreoffice-calc-nogui", "poppler-utils", "nodejs", "python3", "git", "gcc"] {
            assert!(list.debian.packages.iter().any(|package| package == tool), "{tool} missing");
        }
        assert_eq!(list.hash.len(), 16);
    }

    #[test]
    fn a_bad_line_is_refused_with_its_number() {
        let err = DebianList::parse("suite: trixie\nmirror: http://x\nbash\nrm -rf /\n").unwrap_err();
        assert!(err.contains("line 4"), "{err}");
        assert!(DebianList::parse("mirror: http://x\nbash\n").unwrap_err().contains("suite"));
        let list = DebianList::parse("suite: trixie # the release\nmirror: http://x\nbash # a shell\n").unwrap();
        assert_eq!(list.packages, ["bash"]);
    }
}
