//! Unit tests of `/memories`: the same tools and messages as `/workspace`, read lazily, writes
//! staged until saved, kept across sessions, walled per user, and bounded.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use local_store::MemoryObjectStore as MemStore;

const SECRET: &str = "SECRETO-DE-U2";

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

/// A turn of `user`'s session `session` with an empty workspace.
fn turn<'a>(store: &'a MemStore, id: &str, session: &str) -> Vfs<'a> {
    Vfs::new(store, user(id), SessionId::parse(session).unwrap(), None, BTreeMap::new())
}

/// A store holding `u2`'s memories and a few keys under `u1/memories/` that are not memory paths.
fn seeded() -> MemStore {
    let store = MemStore::recording();
    store.insert("u2/memories/secreto.md", format!("{SECRET}\nclausula\n"));
    store.insert("u2/memories/clientes/garcia.md", format!("{SECRET}\n"));
    store.insert("u1/memories/dir/", Vec::new());
    store.insert("u1/memories/a//b.md", b"doble\n".to_vec());
    store.insert("u1/memories/x/../y.md", b"punto punto\n".to_vec());
    store.insert("u1/memories/%2e%2e.md", b"escape\n".to_vec());
    store
}

fn text<T: Into<String>>(result: Result<T, VfsError>) -> String {
    match result {
        Ok(ok) => ok.into(),
        Err(error) => error.to_string(),
    }
}

/// The calls the root-parity test runs, with `{r}` standing for the root.
fn calls() -> Vec<(&'static str, Value)> {
    let call = |name: &'static str, args: &str| (name, serde_json::from_str::<Value>(args).unwrap());
    vec![
        call("ls", r#"{"path": "{r}"}"#),
        call("read_file", r#"{"file_path": "{r}/nada.md"}"#),
        call("write_file", r#"{"file_path": "{r}/prefs.md", "content": "idioma: es\ntono: formal\ntono: formal\n"}"#),
        call("write_file", r#"{"file_path": "{r}/clientes/garcia.md", "content": "Notaria: Garcia\n"}"#),
        call("write_file", r#"{"file_path": "{r}/vacio.md", "content": ""}"#),
        call("read_file", r#"{"file_path": "{r}/vacio.md"}"#),
        call("read_file", r#"{"file_path": "{r}/prefs.md", "offset": 1, "limit": 1}"#),
        call("read_file", r#"{"file_path": "{r}/prefs.md", "offset": 9}"#),
        call("read_file", r#"{"file_path": "{r}/clientes"}"#),
        call("ls", r#"{"path": "{r}"}"#),
        call("ls", r#"{"path": "{r}/clientes"}"#),
        call("ls", r#"{"path": "{r}/prefs.md"}"#),
        call("edit_file", r#"{"file_path": "{r}/prefs.md", "old_string": "tono: formal", "new_string": "x"}"#),
        call(
            "edit_file",
            r#"{"file_path": "{r}/prefs.md", "old_string": "tono: formal\n", "new_string": "tono: cercano\n", "replace_all": true}"#,
        ),
        call("edit_file", r#"{"file_path": "{r}/prefs.md", "old_string": "", "new_string": "x"}"#),
        call("edit_file", r#"{"file_path": "{r}/prefs.md", "old_string": "no esta", "new_string": "x"}"#),
        call("edit_file", r#"{"file_path": "{r}/nada.md", "old_string": "a", "new_string": "b"}"#),
        call("edit_file", r#"{"file_path": "{r}/clientes", "old_string": "a", "new_string": "b"}"#),
        call("read_file", r#"{"file_path": "{r}/prefs.md"}"#),
        call("write_file", r#"{"file_path": "{r}/clientes", "content": "x"}"#),
        call("write_file", r#"{"file_path": "{r}/prefs.md/dentro.md", "content": "x"}"#),
        call("write_file", r#"{"file_path": "{r}", "content": "x"}"#),
        call("glob", r#"{"pattern": "*.md", "path": "{r}"}"#),
        call("glob", r#"{"pattern": "/*.md", "path": "{r}"}"#),
        call("grep", r#"{"pattern": "Garcia", "path": "{r}"}"#),
        call("grep", r#"{"pattern": "tono", "path": "{r}", "output_mode": "content"}"#),
        call("grep", r#"{"pattern": "a.*b", "path": "{r}"}"#),
        call("delete", r#"{"file_path": "{r}/clientes"}"#),
        call("delete", r#"{"file_path": "{r}/clientes"}"#),
        call("delete", r#"{"file_path": "{r}"}"#),
        call("read_file", r#"{"file_path": "{r}/clientes/garcia.md"}"#),
        call("ls", r#"{"path": "{r}"}"#),
        call("read_file", r#"{"file_path": "{r}/../workspace/prefs.md"}"#),
        call("ls", r#"{"path": "{r}//x"}"#),
    ]
}

fn with_root(args: &Value, root: &str) -> Value {
    serde_json::from_str(&args.to_string().replace("{r}", root)).unwrap()
}

#[tokio::test]
async fn every_file_tool_answers_on_memories_as_on_the_workspace() {
    let store = MemStore::new();
    let (mut workspace, mut memories) = (turn(&store, "u1", "S1"), turn(&store, "u1", "S2"));
    for (name, args) in calls() {
        let on_workspace = run_file_tool(&mut workspace, name, &with_root(&args, "/workspace")).await.unwrap();
        let on_memories = run_file_tool(&mut memories, name, &with_root(&args, "/memories")).await.unwrap();
        assert_eq!(on_memories.replace("/memories", "/workspace"), on_workspace, "{name} {args}");
    }
}

#[tokio::test]
async fn a_turn_that_does_not_look_in_memories_makes_no_request_under_them() {
    let store = seeded();
    let mut vfs = turn(&store, "u1", "S1");
    assert_eq!(vfs.ls("/").await.unwrap(), "['/memories/', '/workspace/']");
    vfs.write_file("/workspace/a.md", "hola").await.unwrap();
    vfs.read_file("/workspace/a.md", 0, 10).await.unwrap();
    vfs.glob("*.md", Some("/workspace")).await.unwrap();
    vfs.grep("hola", Some("/workspace"), None).await.unwrap();
    vfs.ls("/workspace").await.unwrap();
    assert_eq!(vfs.save_memories().await.unwrap(), SavedMemories::default());
    assert!(store.recorded().iter().all(|call| !call.contains("memories")), "{:?}", store.recorded());
}

#[tokio::test]
async fn memories_are_listed_once_read_when_read_and_saved_only_when_asked() {
    let store = MemStore::recording();
    store.insert("u1/memories/prefs.md", b"idioma: es\n".to_vec());
    store.insert("u1/memories/viejo.md", b"olvidame\n".to_vec());
    let mut vfs = turn(&store, "u1", "S1");
    assert_eq!(vfs.ls("/memories").await.unwrap(), "['/memories/prefs.md', '/memories/viejo.md']");
    assert_eq!(vfs.read_file("/memories/prefs.md", 0, 10).await.unwrap(), "@@ lines 1-1 of 1 @@\nidioma: es");
    vfs.read_file("/memories/prefs.md", 0, 10).await.unwrap();
    vfs.glob("*", Some("/memories")).await.unwrap();
    assert_eq!(store.recorded(), ["list u1/memories/", "get u1/memories/prefs.md"]);

    // Changes are seen at once by the turn and stored only when saved.
    vfs.write_file("/memories/nuevo.md", "nuevo\n").await.unwrap();
    vfs.edit_file("/memories/prefs.md", "es", "en", false).await.unwrap();
    vfs.delete("/memories/viejo.md").await.unwrap();
    vfs.write_file("/memories/efimero.md", "x").await.unwrap();
    vfs.delete("/memories/efimero.md").await.unwrap();
    assert_eq!(vfs.ls("/memories").await.unwrap(), "['/memories/nuevo.md', '/memories/prefs.md']");
    assert_eq!(vfs.read_file("/memories/prefs.md", 0, 10).await.unwrap(), "@@ lines 1-1 of 1 @@\nidioma: en");
    assert_eq!(text(vfs.read_file("/memories/viejo.md", 0, 10).await), "Error: File '/memories/viejo.md' not found");
    assert_eq!(vfs.grep("nuevo", None, None).await.unwrap(), "/memories/nuevo.md");
    assert_eq!(store.recorded().len(), 2, "{:?}", store.recorded());

    assert_eq!(vfs.save_memories().await.unwrap(), SavedMemories { written: 2, deleted: 1 });
    let mut saved = store.recorded()[2..].to_vec();
    saved.sort();
    assert_eq!(saved, ["delete u1/memories/viejo.md", "put u1/memories/nuevo.md", "put u1/memories/prefs.md"]);
    assert_eq!(store.bytes("u1/memories/prefs.md").unwrap(), b"idioma: en\n");
    assert!(store.bytes("u1/memories/viejo.md").is_none() && store.bytes("u1/memories/efimero.md").is_none());
    // Workspace writes never reach the memories, and the memories never reach the sandbox.
    assert!(vfs.workspace().is_empty() && vfs.written_files().is_empty());
    let files = vfs.sandbox_files().await.unwrap();
    assert!(files.workspace.is_empty() && files.skills.is_empty() && files.ticket.is_none());
}

#[tokio::test]
async fn a_memory_is_kept_across_sessions_of_its_user_and_no_other_user_sees_it() {
    let store = seeded();
    let mut first = turn(&store, "u1", "S1");
    first.write_file("/memories/prefs.md", "Prefiere escrituras en castellano.\n").await.unwrap();
    first.save_memories().await.unwrap();

    let other_session = turn(&store, "u1", "S2");
    assert!(other_session.read_file("/memories/prefs.md", 0, 10).await.unwrap().contains("castellano"));
    // Keys under the prefix that are not memory paths stay invisible.
    assert_eq!(other_session.ls("/memories").await.unwrap(), "['/memories/prefs.md']");
    assert_eq!(other_session.glob("**", Some("/")).await.unwrap(), "['/memories/prefs.md']");

    // u2's memories: invisible to u1 by any path; u1's to u2.
    for path in [
        "/memories/secreto.md",
        "/memories/../../u2/memories/secreto.md",
        "/memories/%2e%2e/u2/memories/secreto.md",
        "/u2/memories/secreto.md",
        "//u2/memories/secreto.md",
    ] {
        let answer = text(other_session.read_file(path, 0, 10).await);
        assert!(answer.starts_with("Error: File") && !answer.contains(SECRET), "{path}: {answer}");
    }
    assert_eq!(other_session.grep(SECRET, None, None).await.unwrap(), "No matches found");
    assert_eq!(other_session.glob("**/garcia.md", None).await.unwrap(), "No files found");
    let asked: Vec<String> = store.recorded().into_iter().filter(|call| call.contains("memories")).collect();
    assert!(asked.iter().all(|call| call.split_once(' ').unwrap().1.starts_with("u1/memories/")), "{asked:?}");
    let stranger = turn(&store, "u2", "S1");
    assert_eq!(stranger.ls("/memories").await.unwrap(), "['/memories/clientes/', '/memories/secreto.md']");
    assert_eq!(stranger.grep("castellano", None, None).await.unwrap(), "No matches found");
    let mut u2 = turn(&store, "u2", "S9");
    u2.delete("/memories/prefs.md").await.unwrap_err();
    u2.save_memories().await.unwrap();
    assert!(store.bytes("u1/memories/prefs.md").is_some(), "another user cannot delete it");
}

#[tokio::test]
async fn writes_past_a_bound_are_refused_with_the_bound_named() {
    let store = MemStore::new();
    let mut vfs = turn(&store, "u1", "S1");
    let too_big = "m".repeat(MAX_MEMORY_FILE_BYTES + 1);
    assert_eq!(
        text(vfs.write_file("/memories/grande.md", &too_big).await),
        format!(
            "Error: Content too large: {} bytes (a /memories file holds at most 65536 bytes; keep each memory short, \
             one topic a file)",
            MAX_MEMORY_FILE_BYTES + 1
        )
    );
    let long = format!("/memories/{}", "p".repeat(MAX_MEMORY_PATH_BYTES + 1));
    assert_eq!(
        text(vfs.write_file(&long, "x").await),
        format!("Error: Invalid path: {long} (a /memories path is at most 256 bytes after /memories/)")
    );
    vfs.write_file(&format!("/memories/{}", "p".repeat(MAX_MEMORY_PATH_BYTES)), "x").await.unwrap();

    // Files: the 101st is refused; rewriting one or deleting one makes it fit.
    for i in 1..MAX_MEMORY_FILES {
        vfs.write_file(&format!("/memories/f{i}.md"), "x").await.unwrap();
    }
    let full = text(vfs.write_file("/memories/otro.md", "x").await);
    assert_eq!(
        full,
        "Error: /memories already holds 100 files, its limit; delete memories you no longer need with delete, or \
         write over an existing one"
    );
    vfs.write_file("/memories/f1.md", "y").await.unwrap();
    vfs.delete("/memories/f1.md").await.unwrap();
    vfs.write_file("/memories/otro.md", "x").await.unwrap();

    // Bytes: 1 MiB in all, by writing over files or by editing them.
    let mut vfs = turn(&store, "u1", "S2");
    let big = "b".repeat(MAX_MEMORY_FILE_BYTES);
    for i in 0..(MAX_MEMORY_BYTES as usize / MAX_MEMORY_FILE_BYTES) {
        vfs.write_file(&format!("/memories/big{i}.md"), &big).await.unwrap();
    }
    let over = text(vfs.write_file("/memories/mas.md", "z").await);
    assert!(over.starts_with("Error: /memories would hold") && over.contains("1 MiB"), "{over}");
    vfs.write_file("/memories/big0.md", "b").await.unwrap();
    vfs.write_file("/memories/mas.md", "z").await.unwrap();
    let grown = text(vfs.edit_file("/memories/mas.md", "z", &"z".repeat(MAX_MEMORY_FILE_BYTES), false).await);
    assert!(grown.starts_with("Error: /memories would hold"), "{grown}");
    let huge = text(vfs.edit_file("/memories/big1.md", "b", "bb", true).await);
    assert!(huge.starts_with("Error: Content too large"), "{huge}");
    assert!(store.keys().is_empty(), "nothing is stored before the save");
}

#[tokio::test]
async fn hostile_memory_calls_are_errors_never_panics() {
    let store = seeded();
    let mut vfs = turn(&store, "u1", "S1");
    for path in ["/memories/../workspace/a", "/memories/a\0b", "/memories/%2F", "/memories\\a", "/memories/a//b"] {
        assert!(text(vfs.write_file(path, "x").await).starts_with("Error:"), "{path}");
        assert!(text(vfs.delete(path).await).starts_with("Error:"), "{path}");
    }
    for args in [json!(null), json!({"file_path": 7}), json!({"file_path": "/memories/a", "content": ["x"]})] {
        let answer = run_file_tool(&mut vfs, "write_file", &args).await.unwrap();
        assert!(answer.starts_with("Error:"), "{args}: {answer}");
    }
    assert!(text(vfs.write_file("/memories/a.md", &"\u{0}".repeat(10)).await).starts_with("Updated"));
    assert!(text(vfs.read_file("/memories/a.md", 0, 10).await).contains("binary file"));
    assert_eq!(vfs.save_memories().await.unwrap().written, 1);
}

#[tokio::test]
async fn a_failed_save_is_a_storage_error() {
    struct NoDelete(MemStore);
    #[async_trait::async_trait]
    impl ObjectStore for NoDelete {
        async fn list(&self, prefix: &str) -> Result<Vec<crate::store::ObjectMeta>, StoreError> {
            self.0.list(prefix).await
        }
        async fn get(&self, key: &str) -> Result<Option<crate::store::Object>, StoreError> {
            self.0.get(key).await
        }
        async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
            self.0.put(key, bytes).await
        }
    }
    let store = NoDelete(MemStore::new());
    store.0.insert("u1/memories/a.md", b"a".to_vec());
    let mut vfs = Vfs::new(&store, user("u1"), SessionId::parse("S1").unwrap(), None, BTreeMap::new());
    vfs.delete("/memories/a.md").await.unwrap();
    assert!(vfs.save_memories().await.is_err());
}
