//! Tests of a call's exchange with the runner: the layout of its files, its bounds, the report's
//! output and endings, and the plan of what changed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_ports::sandbox::{
    ExecRequest, SandboxError, SandboxFile, SkillMount, MAX_CALL_FILE_BYTES, MAX_RESULT_FILE_BYTES,
};
use agent_ports::{SessionId, UserId};

use super::plan::{batches, sha256, Plan, Wanted};
use super::prepare::{Call, Upload};
use super::report::{Report, HEAD_BYTES};
use crate::handler::output::render_output;
use crate::handler::Limits;

fn file(path: &str, bytes: &[u8]) -> SandboxFile {
    SandboxFile { path: path.into(), bytes: Arc::new(bytes.to_vec()) }
}

fn request(workspace: Vec<SandboxFile>) -> ExecRequest {
    ExecRequest {
        tenant: UserId::parse("u1").expect("valid"),
        session: SessionId::parse("s1").expect("valid"),
        command: "ls".into(),
        timeout: Duration::from_secs(5),
        workspace,
        skills: vec![SkillMount { name: "pdf".into(), files: vec![file("scripts/a.py", b"print(1)")], bundle: None }],
        ticket: Some(vec![file("t.txt", b"")]),
        resume: None,
    }
}

fn hex(bytes: &[u8]) -> String {
    sha256(bytes).iter().map(|byte| format!("{byte:02x}")).collect()
}

#[test]
fn a_call_lays_its_files_out_under_the_stage_with_empty_files_made_by_the_runner() {
    let call = Call::prepare(
        &request(vec![file("a/b.bin", &[0, 255]), file("e.txt", b"")]),
        "/tmp/agent",
        &Limits::default(),
        "n1",
    )
    .expect("valid");
    let paths: Vec<&str> = call
        .uploads
        .iter()
        .map(|upload| match upload {
            Upload::Text { path, .. } | Upload::Bytes { path, .. } => path.as_str(),
        })
        .collect();
    assert_eq!(
        paths,
        [
            "agent-sandbox-in-n1/tree/workspace/a/b.bin",
            "agent-sandbox-in-n1/tree/skills/pdf/scripts/a.py",
            "agent-sandbox-in-n1/call.json",
            "agent-sandbox-in-n1/run.py"
        ]
    );
    let Upload::Text { text, .. } = &call.uploads[2] else { panic!("call.json is text") };
    let json: serde_json::Value = serde_json::from_str(text).expect("JSON");
    assert_eq!(json["empty"], serde_json::json!(["workspace/e.txt", "ticket/t.txt"]));
    assert_eq!(json["ticket"], true);
    assert_eq!(json["timeout_ms"], 5000);
    assert_eq!(call.max_entries, 3 + 1000, "two files and a folder, then the limit");
    assert_eq!(call.command_line(Duration::from_millis(4200)), "python3 agent-sandbox-in-n1/run.py 4200");
}

#[test]
fn calls_over_the_bounds_or_with_bad_paths_are_refused() {
    let big = vec![file("big", &vec![1u8; MAX_CALL_FILE_BYTES as usize + 1])];
    assert!(matches!(
        Call::prepare(&request(big), "/tmp/agent", &Limits::default(), "n"),
        Err(SandboxError::TooLarge { .. })
    ));
    let bad = vec![file("../x", b"x")];
    assert!(matches!(
        Call::prepare(&request(bad), "/tmp/agent", &Limits::default(), "n"),
        Err(SandboxError::Unavailable(_))
    ));
}

fn report(entries: serde_json::Value, complete: bool) -> Report {
    let json = serde_json::json!({"v": 1, "exit_code": 0, "duration_ms": 5, "entries": entries,
                                  "complete": complete, "extra": "ignored"});
    Report::parse(&format!("noise\n{json}\n")).expect("parses")
}

#[test]
fn the_listing_gives_new_and_changed_files_deletions_and_what_is_not_kept() {
    let call = Call::prepare(
        &request(vec![file("same.txt", b"same"), file("changed.txt", b"old"), file("gone.txt", b"x")]),
        "/tmp/agent",
        &Limits::default(),
        "n",
    )
    .expect("valid");
    let entries = serde_json::json!([
        {"k": "f", "p": "same.txt", "s": 4, "h": hex(b"same")},
        {"k": "f", "p": "changed.txt", "s": 3, "h": hex(b"new")},
        {"k": "f", "p": "out/new.bin", "s": 2, "h": hex(&[0, 1])},
        {"k": "f", "p": "huge.bin", "s": MAX_RESULT_FILE_BYTES + 1, "h": null},
        {"k": "l", "p": "link"},
        {"k": "n", "p": "bad\u{FFFD}"},
        {"k": "f", "p": " lead", "s": 1, "h": hex(b"l")},
    ]);
    let plan = Plan::new(&report(entries.clone(), true), &call, 8 << 20);
    let wanted: Vec<&str> = plan.wanted.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(wanted, ["changed.txt", "out/new.bin"]);
    assert_eq!(plan.deleted, ["gone.txt"]);
    let mut read = HashMap::new();
    read.insert(sha256(b"new"), Arc::new(b"new".to_vec()));
    let changes = plan.finish(&read);
    assert_eq!(changes.written, [file("changed.txt", b"new")]);
    let not_kept = changes.not_kept.join("\n");
    for part in [
        "huge.bin: 4194305 bytes",
        "link: a symbolic link",
        "not UTF-8",
        "whitespace",
        "out/new.bin: could not be read back",
    ] {
        assert!(not_kept.contains(part), "{part}: {not_kept}");
    }
    // Over the bytes one result brings back (the huge file counts): nothing is kept, and
    // one line says which bound and the totals.
    let plan = Plan::new(&report(entries.clone(), true), &call, 1 << 20);
    assert!(plan.wanted.is_empty() && plan.deleted.is_empty(), "{plan:?}");
    let changes = plan.finish(&HashMap::new());
    assert!(changes.not_kept[0].contains("none of the command's changes were brought back"), "{changes:?}");
    assert!(changes.not_kept[0].contains("3 files of 4194310 bytes"), "{changes:?}");
    assert!(changes.not_kept[0].contains("past the 1048576 bytes"), "{changes:?}");
    let plan = Plan::new(&report(entries, false), &call, 8 << 20);
    assert!(plan.deleted.is_empty(), "an incomplete listing infers no deletion");
    let plan = Plan::new(&report(serde_json::json!([{"k": "u", "p": ""}]), true), &call, 1 << 20);
    assert!(plan.deleted.is_empty(), "nothing under an unreadable folder is deleted");
}

#[test]
fn output_is_rendered_as_the_handler_renders_it() {
    assert_eq!(render_output(b"hello ", b"world", 11), ("hello world".to_owned(), 0));
    let head = "é".repeat(HEAD_BYTES / 2);
    let (text, omitted) = render_output(&head.as_bytes()[..HEAD_BYTES - 1], b"\xa9end", 1_000_000);
    assert!(!text.contains('\u{FFFD}') && text.ends_with("end"), "{}", &text[text.len() - 10..]);
    assert!(omitted > 1_000_000 - (HEAD_BYTES as u64 + 4) && text.contains("bytes of output omitted"));
}

#[test]
fn endings_name_the_bound_that_stopped_the_command() {
    let mut report = report(serde_json::json!([]), true);
    let limits = Limits::default();
    assert_eq!(report.ending(Duration::from_secs(2), &limits), (Some(0), None, false));
    report.stop = Some("timeout".into());
    assert_eq!(report.ending(Duration::from_secs(2), &limits), (None, Some("timed out after 2 s".into()), true));
    report.stop = Some("output".into());
    assert_eq!(report.ending(Duration::from_secs(2), &limits).1.as_deref(), Some("printed more than 64 MiB of output"));
    report.stop = None;
    report.signal = Some(9);
    assert_eq!(report.ending(Duration::from_secs(2), &limits), (None, None, false));
}

#[test]
fn read_batches_hold_their_bounds() {
    let wanted = |size| Wanted { path: "p".into(), sha256: [0; 32], size };
    let files = vec![wanted(5), wanted(5), wanted(20), wanted(1), wanted(1), wanted(1)];
    let sizes: Vec<usize> = batches(&files, 10, 2).iter().map(|batch| batch.len()).collect();
    assert_eq!(sizes, [2, 1, 2, 1]);
    assert!(batches(&[], 10, 2).is_empty());
}

#[test]
fn reports_that_are_not_the_runners_are_errors() {
    assert!(Report::parse("python3: can't open file").is_err());
    assert!(Report::parse("{\"v\":2}").is_err());
    assert!(Report::parse("{\"v\":1,\"entries\":[{\"k\":\"zzz\"}]}").is_err());
}
