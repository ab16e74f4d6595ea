//! Helpers the benchmarks in `bin/` share: the process's CPU time, a plain turn request, and
//! numbers with thousands separators.

use std::time::Duration;

use agent_core::turn::{OffsetDateTime, TurnRequest};
use agent_core::{SessionId, UserId};

/// The CPU time this process has used so far, user and system together.
pub fn cpu_time() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// A turn of `user` in `session` that says `message`, with no ticket, deadline or idempotency key.
pub fn request(user: &UserId, session: &str, message: impl Into<String>) -> TurnRequest {
    TurnRequest::new(user.clone(), SessionId::parse(session).unwrap(), message, OffsetDateTime::now_utc())
}

/// `12345` → `12,345`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
