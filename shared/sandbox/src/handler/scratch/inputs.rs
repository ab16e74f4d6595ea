//! The request's files checked and decoded before anything is written: the bounds from the base64
//! lengths first, then every path and skill name.

use std::collections::HashSet;

use agent_ports::sandbox::{MAX_CALL_FILES, MAX_CALL_FILE_BYTES};

use crate::handler::HandlerError;
use crate::wire::{check_relative_path, WireFile, WireSkill};

/// A file of the request, decoded: its relative path and bytes.
pub(super) type Decoded = (String, Vec<u8>);

/// The request's files, checked and decoded.
pub(crate) struct Inputs {
    pub workspace: Vec<Decoded>,
    pub skills: Vec<(String, Vec<Decoded>)>,
    pub ticket: Option<Vec<Decoded>>,
}

impl Inputs {
    /// Checks the bounds first (from the base64 lengths, before decoding anything), then every
    /// path and name, then decodes.
    pub(crate) fn decode(
        workspace: Vec<WireFile>,
        skills: Vec<WireSkill>,
        ticket: Option<Vec<WireFile>>,
    ) -> Result<Self, HandlerError> {
        let all =
            || workspace.iter().chain(skills.iter().flat_map(|skill| &skill.files)).chain(ticket.iter().flatten());
        let (bytes, files) = all().fold((0u64, 0usize), |(bytes, files), file| (bytes + file.decoded_len(), files + 1));
        if bytes > MAX_CALL_FILE_BYTES || files > MAX_CALL_FILES {
            return Err(HandlerError::TooLarge { bytes, files });
        }
        let mut names = HashSet::new();
        for skill in &skills {
            check_skill_name(&skill.name)?;
            if !names.insert(skill.name.as_str()) {
                return Err(HandlerError::InvalidRequest(format!("the skill {:?} is listed twice", skill.name)));
            }
        }
        Ok(Self {
            workspace: decode_tree("workspace", workspace)?,
            skills: skills
                .into_iter()
                .map(|skill| Ok((skill.name.clone(), decode_tree(&format!("skill {}", skill.name), skill.files)?)))
                .collect::<Result<_, HandlerError>>()?,
            ticket: ticket.map(|files| decode_tree("ticket", files)).transpose()?,
        })
    }
}

/// A skill's name is one safe path segment.
fn check_skill_name(name: &str) -> Result<(), HandlerError> {
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.len() > 128 || name.starts_with('.') || !name.chars().all(safe) {
        return Err(HandlerError::InvalidRequest(format!("invalid skill name {name:?}")));
    }
    Ok(())
}

/// Checks one root's paths (valid, unique, no file where another needs a folder) and decodes.
fn decode_tree(root: &str, files: Vec<WireFile>) -> Result<Vec<Decoded>, HandlerError> {
    let invalid = |message: String| HandlerError::InvalidRequest(format!("{root}: {message}"));
    let mut paths = HashSet::new();
    let mut folders = HashSet::new();
    for file in &files {
        check_relative_path(&file.path).map_err(|err| invalid(format!("{:?}: {err}", file.path)))?;
        if !paths.insert(file.path.as_str()) {
            return Err(invalid(format!("{:?} is listed twice", file.path)));
        }
        let mut at = 0;
        while let Some(slash) = file.path[at..].find('/') {
            folders.insert(&file.path[..at + slash]);
            at += slash + 1;
        }
    }
    if let Some(clash) = paths.intersection(&folders).next() {
        return Err(invalid(format!("{clash:?} is both a file and a folder")));
    }
    files
        .into_iter()
        .map(|file| {
            let bytes = file.decode(MAX_CALL_FILE_BYTES).map_err(invalid)?;
            Ok((file.path, bytes))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> WireFile {
        WireFile::encode(path, b"x")
    }

    #[test]
    fn bad_paths_and_names_are_invalid_requests() {
        let workspace = |files: Vec<WireFile>| Inputs::decode(files, vec![], None);
        assert!(workspace(vec![file("a/b"), file("c")]).is_ok());
        for bad in [vec![file("../x")], vec![file("/etc/x")], vec![file("a"), file("a")], vec![file("a"), file("a/b")]]
        {
            assert!(matches!(workspace(bad), Err(HandlerError::InvalidRequest(_))));
        }
        let skill = |name: &str| WireSkill { name: name.into(), files: vec![file("SKILL.md")], bundle: None };
        for bad in ["", "..", ".hidden", "a/b", "a b"] {
            assert!(matches!(Inputs::decode(vec![], vec![skill(bad)], None), Err(HandlerError::InvalidRequest(_))));
        }
        let twice = vec![skill("pdf"), skill("pdf")];
        assert!(matches!(Inputs::decode(vec![], twice, None), Err(HandlerError::InvalidRequest(_))));
        let bad_base64 = WireFile { path: "a".into(), data: "!!!!".into() };
        assert!(matches!(workspace(vec![bad_base64]), Err(HandlerError::InvalidRequest(_))));
    }

    #[test]
    fn too_many_bytes_or_files_are_too_large_before_decoding() {
        let big = WireFile { path: "big".into(), data: "A".repeat(6_000_000) };
        assert!(matches!(Inputs::decode(vec![big], vec![], None), Err(HandlerError::TooLarge { files: 1, .. })));
        let many = (0..=MAX_CALL_FILES).map(|n| file(&format!("f{n}"))).collect();
        assert!(matches!(Inputs::decode(many, vec![], None), Err(HandlerError::TooLarge { .. })));
    }
}
