//! A skill's bundle: the wheels its scripts need that the sandbox image lacks, resolved ahead of
//! time (`cargo xtask skills sync`) and stored beside the skill under `.bundle/`, with a marker per
//! need that could not be bundled. The sandbox installs a bundle offline; this module only names
//! the files and bounds them, so the index, the virtual filesystem and `execute` agree.
//!
//! Inside a skill's folder:
//! - `.bundle/{sha256}.tar`: the bundle, named by the SHA-256 of its bytes (one per skill);
//! - `.bundle/unmet/{name}`: an empty marker per Python package the skill needs that no bundle
//!   provides (no wheel for the image, or over the bounds).
//!
//! `.bundle/` is not part of the skill as the model sees it: `/skills/{name}` does not show it and
//! a command's copy of the skill does not carry it.

/// The folder inside a skill that holds its bundle and markers.
pub const BUNDLE_DIR: &str = ".bundle/";
/// The markers' folder, inside [`BUNDLE_DIR`].
const UNMET_DIR: &str = ".bundle/unmet/";
/// The largest bundle the runtime sends to a sandbox: 128 MiB of wheels (a Lambda sandbox gets it
/// in 4 MiB chunks, 32 invocations at most, once per environment).
pub const MAX_BUNDLE_BYTES: u64 = 128 << 20;
/// The most bytes a bundle may unpack to.
pub const MAX_BUNDLE_INSTALLED_BYTES: u64 = 512 << 20;
/// The most files a bundle may unpack to (wheels' members together).
pub const MAX_BUNDLE_FILES: usize = 20_000;
/// The most wheels in one bundle.
pub const MAX_BUNDLE_WHEELS: usize = 200;
/// The longest package name a marker may carry.
const MAX_NEED_NAME: usize = 100;

/// A skill's bundle as stored: its key, the SHA-256 its name gives and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleRef {
    /// The object key (under the tenant's `skills/`).
    pub key: String,
    /// 64 lowercase hex digits.
    pub sha256: String,
    pub size: u64,
}

/// What a skill's `.bundle/` holds, read from its file list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillBundle {
    /// The bundle's path inside the skill, its SHA-256 and its size.
    pub bundle: Option<(String, String, u64)>,
    /// Packages the skill needs that no bundle provides, by name.
    pub unmet: Vec<String>,
}

impl SkillBundle {
    /// Reads a skill's file list (paths inside the skill, sizes). A second bundle file, a bundle
    /// over [`MAX_BUNDLE_BYTES`] or a file of another shape under `.bundle/` is ignored; the
    /// first two are reported among the unmet needs, so the owner sees them.
    pub fn from_files<'a>(files: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        let mut found = Self::default();
        for (rel, size) in files {
            if let Some(name) = rel.strip_prefix(UNMET_DIR) {
                if is_package_name(name) {
                    found.unmet.push(name.to_owned());
                }
                continue;
            }
            let Some(file) = rel.strip_prefix(BUNDLE_DIR) else { continue };
            let Some(sha256) = file.strip_suffix(".tar").filter(|hash| is_sha256(hash)) else { continue };
            if size > MAX_BUNDLE_BYTES {
                found.unmet.push(format!("(the bundle: {size} bytes, over {MAX_BUNDLE_BYTES})"));
            } else if found.bundle.is_some() {
                found.unmet.push("(a second bundle under .bundle/)".to_owned());
            } else {
                found.bundle = Some((rel.to_owned(), sha256.to_owned(), size));
            }
        }
        found.unmet.sort();
        found.unmet.dedup();
        found
    }
}

/// Whether `rel` (a path inside a skill) is part of its bundle folder, not of the skill itself.
pub fn is_bundle_file(rel: &str) -> bool {
    rel.starts_with(BUNDLE_DIR)
}

/// The marker's path for an unmet need named `name`, or `None` when it is not a package name.
pub fn unmet_marker(name: &str) -> Option<String> {
    is_package_name(name).then(|| format!("{UNMET_DIR}{name}"))
}

/// The bundle's path inside its skill.
pub fn bundle_file(sha256: &str) -> String {
    format!("{BUNDLE_DIR}{sha256}.tar")
}

/// 64 lowercase hex digits.
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A PyPI or npm name as a marker may carry it: letters, digits, `.`, `_`, `-`.
fn is_package_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NEED_NAME
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A Python distribution's name as PEP 503 compares them: lower case, runs of `-_.` as one `-`.
pub fn normalize_distribution(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.trim().chars() {
        if "-_.".contains(c) {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The warning `GET /skills` and the console show for a skill's unmet needs.
pub fn unmet_warning(unmet: &[String]) -> Option<String> {
    if unmet.is_empty() {
        return None;
    }
    let names: Vec<String> = unmet.iter().map(|name| format!("`{name}`")).collect();
    Some(format!(
        "its scripts need {}, which the sandbox image lacks and no bundle provides (`cargo xtask skills validate --resolve` says why); commands that use them will fail",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_bundle_and_the_markers_are_read_from_the_file_list() {
        let bundle = format!(".bundle/{HASH}.tar");
        let files = [
            ("SKILL.md", 10),
            ("scripts/run.py", 20),
            (bundle.as_str(), 4096),
            (".bundle/unmet/torch", 0),
            (".bundle/unmet/../x", 0),
            (".bundle/notes.txt", 3),
        ];
        let found = SkillBundle::from_files(files);
        assert_eq!(found.bundle, Some((bundle.clone(), HASH.to_owned(), 4096)));
        assert_eq!(found.unmet, ["torch"]);
        assert!(is_bundle_file(&bundle) && !is_bundle_file("scripts/run.py"));
        assert_eq!(bundle_file(HASH), bundle);
    }

    #[test]
    fn an_oversized_or_second_bundle_is_refused_and_said() {
        let other = "f".repeat(64);
        let (first, second) = (format!(".bundle/{HASH}.tar"), format!(".bundle/{other}.tar"));
        let found = SkillBundle::from_files([(first.as_str(), 1), (second.as_str(), 1)]);
        assert_eq!(found.bundle.map(|(_, hash, _)| hash).as_deref(), Some(HASH));
        assert_eq!(found.unmet, ["(a second bundle under .bundle/)"]);
        let found = SkillBundle::from_files([(first.as_str(), MAX_BUNDLE_BYTES + 1)]);
        assert!(found.bundle.is_none());
        assert!(found.unmet[0].contains("over"), "{:?}", found.unmet);
    }

    #[test]
    fn markers_carry_only_package_names() {
        assert_eq!(unmet_marker("python-dotenv").as_deref(), Some(".bundle/unmet/python-dotenv"));
        for bad in ["", "..", "a/b", ".hidden", "x y"] {
            assert!(unmet_marker(bad).is_none(), "{bad}");
        }
        assert!(unmet_warning(&[]).is_none());
        assert!(unmet_warning(&["torch".into()]).unwrap().contains("`torch`"));
        assert_eq!(normalize_distribution("Foo__Bar.baz-QUX"), "foo-bar-baz-qux");
    }
}
