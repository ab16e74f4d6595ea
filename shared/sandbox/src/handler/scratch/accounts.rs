//! The call's account: the image's `/etc/passwd` and `/etc/group` with an entry for the command's
//! uid, beside the call's folders, and the nss_wrapper environment that serves them where they
//! cannot be mounted.

use std::path::{Path, PathBuf};

use crate::handler::{Config, Isolation};

/// Where [`write`] puts the two files of the scratch at `root`: beside the call's folders, never in one.
pub(super) fn files(root: &Path) -> (PathBuf, PathBuf) {
    (root.join("passwd"), root.join("group"))
}

/// The image's `/etc/passwd` and `/etc/group` with an account for the command's uid (home in the
/// temporary space `tmp`): programs that ask who they are (LibreOffice finds its profile so, Python's
/// `getpass`) get an answer for any uid. bubblewrap mounts them over the image's; in process
/// isolation, where the root is read-only and the uid Lambda's, nss_wrapper serves them
/// ([`nss_wrapper`]) when the uid has no account of its own.
pub(super) fn write(root: &Path, tmp: &Path, config: &Config, owner: Option<u32>) -> std::io::Result<()> {
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = owner.map_or_else(|| unsafe { (libc::getuid(), libc::getgid()) }, |uid| (uid, uid));
    let (etc, home) = match &config.isolation {
        Isolation::Bwrap { root, .. } => (root.join("etc"), PathBuf::from("/tmp/home")),
        Isolation::Process if has_account(uid) => return Ok(()),
        Isolation::Process => (PathBuf::from("/etc"), tmp.join("home")),
    };
    let (passwd, group) = files(root);
    let image_passwd = std::fs::read_to_string(etc.join("passwd")).unwrap_or_default();
    let image_group = std::fs::read_to_string(etc.join("group")).unwrap_or_default();
    let account = format!("sandbox:x:{uid}:{gid}:sandbox:{}:/bin/bash", home.display());
    std::fs::write(&passwd, with_account(&image_passwd, uid, &account))?;
    std::fs::write(&group, with_account(&image_group, gid, &format!("sandbox:x:{gid}:")))?;
    Ok(())
}

/// Process isolation: the environment that makes nss_wrapper (in the image) answer from the
/// account files of the scratch at `root`, when [`write`] wrote them.
pub(super) fn nss_wrapper(root: &Path) -> Vec<(String, String)> {
    let (passwd, group) = files(root);
    match NSS_WRAPPER.iter().find(|library| Path::new(library).exists()) {
        Some(library) if passwd.exists() => vec![
            ("LD_PRELOAD".to_owned(), (*library).to_owned()),
            ("NSS_WRAPPER_PASSWD".to_owned(), passwd.to_string_lossy().into_owned()),
            ("NSS_WRAPPER_GROUP".to_owned(), group.to_string_lossy().into_owned()),
        ],
        _ => Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_added_once_for_a_uid_the_table_lacks() {
        let table = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin";
        let added = with_account(table, 200_001, "sandbox:x:200001:200001:sandbox:/tmp/home:/bin/bash");
        assert_eq!(added.lines().count(), 3);
        assert!(added.ends_with("sandbox:x:200001:200001:sandbox:/tmp/home:/bin/bash\n"), "{added}");
        assert_eq!(with_account(table, 0, "sandbox:x:0:0::/tmp/home:/bin/bash"), table, "root has one already");
        assert_eq!(with_account("", 7, "sandbox:x:7:"), "sandbox:x:7:\n");
    }
}
