use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::json;

use super::*;
use crate::store::{Object, ObjectMeta};

const SECRET: &str = "SECRETO-DEL-INQUILINO-U2";
const SKILL_MD: &str = "---\nname: compraventa\n---\n# Compraventa\nRedacta escrituras de compraventa.\n";
const EJEMPLO: &str = "linea uno\nlinea dos\nlinea tres\nlinea cuatro\nlinea cinco\n";

/// An in-memory fake of the object-store port that records every key it is asked about.
#[derive(Default)]
struct MemStore {
    objects: Mutex<BTreeMap<String, Vec<u8>>>,
    calls: Mutex<Vec<String>>,
}

impl MemStore {
    fn seeded() -> Self {
        let store = MemStore::default();
        let skill = "u1/skills/escrituras/compraventa";
        let mut pdf = b"%PDF-1.4\n".to_vec();
        pdf.extend_from_slice(&[0, 1, 2, 0]);
        pdf.extend_from_slice(b"clausula escondida\n");
        for (key, bytes) in [
            (format!("{skill}/SKILL.md"), SKILL_MD.as_bytes().to_vec()),
            (format!("{skill}/disclosure_clausulas.md"), b"# Clausulas\nLa clausula penal.\nOtra clausula.\n".to_vec()),
            (format!("{skill}/resources/plantilla.pdf"), pdf),
            (format!("{skill}/resources/ejemplo.md"), EJEMPLO.as_bytes().to_vec()),
            (format!("{skill}/resources/"), Vec::new()), // a "directory marker", must stay invisible
            ("u1/skills/escrituras/compraventa2/SKILL.md".to_owned(), b"otra skill\n".to_vec()),
            ("u1/skills/escrituras/hipoteca/SKILL.md".to_owned(), b"# Hipoteca\nclausula hipotecaria\n".to_vec()),
            ("u1/skills/contratos/compraventa/SKILL.md".to_owned(), b"# Compraventa de contratos\n".to_vec()),
            ("u1/tickets/T1/a.txt".to_owned(), b"ticket: clausula del cliente\nsegunda\n".to_vec()),
            ("u1/tickets/T1/latin1.txt".to_owned(), vec![b'c', 0xE9, b'\n']),
            ("u1/tickets/T2/otro.txt".to_owned(), b"otro ticket\n".to_vec()),
            ("u2/skills/escrituras/compraventa/SKILL.md".to_owned(), format!("{SECRET}\nclausula\n").into_bytes()),
            ("u2/tickets/T1/a.txt".to_owned(), format!("{SECRET}\n").into_bytes()),
        ] {
            store.objects.lock().unwrap().insert(key, bytes);
        }
        store
    }

    fn keys(&self) -> Vec<String> {
        self.objects.lock().unwrap().keys().cloned().collect()
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl ObjectStore for MemStore {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        self.calls.lock().unwrap().push(format!("list {prefix}"));
        Ok(self
            .objects
            .lock()
            .unwrap()
            .iter()
            .filter(|(key, _)| key.starts_with(prefix))
            .map(|(key, bytes)| ObjectMeta { key: key.clone(), etag: "e".into(), size: bytes.len() as u64 })
            .collect())
    }

    async fn get(&self, key: &str) -> Result<Option<Object>, StoreError> {
        self.calls.lock().unwrap().push(format!("get {key}"));
        Ok(self.objects.lock().unwrap().get(key).map(|bytes| Object { bytes: bytes.clone(), etag: "e".into() }))
    }

    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.calls.lock().unwrap().push(format!("put {key}"));
        self.objects.lock().unwrap().insert(key.to_owned(), bytes);
        Ok(())
    }
}

/// A store whose backend always fails with a message full of things the model must not see.
struct BrokenStore;

#[async_trait]
impl ObjectStore for BrokenStore {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        Err(StoreError::Backend(format!("bucket secret-bucket denied list of {prefix}")))
    }
    async fn get(&self, key: &str) -> Result<Option<Object>, StoreError> {
        Err(StoreError::Backend(format!("bucket secret-bucket denied get of {key}")))
    }
    async fn put(&self, key: &str, _bytes: Vec<u8>) -> Result<(), StoreError> {
        Err(StoreError::Backend(format!("bucket secret-bucket denied put of {key}")))
    }
}

fn user() -> UserId {
    UserId::parse("u1").unwrap()
}

fn session() -> SessionId {
    SessionId::parse("S1").unwrap()
}

fn skill(path: &str) -> SkillPath {
    SkillPath::parse(path).unwrap()
}

fn vfs(store: &MemStore) -> Vfs<'_> {
    Vfs::new(store, user(), session(), Some(TicketId::parse("T1").unwrap()), BTreeMap::new())
}

fn mounted(store: &MemStore) -> Vfs<'_> {
    let mut vfs = vfs(store);
    vfs.mount_skill(skill("escrituras/compraventa"));
    vfs
}

fn text<T>(result: Result<T, VfsError>) -> String
where
    T: Into<String>,
{
    match result {
        Ok(ok) => ok.into(),
        Err(error) => error.to_string(),
    }
}

#[tokio::test]
async fn ls_root_before_and_after_mount() {
    let store = MemStore::seeded();
    let mut vfs = vfs(&store);
    assert_eq!(vfs.ls("/").await.unwrap(), "/ticket/\n/workspace/");
    assert_eq!(text(vfs.ls("/skills").await), "Error: Path not found: /skills");
    assert_eq!(
        text(vfs.read_file("/skills/compraventa/SKILL.md", 0, 10).await),
        "Error: File not found: /skills/compraventa/SKILL.md"
    );

    vfs.mount_skill(skill("escrituras/compraventa"));
    vfs.mount_skill(skill("escrituras/compraventa")); // idempotent
    assert_eq!(vfs.loaded_skills(), [skill("escrituras/compraventa")]);
    assert_eq!(vfs.ls("/").await.unwrap(), "/skills/\n/ticket/\n/workspace/");
    assert_eq!(vfs.ls("/workspace").await.unwrap(), "/workspace is empty");
}

#[tokio::test]
async fn ls_skills_shows_only_mounted_skills_and_their_tree() {
    let store = MemStore::seeded();
    let vfs = mounted(&store);
    assert_eq!(vfs.ls("/skills").await.unwrap(), "/skills/compraventa/");
    assert_eq!(
        vfs.ls("/skills/compraventa").await.unwrap(),
        format!(
            "/skills/compraventa/SKILL.md ({} bytes)\n/skills/compraventa/disclosure_clausulas.md (46 bytes)\n/skills/compraventa/resources/",
            SKILL_MD.len()
        )
    );
    assert_eq!(
        vfs.ls("/skills/compraventa/resources/").await.unwrap(),
        format!("/skills/compraventa/resources/ejemplo.md ({} bytes)\n/skills/compraventa/resources/plantilla.pdf (32 bytes)", EJEMPLO.len())
    );
    assert_eq!(
        vfs.ls("/skills/compraventa/SKILL.md").await.unwrap(),
        format!("/skills/compraventa/SKILL.md ({} bytes)", SKILL_MD.len())
    );
    assert_eq!(vfs.ls("/ticket").await.unwrap(), "/ticket/a.txt (37 bytes)\n/ticket/latin1.txt (3 bytes)");
    assert_eq!(text(vfs.ls("/skills/compraventa/nada").await), "Error: Path not found: /skills/compraventa/nada");
    assert_eq!(text(vfs.ls("/etc").await), "Error: Path not found: /etc");
    // The skill's prefix is listed once for the whole turn.
    vfs.read_file("/skills/compraventa/SKILL.md", 0, 10).await.unwrap();
    let lists = store.calls().iter().filter(|c| c.starts_with("list u1/skills/escrituras/compraventa/")).count();
    assert_eq!(lists, 1);
}

#[tokio::test]
async fn reads_a_mounted_skill_but_not_an_unmounted_one() {
    let store = MemStore::seeded();
    let vfs = mounted(&store);
    let skill_md = vfs.read_file("/skills/compraventa/SKILL.md", 0, 2000).await.unwrap();
    assert!(skill_md.starts_with("     1\t---\n     2\tname: compraventa\n"), "{skill_md}");
    assert!(skill_md.contains("     4\t# Compraventa"));
    for path in ["/skills/hipoteca/SKILL.md", "/skills/escrituras/hipoteca/SKILL.md", "/skills/compraventa2/SKILL.md"] {
        assert_eq!(text(vfs.read_file(path, 0, 10).await), format!("Error: File not found: {path}"));
    }
    assert_eq!(
        text(vfs.read_file("/skills/compraventa", 0, 10).await),
        "Error: Is a directory: /skills/compraventa (use ls to list it)"
    );
    assert_eq!(text(vfs.read_file("/", 0, 10).await), "Error: Is a directory: / (use ls to list it)");
    assert!(store.calls().iter().all(|c| !c.contains("hipoteca")), "{:?}", store.calls());
}

#[tokio::test]
async fn escapes_are_not_found_and_never_reach_another_tenant() {
    let store = MemStore::seeded();
    let mut vfs = mounted(&store);
    let mut outputs = Vec::new();
    for path in [
        "/skills/compraventa/../hipoteca/SKILL.md",
        "/skills/compraventa/%2e%2e/x",
        "//skills/compraventa/SKILL.md",
        "/workspace/../skills",
        "/skills/compraventa/..%2f..%2fu2",
        "/skills/compraventa/..%2F..%2F..%2Fu2/skills/escrituras/compraventa/SKILL.md",
        "/skills/../../u2/skills/escrituras/compraventa/SKILL.md",
        "/ticket/../../u2/tickets/T1/a.txt",
        "/ticket/..",
        "/u2/skills/escrituras/compraventa/SKILL.md",
    ] {
        let read = text(vfs.read_file(path, 0, 2000).await);
        assert!(read.starts_with("Error: File not found: "), "{path}: {read}");
        let listed = text(vfs.ls(path).await);
        assert!(listed.starts_with("Error: Path not found: "), "{path}: {listed}");
        outputs.extend([read, listed]);
        outputs.push(text(vfs.glob("**/*", Some(path)).await));
        outputs.push(text(vfs.grep(".", Some(path), None).await));
        outputs.push(text(vfs.write_file(path, "x").await));
    }
    for path in ["/workspace\\..\\x", "skills/compraventa/SKILL.md", "/workspace/a\u{0}b", "../u2"] {
        let read = text(vfs.read_file(path, 0, 10).await);
        assert!(read.starts_with("Error: Invalid path: "), "{path}: {read}");
        outputs.push(read);
    }
    // Searching everything visible must not reach u2 either.
    outputs.push(text(vfs.grep(".", None, None).await));
    outputs.push(text(vfs.glob("**", None).await));
    outputs.push(text(vfs.ls("/skills").await));
    for output in &outputs {
        assert!(!output.contains(SECRET), "leaked: {output}");
        assert!(!output.contains("u1/") && !output.contains("secret-bucket"), "key leaked: {output}");
    }
    assert!(store.calls().iter().all(|c| c.split(' ').nth(1).unwrap().starts_with("u1/")), "{:?}", store.calls());
    assert!(store.keys().iter().all(|k| !k.contains("..")));
}

#[tokio::test]
async fn binary_files_are_reported_not_dumped() {
    let store = MemStore::seeded();
    let vfs = mounted(&store);
    let expected = "Error: File is a binary file and cannot be read as text";
    assert_eq!(text(vfs.read_file("/skills/compraventa/resources/plantilla.pdf", 0, 10).await), expected);
    assert_eq!(text(vfs.read_file("/ticket/latin1.txt", 0, 10).await), expected);
}

#[tokio::test]
async fn read_numbers_lines_and_pages() {
    let store = MemStore::seeded();
    let mut vfs = mounted(&store);
    let path = "/skills/compraventa/resources/ejemplo.md";
    assert_eq!(
        vfs.read_file(path, 1, 2).await.unwrap(),
        "     2\tlinea dos\n     3\tlinea tres\n\n[2 more lines not shown; continue with offset=3]"
    );
    assert_eq!(vfs.read_file(path, 3, 2000).await.unwrap(), "     4\tlinea cuatro\n     5\tlinea cinco");
    assert_eq!(text(vfs.read_file(path, 5, 10).await), "Error: Line offset 5 exceeds file length (5 lines)");
    assert_eq!(text(vfs.read_file(path, 0, 0).await), "Error: argument 'limit' must be at least 1");

    let long = format!("{}\ncorta\n", "x".repeat(MAX_LINE_CHARS + 50));
    vfs.write_file("/workspace/larga.txt", &long).await.unwrap();
    let read = vfs.read_file("/workspace/larga.txt", 0, 10).await.unwrap();
    assert_eq!(read, format!("     1\t{} [... line truncated]\n     2\tcorta", "x".repeat(MAX_LINE_CHARS)));

    vfs.write_file("/workspace/vacio.md", "").await.unwrap();
    assert_eq!(vfs.read_file("/workspace/vacio.md", 0, 10).await.unwrap(), EMPTY_FILE_NOTE);
    let mut lines = String::new();
    for i in 1..=1000 {
        lines.push_str(&format!("l{i}\n"));
    }
    vfs.write_file("/workspace/mil.txt", &lines).await.unwrap();
    let read = vfs.read_file("/workspace/mil.txt", 995, 2000).await.unwrap();
    assert_eq!(read, "   996\tl996\n   997\tl997\n   998\tl998\n   999\tl999\n  1000\tl1000");
}

#[tokio::test]
async fn workspace_write_read_edit_and_manifest() {
    let store = MemStore::seeded();
    let mut vfs = vfs(&store);
    let content = "uno\ndos\ndos\n";
    assert_eq!(vfs.write_file("/workspace/notes/a.md", content).await.unwrap(), "Updated file /workspace/notes/a.md");
    let sha = sha256_hex(content.as_bytes());
    assert_eq!(vfs.workspace()["notes/a.md"], WorkspaceFile { sha256: sha.clone(), size: content.len() as u64 });
    let blob = format!("u1/workspaces/S1/blobs/{sha}");
    assert_eq!(store.objects.lock().unwrap()[&blob], content.as_bytes());
    assert_eq!(vfs.read_file("/workspace/notes/a.md", 0, 10).await.unwrap(), "     1\tuno\n     2\tdos\n     3\tdos");
    assert!(!store.calls().contains(&format!("get {blob}")), "read of a blob written this turn hits the cache");
    assert_eq!(vfs.ls("/workspace").await.unwrap(), "/workspace/notes/");
    assert_eq!(vfs.ls("/workspace/notes").await.unwrap(), "/workspace/notes/a.md (12 bytes)");

    // Same content elsewhere: no second put.
    vfs.write_file("/workspace/b.md", content).await.unwrap();
    assert_eq!(store.calls().iter().filter(|c| c.starts_with("put ")).count(), 1);

    // Creating only; errors for existing files, directories, files used as directories, size.
    assert!(text(vfs.write_file("/workspace/notes/a.md", "x").await)
        .starts_with("Error: File already exists: /workspace/notes/a.md"));
    assert_eq!(
        text(vfs.write_file("/workspace/notes", "x").await),
        "Error: Is a directory: /workspace/notes (use ls to list it)"
    );
    assert_eq!(text(vfs.write_file("/workspace", "x").await), "Error: Is a directory: /workspace (use ls to list it)");
    assert_eq!(
        text(vfs.write_file("/workspace/notes/a.md/c.md", "x").await),
        "Error: Not a directory: /workspace/notes/a.md is a file"
    );
    let big = "x".repeat(MAX_FILE_BYTES + 1);
    assert!(text(vfs.write_file("/workspace/big.txt", &big).await)
        .starts_with(&format!("Error: Content too large: {} bytes", MAX_FILE_BYTES + 1)));

    // Edits.
    assert_eq!(
        text(vfs.edit_file("/workspace/notes/a.md", "dos", "2", false).await),
        "Error: String appears 2 times in /workspace/notes/a.md. Use replace_all=true to replace every occurrence, or give a longer old_string that occurs only once"
    );
    assert_eq!(
        text(vfs.edit_file("/workspace/notes/a.md", "tres", "3", false).await),
        "Error: String not found in file /workspace/notes/a.md: \"tres\""
    );
    assert_eq!(
        vfs.edit_file("/workspace/notes/a.md", "uno", "1", false).await.unwrap(),
        "Successfully replaced 1 instance(s) of the string in '/workspace/notes/a.md'"
    );
    assert_eq!(
        vfs.edit_file("/workspace/notes/a.md", "dos", "2", true).await.unwrap(),
        "Successfully replaced 2 instance(s) of the string in '/workspace/notes/a.md'"
    );
    assert_eq!(vfs.read_file("/workspace/notes/a.md", 0, 10).await.unwrap(), "     1\t1\n     2\t2\n     3\t2");
    assert_eq!(
        text(vfs.edit_file("/workspace/nada.md", "a", "b", false).await),
        "Error: File not found: /workspace/nada.md"
    );
    assert_eq!(
        text(vfs.edit_file("/workspace/notes", "a", "b", false).await),
        "Error: Is a directory: /workspace/notes (use ls to list it)"
    );
    assert_eq!(
        text(vfs.edit_file("/workspace/b.md", "", "b", false).await),
        "Error: argument 'old_string' must not be empty"
    );

    // The next turn sees the committed manifest, reading blobs from the store.
    let manifest = vfs.into_workspace();
    let new_sha = sha256_hex(b"1\n2\n2\n");
    assert_eq!(manifest["notes/a.md"].sha256, new_sha);
    assert_eq!(manifest["b.md"].sha256, sha);
    let next = Vfs::new(&store, user(), session(), None, manifest);
    assert_eq!(next.read_file("/workspace/notes/a.md", 0, 10).await.unwrap(), "     1\t1\n     2\t2\n     3\t2");
    assert!(store.calls().contains(&format!("get u1/workspaces/S1/blobs/{new_sha}")));

    // A manifest entry whose blob is gone is reported without its key.
    let mut broken = BTreeMap::new();
    broken.insert("x.md".to_owned(), WorkspaceFile { sha256: "00".repeat(32), size: 3 });
    let next = Vfs::new(&store, user(), session(), None, broken);
    assert_eq!(
        text(next.read_file("/workspace/x.md", 0, 10).await),
        "Error: The content of /workspace/x.md could not be read from storage"
    );
}

#[tokio::test]
async fn ticket_and_skills_are_read_only() {
    let store = MemStore::seeded();
    let mut vfs = mounted(&store);
    for path in [
        "/ticket/a.txt",
        "/ticket/nuevo.txt",
        "/skills/compraventa/SKILL.md",
        "/skills/hipoteca/x.md",
        "/",
        "/skills",
        "/otro/x",
    ] {
        let expected = format!("Error: Path is read-only: {path} (only /workspace is writable)");
        assert_eq!(text(vfs.write_file(path, "x").await), expected);
        assert_eq!(text(vfs.edit_file(path, "a", "b", true).await), expected);
    }
    assert!(store.calls().iter().all(|c| !c.starts_with("put ")));
    assert!(vfs.workspace().is_empty());
}

#[tokio::test]
async fn ticket_is_absent_without_a_ticket_id() {
    let store = MemStore::seeded();
    let vfs = Vfs::new(&store, user(), session(), None, BTreeMap::new());
    assert_eq!(vfs.ls("/").await.unwrap(), "/workspace/");
    assert_eq!(text(vfs.read_file("/ticket/a.txt", 0, 10).await), "Error: File not found: /ticket/a.txt");
    assert_eq!(text(vfs.ls("/ticket").await), "Error: Path not found: /ticket");
    assert_eq!(vfs.grep("clausula", None, None).await.unwrap(), "No matches found for pattern: clausula");
    assert!(store.calls().is_empty(), "{:?}", store.calls());

    let with_ticket = self::vfs(&store);
    assert_eq!(with_ticket.read_file("/ticket/a.txt", 1, 1).await.unwrap(), "     2\tsegunda");
    assert_eq!(text(with_ticket.read_file("/ticket/otro.txt", 0, 1).await), "Error: File not found: /ticket/otro.txt");
}

#[tokio::test]
async fn glob_over_visible_roots() {
    let store = MemStore::seeded();
    let mut vfs = mounted(&store);
    vfs.write_file("/workspace/notas/borrador.md", "clausula nueva\n").await.unwrap();
    assert_eq!(
        vfs.glob("**/*.md", None).await.unwrap(),
        "/skills/compraventa/SKILL.md\n/skills/compraventa/disclosure_clausulas.md\n/skills/compraventa/resources/ejemplo.md\n/workspace/notas/borrador.md"
    );
    assert_eq!(
        vfs.glob("*.md", Some("/skills/compraventa")).await.unwrap(),
        "/skills/compraventa/SKILL.md\n/skills/compraventa/disclosure_clausulas.md"
    );
    assert_eq!(vfs.glob("/ticket/*", None).await.unwrap(), "/ticket/a.txt\n/ticket/latin1.txt");
    assert_eq!(
        vfs.glob("resources/*.pdf", Some("/skills/compraventa/")).await.unwrap(),
        "/skills/compraventa/resources/plantilla.pdf"
    );
    assert_eq!(vfs.glob("*.md", None).await.unwrap(), "No files found matching pattern");
    assert!(text(vfs.glob("a[", None).await).starts_with("Error: Invalid glob pattern: "));
    assert!(text(vfs.glob("", None).await).starts_with("Error: Invalid glob pattern: "));
    assert_eq!(text(vfs.glob("*", Some("/skills/hipoteca")).await), "Error: Path not found: /skills/hipoteca");
}

#[tokio::test]
async fn grep_over_text_files() {
    let store = MemStore::seeded();
    let mut vfs = mounted(&store);
    assert_eq!(
        vfs.grep("clausula", None, None).await.unwrap(),
        "/skills/compraventa/disclosure_clausulas.md:2:La clausula penal.\n/skills/compraventa/disclosure_clausulas.md:3:Otra clausula.\n/ticket/a.txt:1:ticket: clausula del cliente"
    );
    assert_eq!(
        vfs.grep("(?i)^# ", Some("/skills"), Some("*.md")).await.unwrap(),
        "/skills/compraventa/SKILL.md:4:# Compraventa\n/skills/compraventa/disclosure_clausulas.md:1:# Clausulas"
    );
    assert_eq!(
        vfs.grep("clausula", Some("/ticket/a.txt"), None).await.unwrap(),
        "/ticket/a.txt:1:ticket: clausula del cliente"
    );
    assert_eq!(
        vfs.grep("clausula", None, Some("resources/*")).await.unwrap(),
        "No matches found for pattern: clausula"
    );
    assert!(text(vfs.grep("(sin cerrar", None, None).await).starts_with("Error: Invalid regex pattern: "));
    assert!(text(vfs.grep("x", None, Some("[")).await).starts_with("Error: Invalid glob pattern: "));
    assert_eq!(text(vfs.grep("x", Some("/nada"), None).await), "Error: Path not found: /nada");

    let many = "coincide\n".repeat(MAX_GREP_MATCHES + 5);
    vfs.write_file("/workspace/muchas.txt", &many).await.unwrap();
    let out = vfs.grep("coincide", Some("/workspace"), None).await.unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), MAX_GREP_MATCHES + 1);
    assert_eq!(lines[0], "/workspace/muchas.txt:1:coincide");
    assert!(lines[MAX_GREP_MATCHES].contains("truncated at 200 matches"));
}

#[tokio::test]
async fn duplicate_short_names_first_mounted_wins() {
    let store = MemStore::seeded();
    let mut vfs = mounted(&store);
    vfs.mount_skill(skill("contratos/compraventa"));
    vfs.mount_skill(skill("escrituras/hipoteca"));
    assert_eq!(vfs.loaded_skills().len(), 3);
    assert_eq!(vfs.ls("/skills").await.unwrap(), "/skills/compraventa/\n/skills/hipoteca/");
    assert!(vfs.read_file("/skills/compraventa/SKILL.md", 0, 10).await.unwrap().contains("name: compraventa"));
    assert_eq!(vfs.skill_dir(&skill("escrituras/compraventa")).as_deref(), Some("/skills/compraventa"));
    assert_eq!(vfs.skill_dir(&skill("contratos/compraventa")), None);
    assert_eq!(vfs.skill_dir(&skill("escrituras/otra")), None);
    assert_eq!(
        vfs.read_file("/skills/hipoteca/SKILL.md", 0, 1).await.unwrap(),
        "     1\t# Hipoteca\n\n[1 more lines not shown; continue with offset=1]"
    );
}

#[tokio::test]
async fn storage_failures_do_not_leak_backend_details() {
    let store = BrokenStore;
    let mut vfs = Vfs::new(&store, user(), session(), Some(TicketId::parse("T1").unwrap()), BTreeMap::new());
    vfs.mount_skill(skill("escrituras/compraventa"));
    let expected = "Error: File storage is temporarily unavailable; try again later";
    assert_eq!(text(vfs.read_file("/ticket/a.txt", 0, 10).await), expected);
    assert_eq!(text(vfs.ls("/skills/compraventa").await), expected);
    assert_eq!(text(vfs.grep("x", None, None).await), expected);
    assert_eq!(text(vfs.write_file("/workspace/a.md", "x").await), expected);
    assert!(vfs.workspace().is_empty());
}

#[tokio::test]
async fn run_file_tool_validates_arguments() {
    let store = MemStore::seeded();
    let mut vfs = mounted(&store);
    let names: Vec<String> = file_tool_specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, FILE_TOOL_NAMES);
    for spec in file_tool_specs() {
        assert_eq!(spec.parameters["type"], "object");
        assert!(spec.parameters["required"].as_array().is_some_and(|r| !r.is_empty()), "{}", spec.name);
    }

    let mut run = async |name: &str, args: serde_json::Value| run_file_tool(&mut vfs, name, &args).await;
    assert_eq!(run("load_skill", json!({})).await, None);
    assert_eq!(
        run("read_file", json!({})).await.unwrap(),
        "Error: missing required argument 'file_path' (a string) for read_file"
    );
    assert_eq!(
        run("read_file", json!({"file_path": 3})).await.unwrap(),
        "Error: argument 'file_path' of read_file must be a string, got a number"
    );
    assert_eq!(
        run("read_file", json!({"file_path": "/ticket/a.txt", "offset": "1"})).await.unwrap(),
        "Error: argument 'offset' of read_file must be a non-negative integer, got a string"
    );
    assert_eq!(
        run("read_file", json!({"file_path": "/ticket/a.txt", "limit": -1})).await.unwrap(),
        "Error: argument 'limit' of read_file must be a non-negative integer, got -1"
    );
    assert_eq!(
        run("read_file", json!({"file_path": "/ticket/a.txt", "offset": 1.0, "limit": null})).await.unwrap(),
        "     2\tsegunda"
    );
    assert_eq!(
        run("read_file", json!("{\"file_path\": \"/ticket/a.txt\", \"limit\": 1}")).await.unwrap(),
        "     1\tticket: clausula del cliente\n\n[1 more lines not shown; continue with offset=1]"
    );
    assert_eq!(
        run("ls", json!("{not json")).await.unwrap(),
        "Error: the arguments of ls are not valid JSON: send a JSON object"
    );
    assert_eq!(run("ls", json!([1])).await.unwrap(), "Error: the arguments of ls must be a JSON object, got an array");
    assert_eq!(run("ls", json!({"path": "/"})).await.unwrap(), "/skills/\n/ticket/\n/workspace/");
    assert_eq!(
        run("write_file", json!({"file_path": "/workspace/a.md"})).await.unwrap(),
        "Error: missing required argument 'content' (a string) for write_file"
    );
    assert_eq!(
        run("write_file", json!({"file_path": "/workspace/a.md", "content": "hola hola"})).await.unwrap(),
        "Updated file /workspace/a.md"
    );
    assert_eq!(
        run(
            "edit_file",
            json!({"file_path": "/workspace/a.md", "old_string": "hola", "new_string": "adios", "replace_all": "yes"})
        )
        .await
        .unwrap(),
        "Error: argument 'replace_all' of edit_file must be a boolean (true or false), got a string"
    );
    assert_eq!(
        run(
            "edit_file",
            json!({"file_path": "/workspace/a.md", "old_string": "hola", "new_string": "adios", "replace_all": true})
        )
        .await
        .unwrap(),
        "Successfully replaced 2 instance(s) of the string in '/workspace/a.md'"
    );
    assert_eq!(run("glob", json!({"pattern": "*.md", "path": "/workspace"})).await.unwrap(), "/workspace/a.md");
    assert_eq!(
        run("glob", json!({"pattern": "*.md", "path": 1})).await.unwrap(),
        "Error: argument 'path' of glob must be a string, got a number"
    );
    assert_eq!(
        run("grep", json!({"pattern": "adios", "glob": "*.md"})).await.unwrap(),
        "/workspace/a.md:1:adios adios"
    );
    assert!(run("grep", json!({"pattern": "("})).await.unwrap().starts_with("Error: Invalid regex pattern: "));
    assert_eq!(
        run("grep", json!({"path": "/"})).await.unwrap(),
        "Error: missing required argument 'pattern' (a string) for grep"
    );
    assert_eq!(vfs.workspace().len(), 1);
}

#[tokio::test]
async fn hostile_patterns_and_paths_are_error_results_never_panics() {
    let store = MemStore::seeded();
    let vfs = mounted(&store);
    let huge = "a".repeat(450 * 1024);
    let nested_groups = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
    let nested_alternation = format!("{}a{}", "{a,".repeat(200), "}".repeat(200));
    let many_globstars = "**/".repeat(10_000) + "*";
    let classes = "[\u{0}-\u{10FFFF}]".repeat(100);
    for pattern in [&huge, &nested_alternation, &many_globstars, &classes, &"\0".to_owned()] {
        let result = vfs.glob(pattern, None).await;
        if pattern.len() > MAX_GLOB_PATTERN_BYTES {
            assert!(text(result).starts_with("Error: Invalid glob pattern"), "{}", pattern.len());
        }
        let filtered = vfs.grep("clausula", None, Some(pattern)).await;
        if pattern.len() > MAX_GLOB_PATTERN_BYTES {
            assert!(text(filtered).starts_with("Error: Invalid glob pattern"));
        }
    }
    for pattern in [&huge, &nested_groups, &"\\p{L}{1000}{1000}".to_owned()] {
        let result = text(vfs.grep(pattern, None, None).await);
        assert!(result.starts_with("Error: Invalid regex pattern"), "{}: {result}", pattern.len());
    }
    // Catastrophic-backtracking shapes are ordinary patterns for a linear-time regex engine.
    let result = text(vfs.grep(&"(a*)*b".repeat(500), None, None).await);
    assert!(result.starts_with("No matches"), "{result}");
    let nested = text(vfs.glob(&nested_alternation, None).await);
    assert!(nested.starts_with("Error: Invalid glob pattern: alternatives nest deeper"), "{nested}");
    let long_path = format!("/workspace/{}", "a".repeat(64 * 1024));
    assert!(text(vfs.read_file(&long_path, 0, 10).await).starts_with("Error: Invalid path"));
    assert!(text(vfs.glob("*", Some(&long_path)).await).starts_with("Error: Invalid path"));
}

#[tokio::test]
async fn the_workspace_quota_is_enforced_where_the_model_writes_and_delete_file_makes_room() {
    let store = MemStore::seeded();
    let mut vfs = vfs(&store);
    for i in 0..MAX_WORKSPACE_FILES {
        vfs.write_file(&format!("/workspace/f{i}.txt"), &format!("file {i}")).await.unwrap();
    }
    let full = text(vfs.write_file("/workspace/one-more.txt", "x").await);
    assert!(full.starts_with("Error: /workspace already holds 100 files") && full.contains("delete_file"), "{full}");
    assert_eq!(vfs.delete_file("/workspace/f0.txt").unwrap(), "Deleted /workspace/f0.txt");
    assert!(text(vfs.delete_file("/workspace/f0.txt")).starts_with("Error: File not found"));
    assert!(text(vfs.delete_file("/skills/compraventa/SKILL.md")).starts_with("Error: Path is read-only"));
    vfs.write_file("/workspace/one-more.txt", "x").await.unwrap();
    assert_eq!(vfs.workspace().len(), MAX_WORKSPACE_FILES);

    // Bytes: files of the largest size until the total would pass the limit.
    let mut vfs = vfs_empty(&store);
    let big = "y".repeat(MAX_FILE_BYTES);
    let fits = (MAX_WORKSPACE_BYTES as usize) / MAX_FILE_BYTES;
    for i in 0..fits {
        vfs.write_file(&format!("/workspace/big{i}.txt"), &format!("{i:03}{}", &big[3..])).await.unwrap();
    }
    let over = text(vfs.write_file("/workspace/last.txt", "z").await);
    assert!(over.starts_with("Error: /workspace would hold") && over.contains("10 MiB"), "{over}");
    // An edit that shrinks a file makes room; one that grows the workspace past the limit is refused.
    vfs.edit_file("/workspace/big0.txt", "000", "0", false).await.unwrap();
    vfs.write_file("/workspace/two.txt", "ab").await.unwrap();
    let grown = text(vfs.edit_file("/workspace/two.txt", "ab", "abc", false).await);
    assert!(grown.starts_with("Error: /workspace would hold"), "{grown}");
    let long = format!("/workspace/{}", "p".repeat(MAX_WORKSPACE_PATH_BYTES + 1));
    assert!(text(vfs_empty(&store).write_file(&long, "x").await).starts_with("Error: Invalid path"));
}

fn vfs_empty(store: &MemStore) -> Vfs<'_> {
    Vfs::new(store, user(), session(), None, BTreeMap::new())
}
