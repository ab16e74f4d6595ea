//! The scratch directory of one call: the request's files checked, decoded and written (the
//! workspace read-write, skills and ticket read-only), and the whole directory removed afterwards,
//! whatever happened. `inputs` checks and decodes, `files` writes and removes, `accounts` gives the
//! command's uid a name, `leftovers` cleans the rest of a Lambda environment.

mod accounts;
mod files;
mod inputs;
mod leftovers;

use std::collections::BTreeSet;
use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::{Config, HandlerError, Isolation};
pub(crate) use files::prepare_base;
use files::{chown_tree, is_safe_to_wipe, make_unique, mount_workspace, write_files, write_tree};
pub(crate) use files::{mount_tmpfs, remove_tree};
pub(crate) use inputs::Inputs;
pub(crate) use leftovers::wipe_leftovers;

/// One call's directory and the folders in it; dropping it removes everything.
pub(crate) struct Scratch {
    pub root: PathBuf,
    pub workspace: PathBuf,
    pub skills: PathBuf,
    pub ticket: Option<PathBuf>,
    /// Process isolation: the command's `TMPDIR`.
    pub tmp: PathBuf,
    /// Process isolation: put first on `PATH`, with `python` for `python3`.
    pub bin: PathBuf,
    /// Files and folders under the workspace before the command ran.
    pub baseline_entries: usize,
    /// Bytes under the workspace before the command ran.
    pub baseline_bytes: u64,
    /// The installed sites of the call's skills' bundles (outside the scratch; never removed with it).
    pub bundles: Vec<PathBuf>,
    /// The workspace is a tmpfs of the call's own whose size and inode count are its bounds, so
    /// the filesystem enforces them (bwrap as root); otherwise they are measured while it runs.
    pub workspace_bounded: bool,
}

impl Scratch {
    /// Makes the directory and writes the inputs; with an `owner` (bwrap as root), the directory
    /// and the workspace are handed to that uid, and skills and ticket stay root's, read-only.
    pub(crate) fn create(config: &Config, owner: Option<u32>, inputs: &Inputs) -> Result<Self, HandlerError> {
        let internal = |what: &str, err: std::io::Error| HandlerError::Internal(format!("{what}: {err}"));
        let root = match config.isolation {
            Isolation::Bwrap { .. } => make_unique(&config.scratch_base)?,
            Isolation::Process => {
                let root = config.scratch_base.clone();
                if !is_safe_to_wipe(&root) {
                    return Err(HandlerError::Internal(format!("unsafe scratch path {}", root.display())));
                }
                if std::fs::symlink_metadata(&root).is_ok() {
                    remove_tree(&root);
                }
                if let Some(parent) = root.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|err| internal("could not make the scratch parent", err))?;
                }
                DirBuilder::new()
                    .mode(0o700)
                    .create(&root)
                    .map_err(|err| internal("could not make the scratch", err))?;
                root
            }
        };
        // From here on, the directory goes away with `scratch` on every return.
        let mut scratch = Self {
            workspace: root.join("workspace"),
            skills: root.join("skills"),
            ticket: inputs.ticket.as_ref().map(|_| root.join("ticket")),
            tmp: root.join("tmp"),
            bin: root.join("bin"),
            root,
            baseline_entries: 0,
            baseline_bytes: 0,
            bundles: Vec::new(),
            workspace_bounded: false,
        };
        scratch.fill(config, owner, inputs).map_err(|err| internal("could not write the call's files", err))?;
        let folders: BTreeSet<&str> =
            inputs.workspace.iter().flat_map(|(path, _)| path.match_indices('/').map(|(at, _)| &path[..at])).collect();
        scratch.baseline_entries = inputs.workspace.len() + folders.len();
        scratch.baseline_bytes = inputs.workspace.iter().map(|(_, bytes)| bytes.len() as u64).sum();
        Ok(scratch)
    }

    fn fill(&mut self, config: &Config, owner: Option<u32>, inputs: &Inputs) -> std::io::Result<()> {
        DirBuilder::new().mode(0o755).create(&self.workspace)?;
        if let (Isolation::Bwrap { .. }, Some(uid)) = (&config.isolation, owner) {
            mount_workspace(&self.workspace, uid, config, inputs)?;
            self.workspace_bounded = true;
        }
        write_files(&self.workspace, &inputs.workspace)?;
        DirBuilder::new().mode(0o755).create(&self.skills)?;
        // Ordinary modes (files 0644, folders 0755), so what a command copies out of a skill is an
        // ordinary writable file. bubblewrap mounts the skills and the ticket read-only; in
        // process isolation they are this call's own copies, never brought back.
        for (name, files) in &inputs.skills {
            write_tree(&self.skills.join(name), files)?;
        }
        if let (Some(dir), Some(files)) = (&self.ticket, &inputs.ticket) {
            write_tree(dir, files)?;
        }
        if config.isolation == Isolation::Process {
            DirBuilder::new().mode(0o700).create(&self.tmp)?;
            DirBuilder::new().mode(0o700).create(self.tmp.join("home"))?;
            DirBuilder::new().mode(0o755).create(&self.bin)?;
            let python =
                ["/usr/local/bin/python3", "/usr/bin/python3"].into_iter().find(|path| Path::new(path).exists());
            if let Some(python) = python {
                std::os::unix::fs::symlink(python, self.bin.join("python"))?;
            }
        }
        self.write_accounts(config, owner)?;
        if let Some(uid) = owner {
            std::os::unix::fs::lchown(&self.root, Some(uid), Some(uid))?;
            chown_tree(&self.workspace, uid)?;
        }
        Ok(())
    }

    /// The call's account files ([`accounts::write`]).
    fn write_accounts(&self, config: &Config, owner: Option<u32>) -> std::io::Result<()> {
        accounts::write(&self.root, &self.tmp, config, owner)
    }

    /// Process isolation: the environment that makes nss_wrapper (in the image) answer from the
    /// call's account files, when [`Scratch::write_accounts`] wrote them.
    pub fn nss_wrapper(&self) -> Vec<(String, String)> {
        accounts::nss_wrapper(&self.root)
    }

    /// Where [`Scratch::write_accounts`] puts the two files: beside the call's folders, never in one.
    pub fn accounts(&self) -> (PathBuf, PathBuf) {
        accounts::files(&self.root)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.workspace_bounded {
            let path = std::ffi::CString::new(self.workspace.as_os_str().as_encoded_bytes()).unwrap_or_default();
            // SAFETY: umount2 takes a NUL-terminated path and flags.
            if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } != 0 {
                let err = std::io::Error::last_os_error();
                tracing::warn!(path = %self.workspace.display(), error = %err, "could not unmount a call's workspace");
                return;
            }
        }
        remove_tree(&self.root);
    }
}
