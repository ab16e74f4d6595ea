//! A skill's bundle: the wheels its scripts need that the sandbox image lacks, resolved ahead of
//! time (`cargo xtask skills sync`) and stored beside the skill under `.bundle/`, with a marker per
//! need that could not be bundled. The sandbox installs a bundle offline; this module only names
//! the files and bounds them, so the index, the virtual filesystem and `execute` agree.
//!
//! Inside a skill's folder:
//! - `.bundle/{sha256}.{mac}.tar`: the bundle, named by the SHA-256 of its bytes and the runtime's
//!   signature over the tenant and that hash (one per skill);
//! - `.bundle/unmet/{name}`: an empty marker per Python package the skill needs that no bundle
//!   provides (no wheel for the image, or over the bounds).
//!
//! The signature (`{mac}`, [`MAC_HEX_LEN`] lowercase hex digits) is made and checked by the sandbox
//! crate with the deployment's key; this module only reads it from the name, so the file listing
//! the catalog already keeps carries it. A `.bundle/{sha256}.tar` without one is still read (as
//! unsigned), so the owner and the model can be told it will not be installed.
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
/// Hex digits of a bundle's signature in its name: 128 bits of HMAC-SHA256.
pub const MAC_HEX_LEN: usize = 32;
/// What the unmet needs say of a bundle whose name carries no signature.
pub const UNSIGNED_NOTE: &str = "(a bundle not built by the runtime under .bundle/: sync the skill again)";

/// A skill's bundle as stored: its key, the SHA-256 and signature its name gives, and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleRef {
    /// The object key (under the tenant's `skills/`).
    pub key: String,
    /// 64 lowercase hex digits.
    pub sha256: String,
    /// The runtime's signature from the name ([`MAC_HEX_LEN`] lowercase hex digits); `None` when
    /// the name carries none. Only the sandbox crate can tell whether it is valid.
    pub mac: Option<String>,
    pub size: u64,
}

/// A bundle file found in a skill's file list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFile {
    /// Its path inside the skill.
    pub rel: String,
    pub sha256: String,
    pub mac: Option<String>,
    pub size: u64,
}

impl BundleFile {
    /// The reference to it for a skill stored under `prefix` (ending in `/`).
    pub fn under(self, prefix: &str) -> BundleRef {
        BundleRef { key: format!("{prefix}{}", self.rel), sha256: self.sha256, mac: self.mac, size: self.size }
    }
}

/// What a skill's `.bundle/` holds, read from its file list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillBundle {
    /// The bundle file: a signed name before an unsigned one.
    pub bundle: Option<BundleFile>,
    /// Packages the skill needs that no bundle provides, by name.
    pub unmet: Vec<String>,
}

impl SkillBundle {
    /// Reads a skill's file list (paths inside the skill, sizes). A second bundle file, a bundle
    /// over [`MAX_BUNDLE_BYTES`] or a file of another shape under `.bundle/` is ignored; the
    /// first two are reported among the unmet needs, so the owner sees them, and so is a bundle
    /// whose name carries no signature (it is kept, so that `execute` can say why it is refused).
    pub fn from_files<'a>(files: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        let mut found = Self::default();
        let mut candidates = Vec::new();
        for (rel, size) in files {
            if let Some(name) = rel.strip_prefix(UNMET_DIR) {
                if is_package_name(name) {
                    found.unmet.push(name.to_owned());
                }
                continue;
            }
            let Some((sha256, mac)) = parse_bundle_file(rel) else { continue };
            if size > MAX_BUNDLE_BYTES {
                found.unmet.push(format!("(the bundle: {size} bytes, over {MAX_BUNDLE_BYTES})"));
            } else {
                candidates.push(BundleFile { rel: rel.to_owned(), sha256, mac, size });
            }
        }
        // A signed name first, so a stray unsigned file beside the runtime's bundle does not hide it.
        candidates.sort_by_key(|file| file.mac.is_none());
        let mut candidates = candidates.into_iter();
        found.bundle = candidates.next();
        if candidates.next().is_some() {
            found.unmet.push("(a second bundle under .bundle/)".to_owned());
        }
        if found.bundle.as_ref().is_some_and(|file| file.mac.is_none()) {
            found.unmet.push(UNSIGNED_NOTE.to_owned());
        }
        found.unmet.sort();
        found.unmet.dedup();
        found
    }
}

/// The SHA-256 and the signature (when there is one) a bundle file's path inside its skill gives:
/// `.bundle/{sha256}.{mac}.tar` or `.bundle/{sha256}.tar`; `None` for any other path.
pub fn parse_bundle_file(rel: &str) -> Option<(String, Option<String>)> {
    let stem = rel.strip_prefix(BUNDLE_DIR)?.strip_suffix(".tar")?;
    let (sha256, mac) = match stem.split_once('.') {
        Some((sha256, mac)) if is_mac(mac) => (sha256, Some(mac)),
        Some(_) => return None,
        None => (stem, None),
    };
    is_sha256(sha256).then(|| (sha256.to_owned(), mac.map(str::to_owned)))
}

/// Whether `rel` (a path inside a skill) is part of its bundle folder, not of the skill itself.
pub fn is_bundle_file(rel: &str) -> bool {
    rel.starts_with(BUNDLE_DIR)
}

/// The marker's path for an unmet need named `name`, or `None` when it is not a package name.
pub fn unmet_marker(name: &str) -> Option<String> {
    is_package_name(name).then(|| format!("{UNMET_DIR}{name}"))
}

/// The bundle's path inside its skill: its SHA-256 and the runtime's signature `mac`.
pub fn bundle_file(sha256: &str, mac: &str) -> String {
    format!("{BUNDLE_DIR}{sha256}.{mac}.tar")
}

/// 64 lowercase hex digits.
pub fn is_sha256(text: &str) -> bool {
    is_lower_hex(text, 64)
}

/// A signature as a bundle's name carries it: [`MAC_HEX_LEN`] lowercase hex digits.
pub fn is_mac(text: &str) -> bool {
    is_lower_hex(text, MAC_HEX_LEN)
}

fn is_lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
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
    const MAC: &str = "00112233445566778899aabbccddeeff";

    #[test]
    fn the_bundle_and_the_markers_are_read_from_the_file_list() {
        let bundle = format!(".bundle/{HASH}.{MAC}.tar");
        let files = [
            ("SKILL.md", 10),
            ("scripts/run.py", 20),
            (bundle.as_str(), 4096),
            (".bundle/unmet/torch", 0),
            (".bundle/unmet/../x", 0),
            (".bundle/notes.txt", 3),
        ];
        let found = SkillBundle::from_files(files);
        let file = BundleFile { rel: bundle.clone(), sha256: HASH.to_owned(), mac: Some(MAC.to_owned()), size: 4096 };
        assert_eq!(found.bundle, Some(file.clone()));
        assert_eq!(found.unmet, ["torch"]);
        assert!(is_bundle_file(&bundle) && !is_bundle_file("scripts/run.py"));
        assert_eq!(bundle_file(HASH, MAC), bundle);
        let reference = file.under("u1/skills/fechas/");
        assert_eq!(reference.key, format!("u1/skills/fechas/{bundle}"));
        assert_eq!(reference.mac.as_deref(), Some(MAC));
    }

    #[test]
    fn an_oversized_or_second_bundle_is_refused_and_said() {
        let other = "f".repeat(64);
        let (first, second) = (format!(".bundle/{HASH}.{MAC}.tar"), format!(".bundle/{other}.{MAC}.tar"));
        let found = SkillBundle::from_files([(first.as_str(), 1), (second.as_str(), 1)]);
        assert_eq!(found.bundle.map(|file| file.sha256).as_deref(), Some(HASH));
        assert_eq!(found.unmet, ["(a second bundle under .bundle/)"]);
        let found = SkillBundle::from_files([(first.as_str(), MAX_BUNDLE_BYTES + 1)]);
        assert!(found.bundle.is_none());
        assert!(found.unmet[0].contains("over"), "{:?}", found.unmet);
    }

    #[test]
    fn names_give_the_hash_and_the_signature_and_nothing_else_is_a_bundle() {
        let signed = format!(".bundle/{HASH}.{MAC}.tar");
        assert_eq!(parse_bundle_file(&signed), Some((HASH.to_owned(), Some(MAC.to_owned()))));
        assert_eq!(parse_bundle_file(&format!(".bundle/{HASH}.tar")), Some((HASH.to_owned(), None)));
        for bad in [
            format!(".bundle/{HASH}.{}.tar", MAC.to_uppercase()),
            format!(".bundle/{HASH}.{}.tar", &MAC[1..]),
            format!(".bundle/{HASH}.{MAC}0.tar"),
            format!(".bundle/{HASH}.{MAC}.{MAC}.tar"),
            format!(".bundle/{HASH}..tar"),
            format!(".bundle/{}.{MAC}.tar", &HASH[1..]),
            format!(".bundle/{HASH}.{MAC}"),
            format!("scripts/{HASH}.{MAC}.tar"),
            format!(".bundle/unmet/{HASH}.tar"),
        ] {
            assert_eq!(parse_bundle_file(&bad), None, "{bad}");
        }
    }

    #[test]
    fn an_unsigned_bundle_is_kept_to_be_refused_and_said_and_a_signed_one_comes_first() {
        let unsigned = format!(".bundle/{HASH}.tar");
        let found = SkillBundle::from_files([(unsigned.as_str(), 10)]);
        assert_eq!(found.bundle.as_ref().map(|file| file.mac.clone()), Some(None));
        assert_eq!(found.unmet, [UNSIGNED_NOTE]);
        let signed = format!(".bundle/{}.{MAC}.tar", "e".repeat(64));
        let found = SkillBundle::from_files([(unsigned.as_str(), 10), (signed.as_str(), 10)]);
        assert_eq!(found.bundle.map(|file| file.rel), Some(signed));
        assert_eq!(found.unmet, ["(a second bundle under .bundle/)"]);
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
