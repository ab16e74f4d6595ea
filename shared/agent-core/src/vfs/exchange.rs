//! The file exchange with the sandbox: the files a command may see (the workspace, the visible
//! skills' folders, the ticket) going in, and what it changed under the workspace coming back,
//! kept within the workspace's quotas, binary files byte for byte.

use std::collections::BTreeMap;

use super::resolve::RootRef;
use super::storage::sha256_hex;
use super::{path, Entry, Vfs, VfsError, MAX_WORKSPACE_BYTES, MAX_WORKSPACE_FILES, MAX_WORKSPACE_PATH_BYTES};
use crate::sandbox::{SandboxError, SandboxFile, SkillMount, WorkspaceChanges, MAX_CALL_FILES, MAX_CALL_FILE_BYTES};
use crate::store::WorkspaceFile;

/// What one command is given: the workspace, the visible skills and the ticket, with their bytes.
#[derive(Debug, Default)]
pub struct SandboxFiles {
    pub workspace: Vec<SandboxFile>,
    pub skills: Vec<SkillMount>,
    pub ticket: Option<Vec<SandboxFile>>,
    /// Bytes of all the files together.
    pub bytes: u64,
}

/// Counts what a call carries against its bounds, before anything is read.
#[derive(Default)]
struct Tally {
    files: usize,
    bytes: u64,
}

impl Tally {
    fn add(&mut self, entries: &[Entry]) -> Result<(), VfsError> {
        self.files += entries.len();
        self.bytes += entries.iter().map(|entry| entry.size).sum::<u64>();
        if self.files > MAX_CALL_FILES || self.bytes > MAX_CALL_FILE_BYTES {
            let error = SandboxError::TooLarge {
                bytes: self.bytes,
                files: self.files,
                max_bytes: MAX_CALL_FILE_BYTES,
                max_files: MAX_CALL_FILES,
            };
            return Err(VfsError::Quota(error.to_string().trim_start_matches("Error: ").to_owned()));
        }
        Ok(())
    }
}

impl Vfs<'_> {
    /// Every file a command may see, read through the turn's caches. Refused, before anything is
    /// read, when they are over what one call may carry.
    pub async fn sandbox_files(&self) -> Result<SandboxFiles, VfsError> {
        let mut tally = Tally::default();
        let workspace_entries = self.entries(RootRef::Workspace).await?;
        tally.add(&workspace_entries)?;
        let mut skill_entries = Vec::new();
        for skill in self.visible_skills() {
            let entries = self.entries(RootRef::Skill(skill)).await?;
            tally.add(&entries)?;
            skill_entries.push((skill.name().to_owned(), RootRef::Skill(skill), entries));
        }
        let ticket_entries = match &self.ticket {
            Some(ticket) => {
                let entries = self.entries(RootRef::Ticket(ticket)).await?;
                tally.add(&entries)?;
                Some((RootRef::Ticket(ticket), entries))
            }
            None => None,
        };

        let workspace = self.read_all(RootRef::Workspace, &workspace_entries).await?;
        let mut skills = Vec::new();
        for (name, root, entries) in skill_entries {
            let bundle = match root {
                RootRef::Skill(skill) => self.skill_bundle(skill),
                _ => None,
            };
            skills.push(SkillMount { name, files: self.read_all(root, &entries).await?, bundle });
        }
        let ticket = match ticket_entries {
            Some((root, entries)) => Some(self.read_all(root, &entries).await?),
            None => None,
        };
        Ok(SandboxFiles { workspace, skills, ticket, bytes: tally.bytes })
    }

    async fn read_all(&self, root: RootRef<'_>, entries: &[Entry]) -> Result<Vec<SandboxFile>, VfsError> {
        let mut files = Vec::with_capacity(entries.len());
        for entry in entries {
            let bytes = self.load(&root.join(&entry.rel), entry).await?;
            files.push(SandboxFile { path: entry.rel.clone(), bytes });
        }
        Ok(files)
    }

    /// Applies what a command changed under the workspace: deletions, then new and changed files.
    /// All or nothing: when the result would break a quota, nothing is kept and the error says
    /// which. Returns a one-line summary of what was kept ("" when nothing changed).
    pub async fn apply_sandbox_changes(&mut self, changes: &WorkspaceChanges) -> Result<String, VfsError> {
        let mut manifest: BTreeMap<String, WorkspaceFile> = self.workspace.clone();
        let mut refused = Vec::new();
        let mut deleted = Vec::new();
        for rel in &changes.deleted {
            if manifest.remove(rel).is_some() {
                deleted.push(rel.as_str());
            }
        }
        let mut written = Vec::new();
        for file in &changes.written {
            if !path::is_clean_relative(&file.path) || file.path.len() > MAX_WORKSPACE_PATH_BYTES {
                refused.push(format!("{} (not a valid /workspace path)", file.path.escape_debug()));
                continue;
            }
            let sha256 = sha256_hex(&file.bytes);
            if manifest.get(&file.path).is_some_and(|known| known.sha256 == sha256) {
                continue;
            }
            manifest.insert(file.path.clone(), WorkspaceFile { sha256, size: file.bytes.len() as u64 });
            written.push(file);
        }
        // A path that became a directory (or a file under a former file) leaves no stale entry:
        // the sandbox's view is a real filesystem, so drop entries that it reports under a file.
        let files: Vec<String> = manifest.keys().cloned().collect();
        for name in &files {
            let prefix = format!("{name}/");
            if files.iter().any(|other| other.starts_with(&prefix)) {
                manifest.remove(name);
            }
        }
        let total: u64 = manifest.values().map(|file| file.size).sum();
        if manifest.len() > MAX_WORKSPACE_FILES {
            return Err(VfsError::Quota(format!(
                "/workspace would hold {} files, over its limit of {MAX_WORKSPACE_FILES}; none of the command's \
                 changes were kept. Write fewer files (an archive, say), or delete files you no longer need",
                manifest.len()
            )));
        }
        if total > MAX_WORKSPACE_BYTES {
            return Err(VfsError::Quota(format!(
                "/workspace would hold {total} bytes, over its limit of {} MiB; none of the command's changes were \
                 kept. Delete files you no longer need",
                MAX_WORKSPACE_BYTES / (1024 * 1024)
            )));
        }
        for file in &written {
            let stored = self.store_blob(&file.bytes);
            self.note_written(&file.path, stored.size);
        }
        self.workspace = manifest;
        self.trim_unsaved();
        let mut summary = Vec::new();
        if !written.is_empty() {
            let shown: Vec<String> =
                written.iter().take(20).map(|f| format!("/workspace/{} ({} bytes)", f.path, f.bytes.len())).collect();
            let more = written.len().saturating_sub(shown.len());
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            summary.push(format!("Files written: {}{more}", shown.join(", ")));
        }
        if !deleted.is_empty() {
            summary.push(format!("Files deleted: {}", deleted.len()));
        }
        if !refused.is_empty() {
            summary.push(format!("Not kept: {}", refused.join(", ")));
        }
        Ok(summary.join("; "))
    }
}
