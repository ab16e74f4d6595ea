//! Parity of our file tools with LangChain deepagents' (0.7.32, pinned in tests/requirements.txt):
//! one sequence of tool calls runs through deepagents' real tools (`tests/parity/deepagents_run.py`,
//! over its default state backend) and through ours (`run_file_tool`, the dispatch the agent loop
//! uses, so argument parsing is included), and after every call the outcomes are compared: success
//! or error, the text answered, and every file's content.
//!
//! The interpreter is `$VIRTUAL_ENV/bin/python3`, else `python3` on `PATH`; `cargo xtask test`
//! provides one with deepagents. Without deepagents the test fails (CI installs it) rather than
//! passing silently.
//!
//! Normalised, because they differ on purpose (each is in docs/tools.md's list of differences):
//! - Roots: deepagents' files live under `/`, ours under `/workspace`. Paths in the arguments get
//!   `/workspace` in front, a search without `path` searches `/workspace` (our `/` also holds
//!   `/ticket` and `/skills`), and `/workspace/` reads `/` in our answers and file names.
//! - `glob` lists paths newest first in deepagents (by modification time, which our workspace does
//!   not keep) and by path here: the lists are compared as sets.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agent_core::events::is_error_result;
use agent_core::keys::workspace_blob_key;
use agent_core::vfs::{run_file_tool, Vfs};
use agent_core::{SessionId, UserId};
use local_store::MemoryObjectStore;
use serde_json::{json, Value};

/// One call's outcome, as both sides are compared.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    ok: bool,
    content: String,
    files: BTreeMap<String, String>,
}

/// The calls, in deepagents' namespace (files under `/`). Every kind of outcome a skill can rely
/// on appears at least once.
fn calls() -> Vec<(&'static str, Value)> {
    let draft = "Borrador v2\nVer art. 1.2(b) del contrato.\nart 1.2 b\nCláusula primera.\nCláusula segunda.\n\
                 Cláusula tercera.\nFirma\n";
    vec![
        // write_file: a new file, then over it.
        ("write_file", json!({"file_path": "/notas/borrador.md", "content": "Borrador\nCláusula uno\n"})),
        ("write_file", json!({"file_path": "/notas/borrador.md", "content": draft})),
        // read_file: the default window, pages, past the end, a negative offset, no lines.
        ("read_file", json!({"file_path": "/notas/borrador.md"})),
        ("read_file", json!({"file_path": "/notas/borrador.md", "offset": 2, "limit": 3})),
        ("read_file", json!({"file_path": "/notas/borrador.md", "offset": "1", "limit": "2"})),
        ("read_file", json!({"file_path": "/notas/borrador.md", "offset": 6})),
        ("read_file", json!({"file_path": "/notas/borrador.md", "offset": 7})),
        ("read_file", json!({"file_path": "/notas/borrador.md", "offset": 50, "limit": 5})),
        ("read_file", json!({"file_path": "/notas/borrador.md", "offset": -2, "limit": 1})),
        ("read_file", json!({"file_path": "/notas/borrador.md", "limit": 0})),
        // edit_file: unique, not unique, every occurrence, missing string or file, newline hint, empty.
        (
            "edit_file",
            json!({"file_path": "/notas/borrador.md", "old_string": "Borrador v2", "new_string": "Borrador v3"}),
        ),
        (
            "edit_file",
            json!({"file_path": "/notas/borrador.md", "old_string": "Cláusula", "new_string": "Estipulación"}),
        ),
        (
            "edit_file",
            json!({"file_path": "/notas/borrador.md", "old_string": "Cláusula", "new_string": "Estipulación", "replace_all": true}),
        ),
        ("edit_file", json!({"file_path": "/notas/borrador.md", "old_string": "inexistente", "new_string": "x"})),
        ("edit_file", json!({"file_path": "/notas/nada.md", "old_string": "a", "new_string": "b"})),
        ("edit_file", json!({"file_path": "/notas/borrador.md", "old_string": "", "new_string": "b"})),
        ("write_file", json!({"file_path": "/notas/sin_final.md", "content": "uno\ndos"})),
        ("edit_file", json!({"file_path": "/notas/sin_final.md", "old_string": "dos\n", "new_string": "2\n"})),
        (
            "edit_file",
            json!({"file_path": "/notas/sin_final.md", "old_string": "dos", "new_string": "2", "replace_all": "true"}),
        ),
        // More files: another directory, an empty file, a long line.
        (
            "write_file",
            json!({"file_path": "/otro/ley.txt", "content": "Ley 1/2000, art. 1.2(b): texto\nart. 1.2(c)\n"}),
        ),
        ("write_file", json!({"file_path": "/vacio.md", "content": ""})),
        ("read_file", json!({"file_path": "/vacio.md"})),
        ("write_file", json!({"file_path": "/larga.txt", "content": format!("{}\nfin\n", "x".repeat(5000))})),
        ("read_file", json!({"file_path": "/larga.txt"})),
        // grep: literal text with regex metacharacters, each output mode, path and glob filters.
        ("grep", json!({"pattern": "art. 1.2(b)"})),
        ("grep", json!({"pattern": "art. 1.2(b)", "output_mode": "content"})),
        ("grep", json!({"pattern": "Estipulación", "path": "/notas", "glob": "*.md", "output_mode": "content"})),
        ("grep", json!({"pattern": "art", "glob": "*.txt", "output_mode": "count"})),
        ("grep", json!({"pattern": "1.2", "glob": "otro/*", "output_mode": "content"})),
        ("grep", json!({"pattern": "a|b"})),
        ("grep", json!({"pattern": "Estipulación", "max_count": 2, "output_mode": "content"})),
        ("grep", json!({"pattern": "x", "path": "/nada"})),
        // glob and ls.
        ("glob", json!({"pattern": "*.md"})),
        ("glob", json!({"pattern": "**/*.txt"})),
        ("glob", json!({"pattern": "/*.md"})),
        ("glob", json!({"pattern": "*.md", "path": "/notas"})),
        ("glob", json!({"pattern": "{ley,borrador}.*"})),
        ("glob", json!({"pattern": "*.csv"})),
        ("ls", json!({"path": "/"})),
        ("ls", json!({"path": "/notas"})),
        ("ls", json!({"path": "/nada"})),
        // A missing file, and deleting one.
        ("read_file", json!({"file_path": "/nada.md"})),
        ("delete", json!({"file_path": "/notas/sin_final.md"})),
        ("read_file", json!({"file_path": "/notas/sin_final.md"})),
        ("delete", json!({"file_path": "/notas/sin_final.md"})),
        // Deleting a directory deletes everything under it.
        ("write_file", json!({"file_path": "/borradores/a/uno.md", "content": "uno"})),
        ("write_file", json!({"file_path": "/borradores/dos.md", "content": "dos"})),
        ("delete", json!({"file_path": "/borradores"})),
        ("ls", json!({"path": "/borradores"})),
        ("delete", json!({"file_path": "/borradores"})),
    ]
}

#[tokio::test]
async fn file_tools_match_deepagents() {
    let calls = calls();
    let theirs = run_deepagents(&calls);
    let ours = run_ours(&calls).await;
    assert_eq!(theirs.len(), calls.len(), "deepagents answered every call");
    let mut differences = Vec::new();
    for (step, ((name, args), (theirs, ours))) in calls.iter().zip(theirs.iter().zip(&ours)).enumerate() {
        let (theirs, ours) = (comparable(name, theirs), comparable(name, ours));
        if theirs != ours {
            differences.push(format!("step {step}: {name} {args}\n  deepagents: {theirs:?}\n  ours:       {ours:?}"));
        }
    }
    assert!(differences.is_empty(), "{} calls differ:\n{}", differences.len(), differences.join("\n"));
}

/// An outcome with the order of a `glob` list set aside (see the module documentation).
fn comparable(name: &str, outcome: &Outcome) -> Outcome {
    let mut outcome = outcome.clone();
    if name == "glob" {
        if let Some(mut paths) = parse_py_list(&outcome.content) {
            paths.sort();
            outcome.content = format!("{paths:?}");
        }
    }
    outcome
}

/// The calls through deepagents, by the script next to the integration tests.
fn run_deepagents(calls: &[(&str, Value)]) -> Vec<Outcome> {
    let python = match std::env::var_os("VIRTUAL_ENV") {
        Some(venv) if Path::new(&venv).join("bin/python3").exists() => Path::new(&venv).join("bin/python3"),
        _ => PathBuf::from("python3"),
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/parity/deepagents_run.py");
    let input: Vec<Value> = calls.iter().map(|(name, args)| json!({"name": name, "args": args})).collect();
    let mut child = Command::new(&python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| {
            panic!("could not start {} ({error}); the parity test needs Python with deepagents", python.display())
        });
    child.stdin.take().unwrap().write_all(serde_json::to_string(&input).unwrap().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {}
        Some(3) => panic!(
            "{stderr}\nThe parity test needs deepagents: run it through `cargo xtask test` (which installs \
             tests/requirements.txt into .venv), or `pip install -r tests/requirements.txt` and set VIRTUAL_ENV"
        ),
        _ => panic!("{} {} failed ({}):\n{stderr}", python.display(), script.display(), output.status),
    }
    let results: Vec<Value> = serde_json::from_slice(&output.stdout).expect("the script prints a JSON list");
    results
        .into_iter()
        .map(|result| Outcome {
            ok: result["ok"].as_bool().unwrap(),
            content: result["content"].as_str().unwrap().to_owned(),
            files: serde_json::from_value(result["files"].clone()).unwrap(),
        })
        .collect()
}

/// The calls through our dispatch, with the roots mapped (see the module documentation).
async fn run_ours(calls: &[(&str, Value)]) -> Vec<Outcome> {
    let store = MemoryObjectStore::new();
    let (user, session) = (UserId::parse("u1").unwrap(), SessionId::parse("parity").unwrap());
    let mut vfs = Vfs::new(&store, user.clone(), session.clone(), None, BTreeMap::new());
    let mut outcomes = Vec::new();
    for (name, args) in calls {
        let (name, args) = ours_call(name, args);
        let content = run_file_tool(&mut vfs, name, &args).await.expect("a file tool");
        // A turn saves its blobs before it commits; each call here is looked at as if committed.
        vfs.save_workspace().await.expect("the blobs saved");
        let mut files = BTreeMap::new();
        for (rel, file) in vfs.workspace() {
            let key = workspace_blob_key(&user, &session, &file.sha256);
            let bytes = store.bytes(&key).expect("the blob of a workspace file");
            files.insert(format!("/{rel}"), String::from_utf8(bytes).unwrap());
        }
        outcomes.push(Outcome { ok: !is_error_result(&content), content: content.replace("/workspace/", "/"), files });
    }
    outcomes
}

/// A call in deepagents' namespace as ours: `/x` is `/workspace/x`, a search without `path`
/// searches `/workspace`.
fn ours_call(name: &str, args: &Value) -> (&'static str, Value) {
    let mut args = args.clone();
    let map = args.as_object_mut().unwrap();
    for key in ["file_path", "path"] {
        if let Some(Value::String(path)) = map.get(key) {
            let mapped = if path == "/" { "/workspace".to_owned() } else { format!("/workspace{path}") };
            map.insert(key.to_owned(), Value::String(mapped));
        }
    }
    if matches!(name, "glob" | "grep") && !map.contains_key("path") {
        map.insert("path".to_owned(), json!("/workspace"));
    }
    let name = match name {
        "ls" => "ls",
        "read_file" => "read_file",
        "write_file" => "write_file",
        "edit_file" => "edit_file",
        "delete" => "delete",
        "glob" => "glob",
        "grep" => "grep",
        other => panic!("no file tool {other}"),
    };
    (name, args)
}

/// The items of a Python list of strings as `repr` writes it (`['a', "b'c"]`); `None` for
/// anything else (such as "No files found").
fn parse_py_list(text: &str) -> Option<Vec<String>> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    let mut items = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == ',') {
            chars.next();
        }
        let Some(quote) = chars.next() else { return Some(items) };
        if quote != '\'' && quote != '"' {
            return None;
        }
        let mut item = String::new();
        loop {
            match chars.next()? {
                '\\' => item.push(chars.next()?),
                c if c == quote => break,
                c => item.push(c),
            }
        }
        items.push(item);
    }
}
