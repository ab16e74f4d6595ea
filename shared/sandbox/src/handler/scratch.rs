//! The scratch directory of one call: the request's files checked, decoded and written (the
//! workspace read-write, skills and ticket read-only), and the whole directory removed afterwards,
//! whatever happened.

use std::collections::{BTreeSet, HashSet};
use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use agent_ports::sandbox::{MAX_CALL_FILES, MAX_CALL_FILE_BYTES};

use super::{Config, HandlerError, Isolation};
use crate::wire::{check_relative_path, WireFile, WireSkill};

/// A file of the request, decoded: its relative path and bytes.
pub(crate) type Decoded = (String, Vec<u8>);

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

    /// The image's `/etc/passwd` and `/etc/group` with an account for the command's uid (home in the
    /// temporary space): programs that ask who they are (LibreOffice finds its profile so, Python's
    /// `getpass`) get an answer for any uid. bubblewrap mounts them over the image's; in process
    /// isolation, where the root is read-only and the uid Lambda's, nss_wrapper serves them
    /// ([`Scratch::nss_wrapper`]) when the uid has no account of its own.
    fn write_accounts(&self, config: &Config, owner: Option<u32>) -> std::io::Result<()> {
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = owner.map_or_else(|| unsafe { (libc::getuid(), libc::getgid()) }, |uid| (uid, uid));
        let (etc, home) = match &config.isolation {
            Isolation::Bwrap { root, .. } => (root.join("etc"), PathBuf::from("/tmp/home")),
            Isolation::Process if has_account(uid) => return Ok(()),
            Isolation::Process => (PathBuf::from("/etc"), self.tmp.join("home")),
        };
        let (passwd, group) = self.accounts();
        let image_passwd = std::fs::read_to_string(etc.join("passwd")).unwrap_or_default();
        let image_group = std::fs::read_to_string(etc.join("group")).unwrap_or_default();
        let account = format!("sandbox:x:{uid}:{gid}:sandbox:{}:/bin/bash", home.display());
        std::fs::write(&passwd, with_account(&image_passwd, uid, &account))?;
        std::fs::write(&group, with_account(&image_group, gid, &format!("sandbox:x:{gid}:")))?;
        Ok(())
    }

    /// Process isolation: the environment that makes nss_wrapper (in the image) answer from the
    /// call's account files, when [`Scratch::write_accounts`] wrote them.
    pub fn nss_wrapper(&self) -> Vec<(String, String)> {
        let (passwd, group) = self.accounts();
        match NSS_WRAPPER.iter().find(|library| Path::new(library).exists()) {
            Some(library) if passwd.exists() => vec![
                ("LD_PRELOAD".to_owned(), (*library).to_owned()),
                ("NSS_WRAPPER_PASSWD".to_owned(), passwd.to_string_lossy().into_owned()),
                ("NSS_WRAPPER_GROUP".to_owned(), group.to_string_lossy().into_owned()),
            ],
            _ => Vec::new(),
        }
    }

    /// Where [`Scratch::write_accounts`] puts the two files: beside the call's folders, never in one.
    pub fn accounts(&self) -> (PathBuf, PathBuf) {
        (self.root.join("passwd"), self.root.join("group"))
    }
}

/// Where Debian's libnss-wrapper puts the library.
const NSS_WRAPPER: [&str; 2] =
    ["/usr/lib/x86_64-linux-gnu/libnss_wrapper.so", "/usr/lib/aarch64-linux-gnu/libnss_wrapper.so"];

/// Whether the system's account database knows `uid`.
fn has_account(uid: u32) -> bool {
    // SAFETY: getpwuid returns a pointer into static storage or null; only the null check reads it.
    !unsafe { libc::getpwuid(uid) }.is_null()
}

/// `table` (an `/etc/passwd` or `/etc/group`) with `line` added unless an entry has the id already.
fn with_account(table: &str, id: u32, line: &str) -> String {
    let taken = table.lines().any(|entry| entry.split(':').nth(2) == Some(id.to_string().as_str()));
    let mut text = table.to_owned();
    if !taken {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(line);
        text.push('\n');
    }
    text
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

/// Mounts a tmpfs over the (empty) workspace folder, owned by the call's uid: its size is the
/// inputs' pages plus the disk bound, its inodes the inputs' files and folders plus the file
/// bound, so writing past either fails with ENOSPC inside the command, at once. Root only.
fn mount_workspace(dir: &Path, uid: u32, config: &Config, inputs: &Inputs) -> std::io::Result<()> {
    const PAGE: u64 = 4096;
    let pages: u64 = inputs.workspace.iter().map(|(_, bytes)| (bytes.len() as u64).div_ceil(PAGE)).sum();
    let folders: BTreeSet<&str> =
        inputs.workspace.iter().flat_map(|(path, _)| path.match_indices('/').map(|(at, _)| &path[..at])).collect();
    let size = (pages * PAGE).saturating_add(config.limits.disk_bytes);
    // The root folder is an inode too.
    let inodes = (inputs.workspace.len() + folders.len() + config.limits.files + 1) as u64;
    let options = format!("size={size},nr_inodes={inodes},mode=0755,uid={uid},gid={uid}");
    let c = |text: &[u8]| std::ffi::CString::new(text).map_err(std::io::Error::other);
    let (source, target, kind, data) =
        (c(b"tmpfs")?, c(dir.as_os_str().as_encoded_bytes())?, c(b"tmpfs")?, c(options.as_bytes())?);
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    // SAFETY: mount takes NUL-terminated strings that outlive the call.
    if unsafe { libc::mount(source.as_ptr(), target.as_ptr(), kind.as_ptr(), flags, data.as_ptr().cast()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The writable places of a Lambda execution environment other than the scratch, where a command
/// (which runs as the handler's uid there) could leave a file for the next call.
const LEFTOVER_PLACES: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// Process isolation: removes everything of the handler's uid from the writable places but the
/// scratch and the bundle folder (and the folders leading to them), so that nothing a command
/// wrote outside its scratch reaches the next call. Never as root, whose files those places hold.
pub(crate) fn wipe_leftovers(config: &Config) {
    if super::identity::is_uid_root() {
        return;
    }
    let keep = [config.scratch_base.as_path(), config.bundle_dir.as_path()];
    for place in LEFTOVER_PLACES {
        wipe_below(Path::new(place), &keep);
    }
}

fn wipe_below(dir: &Path, keep: &[&Path]) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    for entry in entries.flatten() {
        let path = entry.path();
        if keep.contains(&path.as_path()) {
            continue;
        }
        if keep.iter().any(|kept| kept.starts_with(&path)) {
            wipe_below(&path, keep);
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if meta.uid() != me {
            continue;
        }
        if meta.is_dir() {
            remove_tree(&path);
        } else if let Err(err) = std::fs::remove_file(&path) {
            tracing::warn!(error = %err, "could not remove a file a command left outside its scratch");
        }
    }
}

/// Makes the scratch base if needed: a real directory of this user, traversable by every uid
/// (0711) but not listable, so a call's uid reaches its own directory only by its random name.
pub(crate) fn prepare_base(base: &Path) -> Result<(), HandlerError> {
    let internal = |err: std::io::Error| HandlerError::Internal(format!("scratch base {}: {err}", base.display()));
    if let Some(parent) = base.parent() {
        std::fs::create_dir_all(parent).map_err(internal)?;
    }
    match DirBuilder::new().mode(0o711).create(base) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(internal(err)),
    }
    let meta = std::fs::symlink_metadata(base).map_err(internal)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(HandlerError::Internal(format!(
            "the scratch base {} must be a directory owned by uid {me}",
            base.display()
        )));
    }
    if meta.mode() & 0o7777 != 0o711 {
        std::fs::set_permissions(base, Permissions::from_mode(0o711)).map_err(internal)?;
    }
    Ok(())
}

/// A new directory with a random name under `base`, mode 0700.
fn make_unique(base: &Path) -> Result<PathBuf, HandlerError> {
    for _ in 0..8 {
        let dir = base.join(format!("{:016x}", rand::random::<u64>()));
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(HandlerError::Internal(format!("could not make the scratch: {err}"))),
        }
    }
    Err(HandlerError::Internal("could not find a free scratch name".into()))
}

/// Whether `path` is absolute and below a top-level folder, so that wiping it cannot wipe `/` or
/// `/tmp`.
fn is_safe_to_wipe(path: &Path) -> bool {
    path.is_absolute() && path.components().count() >= 3
}

/// Writes checked files under a new folder `dir`, never over anything (the tree is new).
fn write_tree(dir: &Path, files: &[Decoded]) -> std::io::Result<()> {
    DirBuilder::new().mode(0o755).create(dir)?;
    write_files(dir, files)
}

/// Writes checked files under the empty folder `dir`.
fn write_files(dir: &Path, files: &[Decoded]) -> std::io::Result<()> {
    for (path, bytes) in files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            DirBuilder::new().mode(0o755).recursive(true).create(parent)?;
        }
        let mut file =
            OpenOptions::new().write(true).create_new(true).mode(0o644).custom_flags(libc::O_NOFOLLOW).open(&target)?;
        file.write_all(bytes)?;
    }
    Ok(())
}

/// Hands a tree the handler just wrote to `uid` (and the gid of the same number).
fn chown_tree(dir: &Path, uid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(uid), Some(uid))?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            chown_tree(&entry.path(), uid)?;
        } else {
            std::os::unix::fs::lchown(entry.path(), Some(uid), Some(uid))?;
        }
    }
    Ok(())
}

/// Removes a tree without following links. A folder the command made unwritable or unreadable
/// (possible when it runs as the handler's uid) gets its owner's permissions back first.
pub(crate) fn remove_tree(root: &Path) {
    if std::fs::remove_dir_all(root).is_ok() || std::fs::symlink_metadata(root).is_err() {
        return;
    }
    restore_permissions(root);
    if let Err(err) = std::fs::remove_dir_all(root) {
        tracing::warn!(path = %root.display(), error = %err, "could not remove a sandbox scratch directory");
    }
}

fn restore_permissions(dir: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(dir) else { return };
    if !meta.is_dir() {
        return;
    }
    let _ = std::fs::set_permissions(dir, Permissions::from_mode(0o700));
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            restore_permissions(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_account_is_added_once_for_a_uid_the_table_lacks() {
        let table = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin";
        let added = with_account(table, 200_001, "sandbox:x:200001:200001:sandbox:/tmp/home:/bin/bash");
        assert_eq!(added.lines().count(), 3);
        assert!(added.ends_with("sandbox:x:200001:200001:sandbox:/tmp/home:/bin/bash\n"), "{added}");
        assert_eq!(with_account(table, 0, "sandbox:x:0:0::/tmp/home:/bin/bash"), table, "root has one already");
        assert_eq!(with_account("", 7, "sandbox:x:7:"), "sandbox:x:7:\n");
    }
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

    #[test]
    fn only_deep_absolute_paths_are_wiped() {
        assert!(is_safe_to_wipe(Path::new("/tmp/sandbox")));
        for unsafe_path in ["/", "/tmp", "tmp/sandbox", ""] {
            assert!(!is_safe_to_wipe(Path::new(unsafe_path)), "{unsafe_path:?}");
        }
    }
}
