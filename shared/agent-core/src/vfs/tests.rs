//! Unit tests of the virtual filesystem and its tools over an in-memory object store: roots,
//! tenant walls, deepagents' formats and messages, bounds and quotas.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::json;

use super::storage::sha256_hex;
use super::*;
use crate::store::{Object, ObjectMeta};
use local_store::MemoryObjectStore as MemStore;

const SECRET: &str = "SECRETO-DEL-INQUILINO-U2";
const SKILL_MD: &str = "---\nname: compraventa\n---\n# Compraventa\nRedacta escrituras de compraventa.\n";
const EJEMPLO: &str = "linea uno\nlinea dos\nlinea tres\nlinea cuatro\nlinea cinco\n";

/// The store the tests read: tenant `u1`'s skills and tickets, and tenant `u2`'s secrets.
fn seeded() -> MemStore {
    let store = MemStore::recording();
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
        store.insert(&key, bytes);
    }
    store
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
    let store = seeded();
    let mut vfs = vfs(&store);
    assert_eq!(vfs.ls("/").await.unwrap(), "['/memories/', '/ticket/', '/workspace/']");
    assert_eq!(vfs.ls("/skills").await.unwrap(), "No files found");
    assert_eq!(
        text(vfs.read_file("/skills/compraventa/SKILL.md", 0, 10).await),
        "Error: File '/skills/compraventa/SKILL.md' not found"
    );

    vfs.mount_skill(skill("escrituras/compraventa"));
    vfs.mount_skill(skill("escrituras/compraventa")); // idempotent
    assert_eq!(vfs.loaded_skills(), [skill("escrituras/compraventa")]);
    assert_eq!(vfs.ls("/").await.unwrap(), "['/memories/', '/skills/', '/ticket/', '/workspace/']");
    assert_eq!(vfs.ls("/workspace").await.unwrap(), "No files found");
}

#[tokio::test]
async fn ls_skills_shows_only_mounted_skills_and_their_tree() {
    let store = seeded();
    let vfs = mounted(&store);
    assert_eq!(vfs.ls("/skills").await.unwrap(), "['/skills/compraventa/']");
    assert_eq!(
        vfs.ls("/skills/compraventa").await.unwrap(),
        "['/skills/compraventa/SKILL.md', '/skills/compraventa/disclosure_clausulas.md', '/skills/compraventa/resources/']"
    );
    assert_eq!(
        vfs.ls("/skills/compraventa/resources/").await.unwrap(),
        "['/skills/compraventa/resources/ejemplo.md', '/skills/compraventa/resources/plantilla.pdf']\nBinary files \
         (download them; read_file cannot show them): /skills/compraventa/resources/plantilla.pdf (32 bytes)"
    );
    // A file lists itself (deepagents answers "No files found").
    assert_eq!(vfs.ls("/skills/compraventa/SKILL.md").await.unwrap(), "['/skills/compraventa/SKILL.md']");
    assert_eq!(vfs.ls("/ticket").await.unwrap(), "['/ticket/a.txt', '/ticket/latin1.txt']");
    // Well-formed paths that name nothing are empty, as in deepagents.
    assert_eq!(vfs.ls("/skills/compraventa/nada").await.unwrap(), "No files found");
    assert_eq!(vfs.ls("/etc").await.unwrap(), "No files found");
    // The skill's prefix is listed once for the whole turn.
    vfs.read_file("/skills/compraventa/SKILL.md", 0, 10).await.unwrap();
    let lists = store.recorded().iter().filter(|c| c.starts_with("list u1/skills/escrituras/compraventa/")).count();
    assert_eq!(lists, 1);
}

#[tokio::test]
async fn reads_a_mounted_skill_but_not_an_unmounted_one() {
    let store = seeded();
    let vfs = mounted(&store);
    let skill_md = vfs.read_file("/skills/compraventa/SKILL.md", 0, 2000).await.unwrap();
    assert!(skill_md.starts_with("@@ lines 1-5 of 5 @@\n---\nname: compraventa\n"), "{skill_md}");
    assert!(skill_md.contains("\n# Compraventa\n"));
    for path in ["/skills/hipoteca/SKILL.md", "/skills/escrituras/hipoteca/SKILL.md", "/skills/compraventa2/SKILL.md"] {
        assert_eq!(text(vfs.read_file(path, 0, 10).await), format!("Error: File '{path}' not found"));
    }
    assert_eq!(
        text(vfs.read_file("/skills/compraventa", 0, 10).await),
        "Error: Is a directory: /skills/compraventa (use ls to list it)"
    );
    assert_eq!(text(vfs.read_file("/", 0, 10).await), "Error: Is a directory: / (use ls to list it)");
    assert!(store.recorded().iter().all(|c| !c.contains("hipoteca")), "{:?}", store.recorded());
}

#[tokio::test]
async fn escapes_are_not_found_and_never_reach_another_tenant() {
    let store = seeded();
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
    ] {
        let read = text(vfs.read_file(path, 0, 2000).await);
        assert!(read.starts_with("Error: File '") && read.ends_with("' not found"), "{path}: {read}");
        let listed = text(vfs.ls(path).await);
        assert!(listed.starts_with("Error: Path not found: "), "{path}: {listed}");
        let globbed = text(vfs.glob("**/*", Some(path)).await);
        assert!(globbed.starts_with("Error: Path not found: "), "{path}: {globbed}");
        let grepped = text(vfs.grep("", Some(path), None).await);
        assert!(grepped.starts_with("Error: Path not found: "), "{path}: {grepped}");
        outputs.extend([read, listed, globbed, grepped]);
        outputs.push(text(vfs.write_file(path, "x").await));
    }
    // Another tenant's key as a path is just a path that does not exist.
    let other = "/u2/skills/escrituras/compraventa/SKILL.md";
    assert_eq!(text(vfs.read_file(other, 0, 10).await), format!("Error: File '{other}' not found"));
    assert_eq!(vfs.ls(other).await.unwrap(), "No files found");
    assert_eq!(vfs.grep("", Some(other), None).await.unwrap(), "No matches found");
    for path in ["/workspace\\..\\x", "skills/compraventa/SKILL.md", "/workspace/a\u{0}b", "../u2"] {
        let read = text(vfs.read_file(path, 0, 10).await);
        assert!(read.starts_with("Error: Invalid path: "), "{path}: {read}");
        outputs.push(read);
    }
    // Searching everything visible (an empty pattern matches every line) must not reach u2 either.
    outputs.push(text(vfs.grep_with("", None, None, GrepOutput::Content, None).await));
    outputs.push(text(vfs.glob("**", None).await));
    outputs.push(text(vfs.ls("/skills").await));
    for output in &outputs {
        assert!(!output.contains(SECRET), "leaked: {output}");
        assert!(!output.contains("u1/") && !output.contains("secret-bucket"), "key leaked: {output}");
    }
    assert!(outputs.iter().any(|o| o.contains("/ticket/a.txt:\n  1: ticket: clausula del cliente")), "{outputs:?}");
    assert!(store.recorded().iter().all(|c| c.split(' ').nth(1).unwrap().starts_with("u1/")), "{:?}", store.recorded());
    assert!(store.keys().iter().all(|k| !k.contains("..")));
}

#[tokio::test]
async fn binary_files_are_reported_not_dumped() {
    let store = seeded();
    let vfs = mounted(&store);
    assert_eq!(
        text(vfs.read_file("/skills/compraventa/resources/plantilla.pdf", 0, 10).await),
        "Error: File '/skills/compraventa/resources/plantilla.pdf' is a binary file (32 bytes) and cannot be read as text"
    );
    assert_eq!(
        text(vfs.read_file("/ticket/latin1.txt", 0, 10).await),
        "Error: File '/ticket/latin1.txt' is a binary file (3 bytes) and cannot be read as text"
    );
}

#[tokio::test]
async fn read_pages_under_a_status_header() {
    let store = seeded();
    let mut vfs = mounted(&store);
    let path = "/skills/compraventa/resources/ejemplo.md";
    assert_eq!(vfs.read_file(path, 1, 2).await.unwrap(), "@@ lines 2-3 of 5 | next offset 3 @@\nlinea dos\nlinea tres");
    assert_eq!(vfs.read_file(path, 3, 2000).await.unwrap(), "@@ lines 4-5 of 5 @@\nlinea cuatro\nlinea cinco");
    assert_eq!(text(vfs.read_file(path, 5, 10).await), "Error: Line offset 5 exceeds file length (5 lines)");
    assert_eq!(
        vfs.read_file(path, 0, 0).await.unwrap(),
        "System reminder: no lines were read because `limit` was 0. The file was not inspected and may have \
         contents; retry with `limit` >= 1 to read it."
    );
    assert_eq!(
        vfs.read_window(path, -3, 1).await.unwrap(),
        "[Requested offset -3 is before the start of the file; read from line 1 instead.]\n\
         @@ lines 1-1 of 5 | next offset 1 @@\nlinea uno"
    );

    // Long lines are shown whole; only the result as a whole is bounded.
    let long = format!("{}\ncorta\n", "x".repeat(5000));
    vfs.write_file("/workspace/larga.txt", &long).await.unwrap();
    let read = vfs.read_file("/workspace/larga.txt", 0, 10).await.unwrap();
    assert_eq!(read, format!("@@ lines 1-2 of 2 @@\n{}\ncorta", "x".repeat(5000)));
    let big: String = (0..2000).map(|i| format!("{i:04} {}\n", "y".repeat(95))).collect();
    vfs.write_file("/workspace/grande.txt", &big).await.unwrap();
    let read = vfs.read_file("/workspace/grande.txt", 0, 2000).await.unwrap();
    assert!(read.len() <= MAX_OUTPUT_BYTES, "{}", read.len());
    let header = read.lines().find(|line| line.starts_with("@@")).unwrap();
    let shown = read.lines().filter(|line| line.ends_with('y')).count();
    assert_eq!(header, format!("@@ lines 1-{shown} of 2000 | next offset {shown} | truncated due to size @@"));
    assert!(read.starts_with("[Output was truncated due to size limits."), "{}", &read[..200]);
    let next = vfs.read_file("/workspace/grande.txt", shown, 1).await.unwrap();
    assert!(next.ends_with(&format!("{shown:04} {}", "y".repeat(95))), "the next offset is the next line: {next}");

    vfs.write_file("/workspace/vacio.md", "").await.unwrap();
    assert_eq!(vfs.read_file("/workspace/vacio.md", 0, 10).await.unwrap(), EMPTY_FILE_NOTE);
    vfs.write_file("/workspace/blancos.md", " \n\t\n").await.unwrap();
    assert_eq!(vfs.read_file("/workspace/blancos.md", 9, 10).await.unwrap(), EMPTY_FILE_NOTE);
    let mut lines = String::new();
    for i in 1..=1000 {
        lines.push_str(&format!("l{i}\n"));
    }
    vfs.write_file("/workspace/mil.txt", &lines).await.unwrap();
    let read = vfs.read_file("/workspace/mil.txt", 995, 2000).await.unwrap();
    assert_eq!(read, "@@ lines 996-1000 of 1000 @@\nl996\nl997\nl998\nl999\nl1000");
    let first = vfs.read_file("/workspace/mil.txt", 0, DEFAULT_READ_LIMIT as usize).await.unwrap();
    assert!(first.starts_with("@@ lines 1-100 of 1000 | next offset 100 @@\nl1\n"), "{first}");
}

#[tokio::test]
async fn workspace_write_overwrite_read_edit_and_manifest() {
    let store = seeded();
    let mut vfs = vfs(&store);
    let content = "uno\ndos\ndos\n";
    assert_eq!(vfs.write_file("/workspace/notes/a.md", content).await.unwrap(), "Updated file /workspace/notes/a.md");
    let sha = sha256_hex(content.as_bytes());
    assert_eq!(vfs.workspace()["notes/a.md"], WorkspaceFile { sha256: sha.clone(), size: content.len() as u64 });
    let blob = format!("u1/workspaces/S1/blobs/{sha}");
    assert_eq!(store.bytes(&blob).as_deref(), Some(content.as_bytes()));
    assert_eq!(vfs.read_file("/workspace/notes/a.md", 0, 10).await.unwrap(), "@@ lines 1-3 of 3 @@\nuno\ndos\ndos");
    assert!(!store.recorded().contains(&format!("get {blob}")), "read of a blob written this turn hits the cache");
    assert_eq!(vfs.ls("/workspace").await.unwrap(), "['/workspace/notes/']");
    assert_eq!(vfs.ls("/workspace/notes").await.unwrap(), "['/workspace/notes/a.md']");

    // Same content elsewhere: no second put.
    vfs.write_file("/workspace/b.md", content).await.unwrap();
    assert_eq!(store.recorded().iter().filter(|c| c.starts_with("put ")).count(), 1);

    // Writing over an existing file replaces it, as in deepagents 0.7.
    assert_eq!(
        vfs.write_file("/workspace/notes/a.md", "borrador\n").await.unwrap(),
        "Updated file /workspace/notes/a.md"
    );
    assert_eq!(vfs.read_file("/workspace/notes/a.md", 0, 10).await.unwrap(), "@@ lines 1-1 of 1 @@\nborrador");
    assert_eq!(vfs.workspace().len(), 2);
    vfs.write_file("/workspace/notes/a.md", content).await.unwrap();
    assert_eq!(vfs.workspace()["notes/a.md"].sha256, sha);

    // Errors for directories, files used as directories, size.
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

    // Edits, with deepagents' messages.
    assert_eq!(
        text(vfs.edit_file("/workspace/notes/a.md", "dos", "2", false).await),
        "Error: String 'dos' appears 2 times in file. Use replace_all=True to replace all instances, or provide a \
         more specific string with surrounding context."
    );
    assert_eq!(
        text(vfs.edit_file("/workspace/notes/a.md", "tres", "3", false).await),
        "Error: String not found in file: 'tres'"
    );
    assert_eq!(
        vfs.edit_file("/workspace/notes/a.md", "uno", "1", false).await.unwrap(),
        "Successfully replaced 1 instance(s) of the string in '/workspace/notes/a.md'"
    );
    assert_eq!(
        vfs.edit_file("/workspace/notes/a.md", "dos", "2", true).await.unwrap(),
        "Successfully replaced 2 instance(s) of the string in '/workspace/notes/a.md'"
    );
    assert_eq!(vfs.read_file("/workspace/notes/a.md", 0, 10).await.unwrap(), "@@ lines 1-3 of 3 @@\n1\n2\n2");
    assert_eq!(
        text(vfs.edit_file("/workspace/nada.md", "a", "b", false).await),
        "Error: File '/workspace/nada.md' not found"
    );
    assert_eq!(
        text(vfs.edit_file("/workspace/notes", "a", "b", false).await),
        "Error: Is a directory: /workspace/notes (use ls to list it)"
    );
    assert_eq!(
        text(vfs.edit_file("/workspace/b.md", "", "b", false).await),
        "Error: old_string cannot be empty. Provide the exact text to replace."
    );
    let long_old = "z".repeat(300);
    assert_eq!(
        text(vfs.edit_file("/workspace/b.md", &long_old, "b", false).await),
        format!("Error: String not found in file: '{}...'", "z".repeat(200))
    );
    // A final newline the file does not have is named as the problem.
    vfs.write_file("/workspace/sin_final.md", "uno\ndos").await.unwrap();
    assert_eq!(
        text(vfs.edit_file("/workspace/sin_final.md", "dos\n", "2\n", false).await),
        "Error: old_string ends with a newline, but the file does not end with a newline. Retry with the trailing \
         newline removed from old_string (and from new_string if it also ends with a newline)."
    );
    vfs.write_file("/workspace/sin_final.md", "b b").await.unwrap();
    assert!(text(vfs.edit_file("/workspace/sin_final.md", "b\n", "c", false).await)
        .contains("old_string would appear 2 times in the file"));
    vfs.delete("/workspace/sin_final.md").await.unwrap();

    // The next turn sees the committed manifest, reading blobs from the store.
    let manifest = vfs.into_workspace();
    let new_sha = sha256_hex(b"1\n2\n2\n");
    assert_eq!(manifest["notes/a.md"].sha256, new_sha);
    assert_eq!(manifest["b.md"].sha256, sha);
    let next = Vfs::new(&store, user(), session(), None, manifest);
    assert_eq!(next.read_file("/workspace/notes/a.md", 0, 10).await.unwrap(), "@@ lines 1-3 of 3 @@\n1\n2\n2");
    assert!(store.recorded().contains(&format!("get u1/workspaces/S1/blobs/{new_sha}")));

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
    let store = seeded();
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
        let expected = format!("Error: Path is read-only: {path} (only /workspace and /memories are writable)");
        assert_eq!(text(vfs.write_file(path, "x").await), expected);
        assert_eq!(text(vfs.edit_file(path, "a", "b", true).await), expected);
    }
    assert!(store.recorded().iter().all(|c| !c.starts_with("put ")));
    assert!(vfs.workspace().is_empty());
}

#[tokio::test]
async fn ticket_is_absent_without_a_ticket_id() {
    let store = seeded();
    let vfs = Vfs::new(&store, user(), session(), None, BTreeMap::new());
    assert_eq!(vfs.ls("/").await.unwrap(), "['/memories/', '/workspace/']");
    assert_eq!(text(vfs.read_file("/ticket/a.txt", 0, 10).await), "Error: File '/ticket/a.txt' not found");
    assert_eq!(vfs.ls("/ticket").await.unwrap(), "No files found");
    assert_eq!(vfs.grep("clausula", None, None).await.unwrap(), "No matches found");
    // A search of every root looks in the user's memories, and in no ticket.
    assert_eq!(store.recorded(), ["list u1/memories/"]);

    let with_ticket = self::vfs(&store);
    assert_eq!(with_ticket.read_file("/ticket/a.txt", 1, 1).await.unwrap(), "@@ lines 2-2 of 2 @@\nsegunda");
    assert_eq!(text(with_ticket.read_file("/ticket/otro.txt", 0, 1).await), "Error: File '/ticket/otro.txt' not found");
}

#[tokio::test]
async fn glob_over_visible_roots() {
    let store = seeded();
    let mut vfs = mounted(&store);
    vfs.write_file("/workspace/notas/borrador.md", "clausula nueva\n").await.unwrap();
    vfs.write_file("/workspace/.oculto/nota.md", "x\n").await.unwrap();
    let every_md = "['/skills/compraventa/SKILL.md', '/skills/compraventa/disclosure_clausulas.md', \
                    '/skills/compraventa/resources/ejemplo.md', '/workspace/notas/borrador.md']";
    assert_eq!(vfs.glob("**/*.md", None).await.unwrap(), every_md);
    // Without '/', the pattern matches file names at any depth (so also under a dot-directory).
    assert_eq!(
        vfs.glob("*.md", None).await.unwrap(),
        every_md.replace("'/workspace/notas", "'/workspace/.oculto/nota.md', '/workspace/notas")
    );
    assert_eq!(
        vfs.glob("*.md", Some("/skills/compraventa")).await.unwrap(),
        "['/skills/compraventa/SKILL.md', '/skills/compraventa/disclosure_clausulas.md', \
         '/skills/compraventa/resources/ejemplo.md']"
    );
    // A leading '/' anchors to the search root.
    assert_eq!(
        vfs.glob("/*.md", Some("/skills/compraventa")).await.unwrap(),
        "['/skills/compraventa/SKILL.md', '/skills/compraventa/disclosure_clausulas.md']"
    );
    assert_eq!(vfs.glob("/ticket/*", None).await.unwrap(), "['/ticket/a.txt', '/ticket/latin1.txt']");
    assert_eq!(
        vfs.glob("resources/*.pdf", Some("/skills/compraventa/")).await.unwrap(),
        "['/skills/compraventa/resources/plantilla.pdf']"
    );
    assert_eq!(vfs.glob("*.{txt,pdf}", Some("/ticket")).await.unwrap(), "['/ticket/a.txt', '/ticket/latin1.txt']");
    assert_eq!(vfs.glob("*.csv", None).await.unwrap(), "No files found");
    assert_eq!(vfs.glob("a[", None).await.unwrap(), "No files found");
    assert_eq!(vfs.glob("", None).await.unwrap(), "No files found");
    assert_eq!(text(vfs.glob("../*", None).await), "Error: Path traversal not allowed in glob pattern '../*'");
    assert_eq!(vfs.glob("*", Some("/skills/hipoteca")).await.unwrap(), "No files found");
}

#[tokio::test]
async fn grep_matches_literal_text() {
    let store = seeded();
    let mut vfs = mounted(&store);
    assert_eq!(
        vfs.grep("clausula", None, None).await.unwrap(),
        "/skills/compraventa/disclosure_clausulas.md\n/ticket/a.txt"
    );
    assert_eq!(
        vfs.grep_with("clausula", None, None, GrepOutput::Content, None).await.unwrap(),
        "/skills/compraventa/disclosure_clausulas.md:\n  2: La clausula penal.\n  3: Otra clausula.\n\
         /ticket/a.txt:\n  1: ticket: clausula del cliente"
    );
    assert_eq!(
        vfs.grep_with("clausula", None, None, GrepOutput::Count, None).await.unwrap(),
        "/skills/compraventa/disclosure_clausulas.md: 2\n/ticket/a.txt: 1"
    );
    assert_eq!(
        vfs.grep_with("# ", Some("/skills"), Some("*.md"), GrepOutput::Content, None).await.unwrap(),
        "/skills/compraventa/SKILL.md:\n  4: # Compraventa\n/skills/compraventa/disclosure_clausulas.md:\n  1: # Clausulas"
    );
    assert_eq!(vfs.grep("clausula", Some("/ticket/a.txt"), None).await.unwrap(), "/ticket/a.txt");
    assert_eq!(vfs.grep("clausula", None, Some("resources/*")).await.unwrap(), "No matches found");
    assert_eq!(vfs.grep("x", Some("/nada"), None).await.unwrap(), "No matches found");
    assert_eq!(
        text(vfs.grep("x", None, Some("../*")).await),
        "Error: Path traversal not allowed in glob pattern '../*'"
    );

    // Regex metacharacters are ordinary characters.
    vfs.write_file("/workspace/ley.md", "Ver art. 1.2(b) del contrato\nart 1.2 b\nart. 102(b)\n").await.unwrap();
    assert_eq!(
        vfs.grep_with("art. 1.2(b)", None, None, GrepOutput::Content, None).await.unwrap(),
        "/workspace/ley.md:\n  1: Ver art. 1.2(b) del contrato"
    );
    assert_eq!(vfs.grep("(", Some("/workspace"), None).await.unwrap(), "/workspace/ley.md");
    let hinted = vfs.grep("art|ley", None, None).await.unwrap();
    assert!(hinted.starts_with("No matches found\n\nNote: grep matches literal text, not regex"), "{hinted}");
    assert_eq!(vfs.grep("sin coincidencias", None, None).await.unwrap(), "No matches found");

    let many = "coincide\n".repeat(MAX_GREP_MATCHES + 5);
    vfs.write_file("/workspace/muchas.txt", &many).await.unwrap();
    let out = vfs.grep_with("coincide", Some("/workspace"), None, GrepOutput::Content, None).await.unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), MAX_GREP_MATCHES + 3, "a header, the matches, a blank line and the note");
    assert_eq!(lines[..2], ["/workspace/muchas.txt:", "  1: coincide"]);
    assert!(lines[MAX_GREP_MATCHES + 2].starts_with("Note: the search stopped early"));
    let two = vfs.grep_with("coincide", None, None, GrepOutput::Count, Some(2)).await.unwrap();
    assert!(two.starts_with("/workspace/muchas.txt: 2\n\nNote: the search stopped early"), "{two}");
    assert!(text(vfs.grep_with("x", None, None, GrepOutput::Count, Some(0)).await).contains("greater than 0"));

    // Long results are cut to the output bound, as deepagents cuts them.
    let wide = format!("{}\n", "coincide ".repeat(1000)).repeat(20);
    vfs.write_file("/workspace/ancha.txt", &wide).await.unwrap();
    let out = vfs.grep_with("coincide", Some("/workspace/ancha.txt"), None, GrepOutput::Content, None).await.unwrap();
    assert!(out.len() <= MAX_OUTPUT_BYTES && out.ends_with(render::TRUNCATION_GUIDANCE), "{}", out.len());
}

#[tokio::test]
async fn duplicate_short_names_first_mounted_wins() {
    let store = seeded();
    let mut vfs = mounted(&store);
    vfs.mount_skill(skill("contratos/compraventa"));
    vfs.mount_skill(skill("escrituras/hipoteca"));
    assert_eq!(vfs.loaded_skills().len(), 3);
    assert_eq!(vfs.ls("/skills").await.unwrap(), "['/skills/compraventa/', '/skills/hipoteca/']");
    assert!(vfs.read_file("/skills/compraventa/SKILL.md", 0, 10).await.unwrap().contains("name: compraventa"));
    assert_eq!(vfs.skill_dir(&skill("escrituras/compraventa")).as_deref(), Some("/skills/compraventa"));
    assert_eq!(vfs.skill_dir(&skill("contratos/compraventa")), None);
    assert_eq!(vfs.skill_dir(&skill("escrituras/otra")), None);
    assert_eq!(
        vfs.read_file("/skills/hipoteca/SKILL.md", 0, 1).await.unwrap(),
        "@@ lines 1-1 of 2 | next offset 1 @@\n# Hipoteca"
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
    assert_eq!(text(vfs.glob("*", None).await), expected);
    assert_eq!(text(vfs.write_file("/workspace/a.md", "x").await), expected);
    assert!(vfs.workspace().is_empty());
}

#[tokio::test]
async fn run_file_tool_reads_arguments_as_deepagents_does() {
    let store = seeded();
    let mut vfs = mounted(&store);
    let names: Vec<String> = file_tool_specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, FILE_TOOL_NAMES);
    for spec in file_tool_specs() {
        assert_eq!(spec.parameters["type"], "object");
        assert!(spec.parameters["required"].as_array().is_some_and(|r| !r.is_empty()), "{}", spec.name);
    }
    let specs = file_tool_specs();
    let read_spec = specs.iter().find(|s| s.name == "read_file").unwrap();
    assert!(read_spec.description.contains("offset") && read_spec.description.contains("next offset"));
    assert_eq!(read_spec.parameters["properties"]["limit"]["default"], DEFAULT_READ_LIMIT);

    let mut run = async |name: &str, args: serde_json::Value| run_file_tool(&mut vfs, name, &args).await.unwrap();
    assert_eq!(run_file_tool(&mut mounted(&store), "load_skill", &json!({})).await, None);
    assert_eq!(
        run("read_file", json!({})).await,
        "Error: missing required argument 'file_path' (a string) for read_file"
    );
    assert_eq!(
        run("read_file", json!({"file_path": 3})).await,
        "Error: argument 'file_path' of read_file must be a string, got a number"
    );
    // Numbers may come as numeric strings, as pydantic reads them; anything else is refused.
    assert_eq!(
        run("read_file", json!({"file_path": "/ticket/a.txt", "offset": "1"})).await,
        "@@ lines 2-2 of 2 @@\nsegunda"
    );
    assert_eq!(
        run("read_file", json!({"file_path": "/ticket/a.txt", "offset": "uno"})).await,
        "Error: argument 'offset' of read_file must be an integer, got a string"
    );
    assert_eq!(
        run("read_file", json!({"file_path": "/ticket/a.txt", "offset": 1.5})).await,
        "Error: argument 'offset' of read_file must be an integer, got a number"
    );
    assert!(run("read_file", json!({"file_path": "/ticket/a.txt", "limit": -1}))
        .await
        .starts_with("System reminder: no lines were read because `limit` was -1."));
    assert_eq!(
        run("read_file", json!({"file_path": "/ticket/a.txt", "offset": 1.0, "limit": null})).await,
        "@@ lines 2-2 of 2 @@\nsegunda"
    );
    assert_eq!(
        run("read_file", json!("{\"file_path\": \"/ticket/a.txt\", \"limit\": \" +1 \"}")).await,
        "@@ lines 1-1 of 2 | next offset 1 @@\nticket: clausula del cliente"
    );
    assert_eq!(
        run("ls", json!("{not json")).await,
        "Error: the arguments of ls are not valid JSON: send a JSON object"
    );
    assert_eq!(run("ls", json!([1])).await, "Error: the arguments of ls must be a JSON object, got an array");
    assert_eq!(run("ls", json!({"path": "/"})).await, "['/memories/', '/skills/', '/ticket/', '/workspace/']");
    assert_eq!(
        run("write_file", json!({"file_path": "/workspace/a.md"})).await,
        "Error: missing required argument 'content' (a string) for write_file"
    );
    assert_eq!(
        run("write_file", json!({"file_path": "/workspace/a.md", "content": "hola hola"})).await,
        "Updated file /workspace/a.md"
    );
    let edit = |replace_all: serde_json::Value| json!({"file_path": "/workspace/a.md", "old_string": "hola", "new_string": "adios", "replace_all": replace_all});
    assert_eq!(
        run("edit_file", edit(json!("maybe"))).await,
        "Error: argument 'replace_all' of edit_file must be a boolean (true or false), got a string"
    );
    assert_eq!(
        run("edit_file", edit(json!(2))).await,
        "Error: argument 'replace_all' of edit_file must be a boolean (true or false), got a number"
    );
    assert_eq!(
        run("edit_file", edit(json!("Yes"))).await,
        "Successfully replaced 2 instance(s) of the string in '/workspace/a.md'"
    );
    assert_eq!(run("glob", json!({"pattern": "*.md", "path": "/workspace"})).await, "['/workspace/a.md']");
    assert_eq!(
        run("glob", json!({"pattern": "*.md", "path": 1})).await,
        "Error: argument 'path' of glob must be a string, got a number"
    );
    assert_eq!(run("grep", json!({"pattern": "adios", "glob": "*.md"})).await, "/workspace/a.md");
    assert_eq!(
        run("grep", json!({"pattern": "adios", "output_mode": "content", "path": null})).await,
        "/workspace/a.md:\n  1: adios adios"
    );
    assert_eq!(
        run("grep", json!({"pattern": "d", "output_mode": "count", "max_count": "1"})).await,
        format!("/skills/compraventa/SKILL.md: 1\n\n{GREP_TRUNCATION_NOTE}")
    );
    // A line counts once, however often it holds the pattern.
    assert_eq!(run("grep", json!({"pattern": "adios", "output_mode": "count"})).await, "/workspace/a.md: 1");
    assert_eq!(
        run("grep", json!({"pattern": "adios", "output_mode": "lines"})).await,
        "Error: argument 'output_mode' of grep must be 'files_with_matches', 'content' or 'count'"
    );
    assert_eq!(
        run("grep", json!({"pattern": "adios", "max_count": 0})).await,
        "Error: argument 'max_count' of grep must be greater than 0"
    );
    assert_eq!(run("grep", json!({"pattern": "("})).await, "No matches found");
    assert_eq!(
        run("grep", json!({"path": "/"})).await,
        "Error: missing required argument 'pattern' (a string) for grep"
    );
    assert_eq!(vfs.workspace().len(), 1);
}

#[tokio::test]
async fn hostile_patterns_and_paths_are_error_results_never_panics() {
    let store = seeded();
    let vfs = mounted(&store);
    let huge = "a".repeat(450 * 1024);
    let nested_groups = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
    let nested_alternation = format!("{}a{}", "{a,".repeat(200), "}".repeat(200));
    let many_globstars = "**/".repeat(10_000) + "*";
    let classes = "[\u{0}-\u{10FFFF}]".repeat(100);
    let wide_alternation = "{a,b}".repeat(12);
    for pattern in [&huge, &nested_alternation, &many_globstars, &classes, &wide_alternation, &"\0".to_owned()] {
        let result = text(vfs.glob(pattern, None).await);
        let filtered = text(vfs.grep("clausula", None, Some(pattern)).await);
        if pattern.len() > MAX_GLOB_PATTERN_BYTES {
            assert!(result.starts_with("Error: Invalid glob pattern"), "{}", pattern.len());
            assert!(filtered.starts_with("Error: Invalid glob pattern"));
        }
    }
    assert!(text(vfs.glob(&wide_alternation, None).await).contains("more than 1000 patterns"));
    for pattern in [&huge, &nested_groups] {
        let result = text(vfs.grep(pattern, None, None).await);
        assert!(result.starts_with("Error: argument 'pattern' of grep is longer than 4096 bytes"), "{result}");
    }
    // What used to be hostile regular expressions are ordinary literal text now.
    for pattern in ["(a*)*b".repeat(500), "\\p{L}{1000}{1000}".to_owned()] {
        let result = text(vfs.grep(&pattern, None, None).await);
        assert!(result.starts_with("No matches found"), "{result}");
    }
    let nested = text(vfs.glob(&nested_alternation, None).await);
    assert!(nested.starts_with("Error: Invalid glob pattern: alternatives nest deeper"), "{nested}");
    let long_path = format!("/workspace/{}", "a".repeat(64 * 1024));
    assert!(text(vfs.read_file(&long_path, 0, 10).await).starts_with("Error: Invalid path"));
    assert!(text(vfs.glob("*", Some(&long_path)).await).starts_with("Error: Invalid path"));
    assert!(text(vfs.read_window("/ticket/a.txt", i64::MIN, i64::MAX).await).contains("@@ lines 1-2 of 2 @@"));
    assert!(text(vfs.read_window("/ticket/a.txt", i64::MAX, i64::MIN).await).starts_with("System reminder"));
    assert!(text(vfs.read_window("/ticket/a.txt", i64::MAX, 1).await).starts_with("Error: Line offset"));
}

#[tokio::test]
async fn the_workspace_quota_is_enforced_where_the_model_writes_and_delete_makes_room() {
    let store = seeded();
    let mut vfs = vfs(&store);
    for i in 0..MAX_WORKSPACE_FILES {
        vfs.write_file(&format!("/workspace/f{i}.txt"), &format!("file {i}")).await.unwrap();
    }
    let full = text(vfs.write_file("/workspace/one-more.txt", "x").await);
    assert!(full.starts_with("Error: /workspace already holds 100 files") && full.contains("delete"), "{full}");
    // A full workspace still lets a file be rewritten.
    assert_eq!(vfs.write_file("/workspace/f1.txt", "otra").await.unwrap(), "Updated file /workspace/f1.txt");
    assert_eq!(vfs.delete("/workspace/f0.txt").await.unwrap(), "Deleted /workspace/f0.txt");
    assert_eq!(text(vfs.delete("/workspace/f0.txt").await), "Error: File '/workspace/f0.txt' not found");
    assert!(text(vfs.delete("/skills/compraventa/SKILL.md").await).starts_with("Error: Path is read-only"));
    assert!(text(vfs.delete("/workspace").await).starts_with("Error: Is a directory"), "the root stays");
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
    // An edit that shrinks a file makes room; growing the workspace past the limit is refused,
    // whether by an edit or by writing over a file.
    vfs.edit_file("/workspace/big0.txt", "000", "0", false).await.unwrap();
    vfs.write_file("/workspace/two.txt", "ab").await.unwrap();
    let grown = text(vfs.edit_file("/workspace/two.txt", "ab", "abc", false).await);
    assert!(grown.starts_with("Error: /workspace would hold"), "{grown}");
    let rewritten = text(vfs.write_file("/workspace/two.txt", "abc").await);
    assert!(rewritten.starts_with("Error: /workspace would hold"), "{rewritten}");
    assert_eq!(vfs.write_file("/workspace/two.txt", "c").await.unwrap(), "Updated file /workspace/two.txt");
    let long = format!("/workspace/{}", "p".repeat(MAX_WORKSPACE_PATH_BYTES + 1));
    assert!(text(vfs_empty(&store).write_file(&long, "x").await).starts_with("Error: Invalid path"));
}

fn vfs_empty(store: &MemStore) -> Vfs<'_> {
    Vfs::new(store, user(), session(), None, BTreeMap::new())
}
