//! The `execute` benchmark: what one command in the local sandbox costs, what a Lambda invocation
//! of the `sandbox` function would carry for it, and what the runtime adds around it in a turn.
//!
//! 1. warm calls of `true` and `echo hi` straight through `LocalSandbox::execute` (empty workspace,
//!    no skills), and `true` over a workspace of 50 files of 4 KiB;
//! 2. the same with a realistic input: the `tests/skills/pdf-form` skill mounted, a workspace of
//!    three files, and its `fill_form.py` filling the form with pypdf; and `tests/skills/office-docs`
//!    building a sheet with openpyxl and recalculating it with LibreOffice headless (`recalc.py`);
//! 3. the bytes one call moves: the JSON of the `WireRequest` and of the `WireResponse`, and the
//!    time of their round trip through JSON and base64 (part of every local call);
//! 4. a whole turn over the embedded store with a scripted model whose one tool call is
//!    `execute {"command": "true"}`, against the same turn calling `todoread` instead (no sandbox),
//!    with workspaces of 0 and 50 files of 4 KiB and tenants of 10 and 10,000 skills; the sandbox
//!    call inside the turn is timed on its own, and the runtime's overhead is the difference of the
//!    two turns less the direct call of (1) over the same workspace, made beside those turns (same
//!    process, same moment: the call's cost follows the process's size, see 5);
//! 5. the direct call of `true` while this process holds 0, 64 and 256 MiB more memory: the
//!    handler forks the calling process for every command, and the embedded store keeps a large
//!    tenant's library in this process;
//! 6. the compiled `sandbox` function in the image, as Lambda runs it: a fresh environment's start
//!    and first call, and a warm environment's call;
//! 7. a skill's bundle (pinned wheels made here, offline: a few pure-Python packages packed as
//!    `skills sync` packs them, in an in-memory store): a tenant's first call, which fetches the
//!    bundle and installs it with the image's pip into a fresh bundle folder (each run a new
//!    tenant), the same call once it is installed, and a call importing only the standard library.
//!
//! Times are wall times: median, p95 and minimum over `SANDBOX_BENCH_RUNS` runs (default 30) after
//! a few warm-up runs. Progress goes to stderr, the tables to stdout. `SANDBOX_BENCH_SECTIONS`
//! (section numbers separated by commas, `1` and `2` being one; all by default) runs only some.
//! Run with `cargo xtask bench`, or alone with
//! `SANDBOX_ROOT=$(cargo xtask sandbox image) cargo run --release -p benches --bin sandbox-bench`
//! (needs bubblewrap; the commands run in the sandbox image; section 7 needs `python3` on the host
//! to write its wheels).

mod bundle;
mod calls;
mod figures;
mod image;
mod turns;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::turn::{AgentConfig, TurnService};
use agent_core::{SessionId, UserId};
use local_stack::stack::repo_root;
use local_store::{MemoryObjectStore, MemorySessionStore};
use sandbox::LocalSandbox;

use crate::bundle::{time_bundle, BUNDLE_TENANTS, BUNDLE_WHEELS, IMPORT_BUNDLE};
use crate::calls::{
    exec_request, filled_the_form, pdf_workspace, printed_hi, recalculated, skill_mount, succeeded, time_direct,
    time_with_ballast, wire_sizes, workspace_files, DirectCase, BALLAST_MIB,
};
use crate::figures::{header, ms, ms_diff, row, stats, thousands};
use crate::image::{image_environment, image_python};
use crate::turns::{
    rss_kib, tenant_name, time_turns, turn_request, upload_tenant, zero_latency_model, TimedSandbox, TurnFigures,
};

/// Warm-up runs before each measured series.
const WARMUP: usize = 3;
/// Files of the larger workspace, and the size of each.
const WORKSPACE_FILES: usize = 50;
const FILE_BYTES: usize = 4096;
/// The tenants' library sizes, each with the size of another tenant's library held in the same
/// embedded store: the middle one tells a cost of the library from a cost of the process's size.
const CATALOGS: [(usize, usize); 3] = [(10, 0), (10, 10_000), (10_000, 0)];
const FILL_FORM: &str =
    "python /skills/pdf-form/scripts/fill_form.py /skills/pdf-form/assets/form.pdf values.json filled.pdf";
/// A sheet with formulas, then LibreOffice's recalculation of it (a fresh profile each call).
const RECALC: &str = "python /skills/office-docs/scripts/build_sheet.py b.xlsx >/dev/null && \
                      python /skills/office-docs/scripts/recalc.py b.xlsx";
const RUN_TRUE: &str = "Run true.";
const READ_TODOS: &str = "Read the todos.";
/// Not a message: the direct call made beside the turns.
const DIRECT: &str = "";

fn runs() -> usize {
    std::env::var("SANDBOX_BENCH_RUNS").ok().and_then(|n| n.parse().ok()).filter(|&n| n > 0).unwrap_or(30)
}

/// The sections to run: `SANDBOX_BENCH_SECTIONS` (`1,7`: numbers separated by commas), all by default.
fn sections() -> Vec<u32> {
    let all = (1..=7).collect();
    let Some(text) = std::env::var("SANDBOX_BENCH_SECTIONS").ok().filter(|text| !text.trim().is_empty()) else {
        return all;
    };
    let chosen: Vec<u32> = text
        .split(',')
        .map(|part| match part.trim().parse() {
            Ok(n) if (1..=7).contains(&n) => n,
            _ => {
                eprintln!("sandbox-bench: SANDBOX_BENCH_SECTIONS={text}: sections are numbers from 1 to 7");
                std::process::exit(2);
            }
        })
        .collect();
    chosen
}

/// The first line a program prints for `--version`, or why not.
fn version_of(program: &str, arg: &str) -> String {
    std::process::Command::new(program).arg(arg).output().ok().map_or_else(
        || "not found".to_owned(),
        |out| {
            let text = if out.stdout.is_empty() { out.stderr } else { out.stdout };
            String::from_utf8_lossy(&text).lines().next().unwrap_or("").trim().to_owned()
        },
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn main() {
    let runs = runs();
    let sections = sections();
    let wanted = |section: u32| sections.contains(&section);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let started = Instant::now();
        let load_before = load_average();
        let local = match LocalSandbox::from_env() {
            Ok(local) => Arc::new(local),
            Err(err) => {
                eprintln!("sandbox-bench: the local sandbox is not available: {err}");
                std::process::exit(1);
            }
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;

        println!("# sandbox-bench: `execute` in the local sandbox, and what the runtime adds\n");
        println!(
            "Machine: {cores} cores (nproc), Linux {}, {}, {}{}; {runs} runs per figure after {WARMUP} warm-up \
             runs; wall times.\n",
            kernel.trim(),
            version_of("bwrap", "--version"),
            image_python(),
            if root { ", run as root (a fresh unprivileged uid per call)" } else { "" }
        );

        // 1 and 2. Direct calls.
        let pdf_form = skill_mount("pdf-form", &repo_root().join("tests/skills/pdf-form"));
        let mut cases = vec![
            DirectCase {
                label: "`true`, empty workspace, no skills".into(),
                request: exec_request("true", vec![], vec![]),
                check: succeeded,
            },
            DirectCase {
                label: "`echo hi`, empty workspace, no skills".into(),
                request: exec_request("echo hi", vec![], vec![]),
                check: printed_hi,
            },
            DirectCase {
                label: format!("`true`, workspace of {WORKSPACE_FILES} files of 4 KiB"),
                request: exec_request("true", workspace_files(WORKSPACE_FILES), vec![]),
                check: succeeded,
            },
        ];
        cases.push(DirectCase {
            label: format!(
                "pdf-form `fill_form.py` (skill of {} files mounted, workspace of 3 files)",
                pdf_form.files.len()
            ),
            request: exec_request(FILL_FORM, pdf_workspace(), vec![pdf_form.clone()]),
            check: filled_the_form,
        });
        let office = skill_mount("office-docs", &repo_root().join("tests/skills/office-docs"));
        cases.push(DirectCase {
            label: "office-docs: a sheet built with openpyxl, recalculated by LibreOffice headless (`recalc.py`)"
                .into(),
            request: exec_request(RECALC, vec![], vec![office]),
            check: recalculated,
        });
        if wanted(1) || wanted(2) {
            let mut direct = Vec::new();
            for case in &cases {
                eprintln!("direct: {}", case.label);
                direct.push(stats(&time_direct(&local, case, runs).await));
            }
            println!(
                "## 1–2. One warm call through `LocalSandbox::execute` (this process: {} RSS)\n",
                rss_kib().map_or("?".into(), |kib| format!("{:.0} MiB", kib as f64 / 1024.0))
            );
            header(&["call", "median", "p95", "min"]);
            for (case, figure) in cases.iter().zip(&direct) {
                row(&[case.label.clone(), ms(figure.median), ms(figure.p95), ms(figure.min)]);
            }
        }

        // 3. Bytes per call.
        if wanted(3) {
            println!("\n## 3. Bytes one call moves (the JSON a Lambda invocation of `sandbox` would carry)\n");
            header(&[
                "call",
                "request JSON",
                "files in (decoded)",
                "response JSON",
                "files out (decoded)",
                "JSON round trip (median)",
            ]);
            for case in &cases {
                let sizes = wire_sizes(&local, &case.request, runs).await;
                row(&[
                    case.label.clone(),
                    format!("{} B", thousands(sizes.request_json as u64)),
                    format!("{} B", thousands(sizes.files_in)),
                    format!("{} B", thousands(sizes.response_json as u64)),
                    format!("{} B", thousands(sizes.files_out as u64)),
                    format!("{:.3} ms", sizes.round_trip.as_secs_f64() * 1e3),
                ]);
            }
        }

        // 7 and 5, measured while the process is still small; printed last.
        let bundle = if wanted(7) {
            eprintln!("bundle: first installs, then the installed bundle's calls");
            let rss = rss_kib();
            Some((time_bundle(&local, runs).await, rss))
        } else {
            None
        };
        let base = rss_kib().unwrap_or(0) as f64 / 1024.0;
        let ballast = if wanted(5) {
            eprintln!("direct: `true` beside ballast");
            time_with_ballast(&local, runs).await
        } else {
            Vec::new()
        };

        // 4. Turns.
        let timed = Arc::new(TimedSandbox { inner: local.clone(), calls: Mutex::new(Vec::new()) });
        let workspaces = [Vec::new(), workspace_files(WORKSPACE_FILES)];
        let mut turns = Vec::new();
        for (skills, neighbours) in CATALOGS.into_iter().filter(|_| wanted(4)) {
            let objects = Arc::new(MemoryObjectStore::new());
            let sessions = Arc::new(MemorySessionStore::new());
            let user = UserId::parse(format!("tenant-{skills}")).unwrap();
            upload_tenant(&objects, &user, skills);
            upload_tenant(&objects, &UserId::parse("neighbour").unwrap(), neighbours);
            let service =
                TurnService::new(sessions.clone(), objects.clone(), Arc::new(zero_latency_model()), AgentConfig::default())
                    .with_sandbox(timed.clone());
            // A warm process: the first turn builds the tenant's index.
            let warm = SessionId::parse("warm-up").unwrap();
            service.run_turn(turn_request(&user, &warm, READ_TODOS)).await.expect("the warm-up turn");
            for files in &workspaces {
                eprintln!("turns: {}, workspace of {} files", tenant_name(skills, neighbours), files.len());
                let catalog = (skills, neighbours);
                turns.push(time_turns(&service, &timed, &local, &sessions, &objects, &user, files, catalog, runs).await);
            }
        }
        if wanted(4) {
            println!("\n## 4. A whole turn (embedded store, scripted model: one tool call, then an answer)\n");
            header(&["tenant, workspace", "series", "median", "p95", "min"]);
            for t in &turns {
                let name = format!("{}, {} files", tenant_name(t.skills, t.neighbours), t.files);
                for (series, values) in [
                    ("direct call of `true` over the same workspace", &t.direct),
                    ("turn with `execute true`", &t.with_execute),
                    ("turn with `todoread`", &t.without),
                    ("the sandbox call inside the turn", &t.sandbox_in_turn),
                    ("turn with `execute` less its sandbox call", &t.rest_of_turn),
                ] {
                    let s = stats(values);
                    row(&[name.clone(), series.into(), ms(s.median), ms(s.p95), ms(s.min)]);
                }
            }
            println!(
                "\nMedians. overhead = (turn with execute − turn without) − the direct call of `true` over the same \
                 workspace, made beside these turns; the next column instead takes each turn less its own sandbox \
                 call, less the turn without (no sandbox noise in it).\n"
            );
            header(&[
                "tenant, workspace",
                "with execute",
                "without",
                "difference",
                "sandbox call in the turn",
                "direct call",
                "overhead",
                "overhead (turn less its own call)",
                "process RSS",
            ]);
            for t in &turns {
                let (with, without) = (stats(&t.with_execute).median, stats(&t.without).median);
                let difference = with.as_secs_f64() - without.as_secs_f64();
                let direct = stats(&t.direct).median;
                row(&[
                    format!("{}, {} files", tenant_name(t.skills, t.neighbours), t.files),
                    ms(with),
                    ms(without),
                    format!("{:.2} ms", difference * 1e3),
                    ms(stats(&t.sandbox_in_turn).median),
                    ms(direct),
                    format!("{:.2} ms", (difference - direct.as_secs_f64()) * 1e3),
                    ms_diff(stats(&t.rest_of_turn).median, without),
                    t.rss_kib.map_or("?".into(), |kib| format!("{:.0} MiB", kib as f64 / 1024.0)),
                ]);
            }
            // The library's size: the figures that must not grow with it.
            let find = |(skills, neighbours): (usize, usize), files: usize| {
                turns.iter().find(|t| t.skills == skills && t.neighbours == neighbours && t.files == files)
            };
            println!();
            for files in [0, WORKSPACE_FILES] {
                let [small, beside, large] = CATALOGS.map(|catalog| find(catalog, files));
                let (Some(small), Some(beside), Some(large)) = (small, beside, large) else { continue };
                let overhead = |t: &TurnFigures| {
                    Duration::from_secs_f64(
                        (stats(&t.rest_of_turn).median.as_secs_f64() - stats(&t.without).median.as_secs_f64()).max(0.0),
                    )
                };
                let without = |t: &TurnFigures| stats(&t.without).median;
                for (figure, small, beside, large) in [
                    ("turn without execute", without(small), without(beside), without(large)),
                    ("overhead (turn less its own call)", overhead(small), overhead(beside), overhead(large)),
                ] {
                    println!(
                        "- {figure}, {files} files: {} at {}, {} at {}, {} at {}",
                        ms(small),
                        tenant_name(CATALOGS[0].0, CATALOGS[0].1),
                        ms(beside),
                        tenant_name(CATALOGS[1].0, CATALOGS[1].1),
                        ms(large),
                        tenant_name(CATALOGS[2].0, CATALOGS[2].1),
                    );
                }
            }
        }
        if wanted(5) {
            println!("\n## 5. The direct call of `true` against the size of the calling process\n");
            header(&["process RSS", "median", "p95", "min"]);
            for (mib, values) in BALLAST_MIB.iter().zip(ballast) {
                let s = stats(&values);
                row(&[format!("{:.0} MiB ({mib} MiB added)", base + *mib as f64), ms(s.median), ms(s.p95), ms(s.min)]);
            }
        }
        // 6. The sandbox function in the image, as Lambda runs it.
        if wanted(6) {
            eprintln!("image: the sandbox function in a fresh environment, then warm");
            let image = image_environment(runs).await;
            println!(
                "\n## 6. The `sandbox` function in the image, as Lambda runs it (root read-only, uid 993, `true`)\n"
            );
            println!("The image's root filesystem: {}.\n", image.size);
            header(&["call", "median", "p95", "min"]);
            let fresh = stats(&image.fresh);
            row(&[
                "a fresh environment: the function starts, then its first call".into(),
                ms(fresh.median),
                ms(fresh.p95),
                ms(fresh.min),
            ]);
            let warm = stats(&image.warm);
            row(&["a warm environment's call".into(), ms(warm.median), ms(warm.p95), ms(warm.min)]);
        }
        // 7. A skill's bundle.
        if let Some((bundle, rss)) = &bundle {
            println!(
                "\n## 7. A skill's bundle through `LocalSandbox::execute` (in-memory store, a fresh bundle folder; \
                 this process: {} RSS)\n",
                rss.map_or("?".into(), |kib| format!("{:.0} MiB", kib as f64 / 1024.0))
            );
            println!(
                "The bundle: {} pure-Python wheels ({} modules of about 4 KB of source), a tar of {} B ({} B of \
                 wheels; SHA-256 {}…, the same every run); one install leaves {} files, {} B. The bundled command is `{IMPORT_BUNDLE}` (its package \
                 imports the other two); the first calls are {BUNDLE_TENANTS} new tenants' (each installs its own \
                 copy), the installed calls the last tenant's, alternating with the call without a bundle.\n",
                BUNDLE_WHEELS.len(),
                bundle.modules,
                thousands(bundle.tar_bytes as u64),
                thousands(bundle.wheel_bytes as u64),
                &bundle.sha256[..12],
                thousands(bundle.installed.0),
                thousands(bundle.installed.1),
            );
            header(&["call", "runs", "median", "p95", "min"]);
            for (label, values) in [
                (
                    "a tenant's first call: the bundle read from the store, installed by the image's pip, then the \
                     command",
                    &bundle.first,
                ),
                ("the same call, the bundle installed (`PYTHONPATH`, read-only)", &bundle.cached),
                ("`python -c 'import json'`, no bundle", &bundle.plain),
            ] {
                let s = stats(values);
                row(&[label.into(), values.len().to_string(), ms(s.median), ms(s.p95), ms(s.min)]);
            }
            let median = |values: &[Duration]| stats(values).median;
            println!(
                "\n- the install's share of a first call (medians, first − installed): {}",
                ms_diff(median(&bundle.first), median(&bundle.cached))
            );
            println!(
                "- the installed bundle's call against the call without one (medians): {}",
                ms_diff(median(&bundle.cached), median(&bundle.plain))
            );
            println!(
                "- the process's first install (a warm-up tenant, not in the figures above): {}",
                ms(bundle.process_first)
            );
        }

        println!(
            "\n(run took {:.0} s on {cores} cores; load average before {load_before}, after {})",
            started.elapsed().as_secs_f64(),
            load_average()
        );
    });
}
