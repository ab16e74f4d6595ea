//! Helpers the benchmarks in `bin/` share: this process's and another's CPU time, a plain turn
//! request, a synthetic tenant library, and numbers with thousands separators.

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

/// The on-CPU time of every thread of process `pid` so far (the first field of each thread's
/// `schedstat`, in nanoseconds). Threads that have exited are not counted; a Lambda function's
/// runtime keeps its threads.
pub fn process_cpu(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Duration::ZERO };
    let nanos: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()))
        .sum();
    Duration::from_nanos(nanos)
}

/// A synthetic skill's SKILL.md: frontmatter of ordinary size and 60 lines of instructions.
pub fn skill_md(index: usize) -> String {
    format!(
        "---\nname: skill-{index:04}\ndescription: Synthetic skill number {index} for the benchmark, with a \
         description of ordinary length.\ncategory: cat{}\ntools: [ls, read_file]\n---\n\n# Skill {index}\n\n{}",
        index % 10,
        "Instructions line for the benchmark skill.\n".repeat(60)
    )
}

/// Every object of a tenant with `count` skills, keyed relative to `{user}/`: three files a skill.
pub fn tenant_skills(count: usize) -> Vec<(String, Vec<u8>)> {
    (0..count)
        .flat_map(|i| {
            let dir = format!("skills/cat{}/skill-{i:04}", i % 10);
            [
                (format!("{dir}/SKILL.md"), skill_md(i).into_bytes()),
                (format!("{dir}/reference.md"), b"Reference material.\n".repeat(20)),
                (
                    format!("{dir}/examples/example.md"),
                    format!("# Example for skill {i}\n\n{}", "An example of the skill at work.\n".repeat(10))
                        .into_bytes(),
                ),
            ]
        })
        .collect()
}
