//! A bundle's tar read as data, before anything runs: only `bundle.json` (a JSON object),
//! `requirements.txt` (pins of the form `name==version --hash=sha256:…`, nothing else) and
//! `wheels/*.whl` (wheels by name and by bytes, each pinned by exactly one line whose hash it
//! matches). Whatever else a tenant could put there (an sdist named `bundle.json`, a `file://`,
//! `-r`, `-e`, `-c` or option line) is refused here, and pip is never given the requirements file.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::Component;

use agent_ports::bundle::{normalize_distribution, MAX_BUNDLE_WHEELS};
use sha2::{Digest, Sha256};

use crate::handler::HandlerError;

/// The largest `bundle.json` or `requirements.txt`.
const MAX_TEXT_BYTES: u64 = 256 << 10;
/// The longest wheel file name.
const MAX_WHEEL_NAME: usize = 200;
/// How far from its end a zip's end-of-central-directory record may lie (its comment is at most
/// 64 KiB).
const EOCD_REACH: usize = 22 + 0xFFFF;

/// A bundle's wheels, each checked against its pin.
#[derive(Debug)]
pub(super) struct Contents {
    /// File names (safe path segments ending in `.whl`) and bytes, in name order.
    pub wheels: Vec<(String, Vec<u8>)>,
}

/// One line of `requirements.txt`.
#[derive(Debug, PartialEq, Eq)]
struct Pin {
    distribution: String,
    version: String,
    hashes: Vec<String>,
}

fn bad(reason: impl Into<String>) -> HandlerError {
    HandlerError::BadBundle(reason.into())
}

/// Reads and checks the tar's members; nothing is written anywhere.
pub(super) fn read(bytes: &[u8]) -> Result<Contents, HandlerError> {
    let mut archive = tar::Archive::new(bytes);
    let entries = archive.entries().map_err(|err| bad(format!("it is not a tar archive ({err})")))?;
    let (mut manifest, mut requirements) = (None, None);
    let mut wheels: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for entry in entries {
        let mut entry = entry.map_err(|err| bad(format!("its tar is damaged ({err})")))?;
        let path = entry.path().map_err(|err| bad(format!("a name in it is not usable ({err})")))?.into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            continue;
        }
        if !kind.is_file() {
            return Err(bad(format!("{} is not a plain file", path.display())));
        }
        let parts: Vec<&str> = path
            .components()
            .map(|part| match part {
                Component::Normal(name) => name.to_str().unwrap_or("\u{0}"),
                _ => "\u{0}",
            })
            .collect();
        let slot = match parts.as_slice() {
            ["bundle.json"] => Slot::Manifest,
            ["requirements.txt"] => Slot::Requirements,
            ["wheels", name] if is_wheel_name(name) => Slot::Wheel((*name).to_owned()),
            _ => return Err(bad(format!("{} is not a file a bundle holds", path.display()))),
        };
        if matches!(slot, Slot::Wheel(_)) && wheels.len() >= MAX_BUNDLE_WHEELS {
            return Err(bad(format!("it holds more than {MAX_BUNDLE_WHEELS} wheels")));
        }
        let limit = match slot {
            Slot::Wheel(_) => bytes.len() as u64,
            _ => MAX_TEXT_BYTES,
        };
        if entry.size() > limit {
            return Err(bad(format!("{} is over {limit} bytes", path.display())));
        }
        let mut content = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
        entry.read_to_end(&mut content).map_err(|err| bad(format!("{} cannot be read ({err})", path.display())))?;
        let taken = match slot {
            Slot::Manifest => manifest.replace(content).is_some(),
            Slot::Requirements => requirements.replace(content).is_some(),
            Slot::Wheel(name) => wheels.insert(name, content).is_some(),
        };
        if taken {
            return Err(bad(format!("{} appears twice", path.display())));
        }
    }
    let manifest = manifest.ok_or_else(|| bad("it has no bundle.json"))?;
    match serde_json::from_slice::<serde_json::Value>(&manifest) {
        Ok(serde_json::Value::Object(_)) => {}
        _ => return Err(bad("its bundle.json is not a JSON object")),
    }
    let requirements = requirements.ok_or_else(|| bad("it has no requirements.txt"))?;
    let requirements = String::from_utf8(requirements).map_err(|_| bad("its requirements.txt is not UTF-8"))?;
    let pins = parse_requirements(&requirements)?;
    if wheels.is_empty() {
        return Err(bad("it holds no wheel"));
    }
    match_wheels(&pins, &wheels)?;
    Ok(Contents { wheels: wheels.into_iter().collect() })
}

enum Slot {
    Manifest,
    Requirements,
    Wheel(String),
}

/// `requirements.txt` as the runtime writes it: comments, blank lines and one pin a line. A line
/// is quoted back by its number only, never by its text.
fn parse_requirements(text: &str) -> Result<Vec<Pin>, HandlerError> {
    let mut pins = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let refused =
            || bad(format!("requirements.txt line {} is not `name==version --hash=sha256:<hex>`", number + 1));
        let mut words = line.split_whitespace();
        let pin = words.next().ok_or_else(refused)?;
        let (distribution, version) = pin.split_once("==").ok_or_else(refused)?;
        if !is_distribution(distribution) || !is_version(version) {
            return Err(refused());
        }
        let hashes: Vec<String> = words
            .map(|word| {
                word.strip_prefix("--hash=sha256:")
                    .filter(|hash| agent_ports::bundle::is_sha256(hash))
                    .map(str::to_owned)
                    .ok_or_else(refused)
            })
            .collect::<Result<_, _>>()?;
        if hashes.is_empty() {
            return Err(refused());
        }
        pins.push(Pin { distribution: normalize_distribution(distribution), version: version.to_owned(), hashes });
    }
    Ok(pins)
}

/// Every wheel is named by exactly one pin (its distribution and version) and hashes to one of
/// its hashes; every pin has exactly one wheel; each wheel's bytes are a zip archive.
fn match_wheels(pins: &[Pin], wheels: &BTreeMap<String, Vec<u8>>) -> Result<(), HandlerError> {
    let mut pinned = HashSet::new();
    for (name, bytes) in wheels {
        if !looks_like_zip(bytes) {
            return Err(bad(format!("{name} is not a wheel: its bytes are not a zip archive")));
        }
        let (distribution, version) =
            wheel_name_parts(name).ok_or_else(|| bad(format!("{name} is not a wheel name")))?;
        let distribution = normalize_distribution(distribution);
        let index = pins
            .iter()
            .position(|pin| pin.distribution == distribution && pin.version == version)
            .ok_or_else(|| bad(format!("{name} is not pinned in requirements.txt")))?;
        if !pinned.insert(index) {
            return Err(bad(format!("{name} is a second wheel for one pin")));
        }
        let sha256 = hex::encode(Sha256::digest(bytes));
        if !pins[index].hashes.contains(&sha256) {
            return Err(bad(format!("{name} does not match its pinned hash")));
        }
    }
    if pinned.len() != pins.len() {
        return Err(bad("requirements.txt pins a package the bundle has no wheel for"));
    }
    Ok(())
}

/// A zip's local-file signature at the start and its end-of-central-directory record near the end.
fn looks_like_zip(bytes: &[u8]) -> bool {
    const LOCAL: &[u8] = b"PK\x03\x04";
    const END: &[u8] = b"PK\x05\x06";
    let tail = &bytes[bytes.len().saturating_sub(EOCD_REACH)..];
    bytes.starts_with(LOCAL) && bytes.len() >= 22 && tail.windows(END.len()).any(|window| window == END)
}

/// `{distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl`, each part of the
/// characters wheel names use, no part empty, no leading dot.
pub(super) fn is_wheel_name(name: &str) -> bool {
    name.len() <= MAX_WHEEL_NAME && !name.starts_with('.') && wheel_name_parts(name).is_some()
}

fn wheel_name_parts(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    let safe =
        |part: &&str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+!".contains(&b));
    ((parts.len() == 5 || parts.len() == 6) && parts.iter().all(safe)).then(|| (parts[0], parts[1]))
}

/// A distribution name as PEP 508 spells one.
fn is_distribution(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 100
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
}

/// A version as wheel names carry one (PEP 440, normalised or not).
fn is_version(version: &str) -> bool {
    !version.is_empty()
        && version.len() <= 64
        && version.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+!-".contains(&b))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The smallest bytes that pass the zip check.
    fn zip_bytes() -> Vec<u8> {
        let mut bytes = b"PK\x03\x04".to_vec();
        bytes.extend_from_slice(&[0; 30]);
        bytes.extend_from_slice(b"PK\x05\x06");
        bytes.extend_from_slice(&[0; 18]);
        bytes
    }

    /// A tar whose names are written as they are, so that names `append_data` would refuse
    /// (`../x`) can be tried.
    pub(in crate::handler::bundle) fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, bytes) in files {
            let mut header = tar::Header::new_gnu();
            header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append(&header, *bytes).unwrap();
        }
        builder.into_inner().unwrap()
    }

    fn bundle_with(requirements: &str, wheel: &[u8]) -> Vec<u8> {
        tar_of(&[
            ("bundle.json", b"{\"format\": 1}"),
            ("requirements.txt", requirements.as_bytes()),
            ("wheels/tiny_pkg-1.0-py3-none-any.whl", wheel),
        ])
    }

    fn error(bytes: &[u8]) -> String {
        match read(bytes) {
            Err(HandlerError::BadBundle(reason)) => reason,
            other => panic!("not refused as a bad bundle: {other:?}"),
        }
    }

    #[test]
    fn a_bundle_as_the_runtime_packs_it_is_read() {
        let wheel = zip_bytes();
        let sha = hex::encode(Sha256::digest(&wheel));
        let requirements = format!("# pinned\n\ntiny-pkg==1.0 --hash=sha256:{sha}\n");
        let contents = read(&bundle_with(&requirements, &wheel)).expect("read");
        assert_eq!(contents.wheels.len(), 1);
        assert_eq!(contents.wheels[0].0, "tiny_pkg-1.0-py3-none-any.whl");
    }

    #[test]
    fn requirements_other_than_hashed_pins_are_refused_without_quoting_them() {
        let wheel = zip_bytes();
        let sha = hex::encode(Sha256::digest(&wheel));
        let pin = format!("tiny-pkg==1.0 --hash=sha256:{sha}");
        for extra in [
            "-r /etc/shadow".to_owned(),
            "-e .".to_owned(),
            "-c /etc/passwd".to_owned(),
            "--index-url http://x".to_owned(),
            format!("evilsd @ file:///opt/bundles/in/bundle.json --hash=sha256:{sha}"),
            "https://example.com/x.whl".to_owned(),
            "tiny-pkg>=1.0".to_owned(),
            format!("tiny-pkg==1.0 --hash=sha256:{sha} --global-option=x"),
        ] {
            let reason = error(&bundle_with(&format!("{pin}\n{extra}\n"), &wheel));
            assert!(reason.contains("line 2"), "{extra}: {reason}");
            assert!(!reason.contains("shadow") && !reason.contains("file:"), "{reason}");
        }
    }

    #[test]
    fn an_sdist_a_stray_file_or_a_wheel_that_does_not_match_its_pin_is_refused() {
        let wheel = zip_bytes();
        let sha = hex::encode(Sha256::digest(&wheel));
        let pin = format!("tiny-pkg==1.0 --hash=sha256:{sha}\n");
        // An sdist (a gzip'd tar) kept as bundle.json, as the attack had it.
        let sdist = tar_of(&[
            ("bundle.json", b"\x1f\x8b\x08\x00sdist"),
            ("requirements.txt", pin.as_bytes()),
            ("wheels/tiny_pkg-1.0-py3-none-any.whl", &wheel),
        ]);
        assert!(error(&sdist).contains("bundle.json"));
        let not_zip =
            bundle_with(&format!("tiny-pkg==1.0 --hash=sha256:{}\n", hex::encode(Sha256::digest(b"x"))), b"x");
        assert!(error(&not_zip).contains("not a zip"));
        let other_hash = bundle_with(&format!("tiny-pkg==1.0 --hash=sha256:{}\n", "0".repeat(64)), &wheel);
        assert!(error(&other_hash).contains("pinned hash"));
        let other_version = bundle_with(&format!("tiny-pkg==2.0 --hash=sha256:{sha}\n"), &wheel);
        assert!(error(&other_version).contains("not pinned"));
        let unpinned_extra = bundle_with(&format!("{pin}other==1 --hash=sha256:{sha}\n"), &wheel);
        assert!(error(&unpinned_extra).contains("no wheel for"));
        for name in ["wheels/evil.tar.gz", "wheels/x.whl", "wheels/.hidden-1-py3-none-any.whl", "setup.py", "../x"] {
            let stray = tar_of(&[("bundle.json", b"{}"), ("requirements.txt", pin.as_bytes()), (name, &wheel)]);
            assert!(error(&stray).contains("not a file a bundle holds"), "{name}");
        }
    }

    #[test]
    fn wheel_names_are_read_strictly() {
        assert!(is_wheel_name("numpy-2.1.0-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"));
        assert!(is_wheel_name("x-1-2-py3-none-any.whl"));
        for bad in
            ["x.whl", "x-1-py3-none.whl", "x-1--py3-none-any.whl", "x-1-py3-none-any.whl/", "a b-1-py3-none-any.whl"]
        {
            assert!(!is_wheel_name(bad), "{bad}");
        }
    }
}
