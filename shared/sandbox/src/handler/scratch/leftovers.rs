//! Process isolation's clean-up after a call: whatever the command left of the handler's uid in
//! the environment's other writable places goes, so that nothing reaches the next call.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::files::remove_tree;
use crate::handler::Config;

/// The writable places of a Lambda execution environment other than the scratch, where a command
/// (which runs as the handler's uid there) could leave a file for the next call.
const LEFTOVER_PLACES: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// Process isolation: removes everything of the handler's uid from the writable places but the
/// scratch and the bundle folder (and the folders leading to them), and whatever in the bundle
/// folder the handler did not install or a command changed, so that nothing a command wrote
/// outside its scratch reaches the next call. Never as root, whose files those places hold.
pub(crate) fn wipe_leftovers(config: &Config) {
    // The bundle folder is kept, but only as the handler left it (root's own, too).
    crate::handler::bundle::audit(config);
    if crate::handler::identity::is_uid_root() {
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
