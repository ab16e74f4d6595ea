//! The expert URLs this process found serving a pre-2026 revision (they refused `server/discover`),
//! so that later connections go straight to the `initialize` handshake. Process-wide and bounded; a
//! server is forgotten when a connection to it fails, and then probed again.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// At most this many URLs are remembered; past it the set starts again (a probe costs one round trip).
const MAX_REMEMBERED: usize = 512;

fn known() -> &'static Mutex<HashSet<String>> {
    static KNOWN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    KNOWN.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Whether the server at `url` was found pre-2026.
pub(super) fn contains(url: &str) -> bool {
    known().lock().unwrap_or_else(|poisoned| poisoned.into_inner()).contains(url)
}

/// Remembers that the server at `url` speaks a pre-2026 revision.
pub(super) fn remember(url: &str) {
    let mut known = known().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if known.len() >= MAX_REMEMBERED {
        known.clear();
    }
    known.insert(url.to_owned());
}

/// Forgets the server at `url`: its next connection probes again.
pub(super) fn forget(url: &str) {
    known().lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(url);
}
