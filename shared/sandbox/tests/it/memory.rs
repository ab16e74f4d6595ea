//! A call's memory against real processes. A call that fills its `/tmp` and `/dev/shm` with empty
//! files, as many as it can: the places' inode bounds stop it long before millions, and its memory
//! cgroup is gone when the call returns, with no warning logged (root only: the cgroup and the
//! bounded mounts need it; it needs bwrap and the image's root in `SANDBOX_ROOT`, as `handler.rs`
//! does, whose helpers it uses). In process isolation, as in Lambda, a watchdog bounds the call's processes together, and
//! no command has an address-space limit (Chromium cannot run under one).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandbox::handler::{self, Config};

use super::{bwrap_config, request, run};

/// What the command tries to make in each place: as many files as the call that left its group
/// behind made.
const FILES: u32 = 2_600_000;

#[test]
fn in_process_isolation_a_watchdog_bounds_the_calls_processes_together_and_none_has_an_address_space_limit() {
    let mut config = Config::lambda_default();
    let dir = format!("memory-{}", std::process::id());
    config.scratch_base = std::env::temp_dir().join("agent-sandbox-process-tests").join(dir);
    config.limits.call_memory_bytes = 512 << 20;
    // Four processes of 200 MiB each: together over 512 MiB.
    let four = "for i in 1 2 3 4; do python3 -c \"import time; b = b'x' * (200 << 20); time.sleep(20)\" & done; \
                wait; echo all-finished";
    let response = run(&config, request(four, Duration::from_secs(30)));
    assert_eq!(
        response.stopped.as_deref(),
        Some("used more than 512 MiB of memory (all its processes together)"),
        "{}",
        response.output
    );
    assert!(!response.output.contains("all-finished"), "{}", response.output);
    let limits = run(&config, request("ulimit -v; ulimit -Hv", Duration::from_secs(10)));
    assert_eq!(limits.output, "unlimited\nunlimited\n");
}

#[test]
fn a_call_that_fills_tmp_with_empty_files_leaves_no_cgroup_and_logs_no_warning() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: only a root handler gives a call a memory cgroup and inode-bounded places");
        return;
    }
    let marker = format!("fill-places-{}", std::process::id());
    let script = format!(
        "import os  # {marker}\n\
         for place in (\"/tmp\", \"/dev/shm\"):\n    made = 0\n    try:\n        while made < {FILES}:\n            \
         os.close(os.open(f\"{{place}}/f{{made}}\", os.O_CREAT | os.O_WRONLY, 0o644))\n            made += 1\n    \
         except OSError as err:\n        print(place, err.strerror)\n    print(place, \"made\", made)\n"
    );
    let request = request(&format!("python3 -c '{script}'"), Duration::from_secs(50));
    let (stop, seen) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::<PathBuf>::new())));
    let watcher = {
        let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
        std::thread::spawn(move || watch_groups(&marker, &stop, &seen))
    };
    let warnings = Arc::new(Mutex::new(Vec::new()));
    let subscriber = Warnings(Arc::clone(&warnings));
    let response = tracing::subscriber::with_default(subscriber, || handler::run_blocking(&bwrap_config(), request))
        .unwrap_or_else(|err| panic!("the call failed: {err}"));
    stop.store(true, Ordering::SeqCst);
    watcher.join().expect("the watcher");
    eprintln!("{}", response.output);

    for place in ["/tmp", "/dev/shm"] {
        let made: u32 = response
            .output
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{place} made ")))
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or_else(|| panic!("{place}: {}", response.output));
        assert!((1_000..=65_536).contains(&made), "{place}: {made} files: {}", response.output);
        assert!(response.output.contains(&format!("{place} No space left on device")), "{}", response.output);
    }
    assert_eq!(response.exit_code, Some(0), "{}", response.output);
    let groups = seen.lock().unwrap().clone();
    eprintln!("the call's groups: {groups:?}");
    if has_memory_cgroups() {
        assert!(!groups.is_empty(), "the call's memory cgroup was seen while it ran");
    } else {
        eprintln!("no memory cgroup hierarchy here: only the inode bounds were checked");
    }
    for group in &groups {
        assert!(!group.exists(), "{} is left behind", group.display());
    }
    let warnings = warnings.lock().unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

fn has_memory_cgroups() -> bool {
    Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists()
        || std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").is_ok_and(|text| text.contains("memory"))
}

/// Until `stop`, records the memory cgroups of the processes whose command line holds `marker`.
fn watch_groups(marker: &str, stop: &AtomicBool, seen: &Mutex<Vec<PathBuf>>) {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    while !stop.load(Ordering::SeqCst) {
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if !String::from_utf8_lossy(&cmdline).contains(marker) {
                continue;
            }
            let cgroups = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
            for dir in cgroups.lines().filter(|line| line.contains("sandbox-call-")).filter_map(|line| {
                let (_, rest) = line.split_once(':')?;
                let (controllers, path) = rest.split_once(':')?;
                group_dir(controllers, path, &mountinfo)
            }) {
                let mut seen = seen.lock().unwrap();
                if !seen.contains(&dir) {
                    seen.push(dir);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Where a group of `/proc/<pid>/cgroup` (`controllers`, `path`) is: under the mount of its
/// hierarchy, cgroup v2 when `controllers` is empty, else the v1 mount with the memory controller.
fn group_dir(controllers: &str, path: &str, mountinfo: &str) -> Option<PathBuf> {
    if !controllers.is_empty() && !controllers.split(',').any(|name| name == "memory") {
        return None;
    }
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let fields: Vec<&str> = fs.split(' ').collect();
        let wanted = match controllers.is_empty() {
            true => fields.first() == Some(&"cgroup2"),
            false => fields.first() == Some(&"cgroup") && fields.get(2)?.split(',').any(|option| option == "memory"),
        };
        let mut parts = mount.split(' ');
        let (root, mountpoint) = (parts.nth(3)?, parts.next()?);
        let relative = path.strip_prefix(root.trim_end_matches('/')).unwrap_or(path).trim_start_matches('/');
        wanted.then(|| Path::new(mountpoint).join(relative))
    })
}

/// A subscriber that keeps the warnings and errors logged on this thread.
struct Warnings(Arc<Mutex<Vec<String>>>);

struct Text<'a>(&'a mut String);

impl tracing::field::Visit for Text<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl tracing::Subscriber for Warnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() <= tracing::Level::WARN {
            let mut text = String::new();
            event.record(&mut Text(&mut text));
            self.0.lock().unwrap().push(text);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
