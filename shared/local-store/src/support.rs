//! What both stores share: their counters of every call, and a lock that a panicking test thread
//! does not poison for the others.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How many calls each port received; read by the benchmark.
#[derive(Debug, Default)]
pub struct CallCounts {
    pub object_lists: AtomicU64,
    pub object_gets: AtomicU64,
    pub object_puts: AtomicU64,
    pub session_loads: AtomicU64,
    pub session_commits: AtomicU64,
}

impl CallCounts {
    /// All calls so far, summed over kinds.
    pub fn total(&self) -> u64 {
        [&self.object_lists, &self.object_gets, &self.object_puts, &self.session_loads, &self.session_commits]
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
    }
}

pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
