//! Reading and writing files: binary files reported, reads paged under a status header, the
//! workspace's write, overwrite, edit and manifest, and its quota.

use super::*;
use crate::sandbox::{SandboxFile, WorkspaceChanges};
use crate::vfs::storage::sha256_hex;

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
    assert_eq!(store.bytes(&blob), None, "a blob is held until the turn saves its workspace");
    assert_eq!(vfs.read_file("/workspace/notes/a.md", 0, 10).await.unwrap(), "@@ lines 1-3 of 3 @@\nuno\ndos\ndos");
    assert!(!store.recorded().contains(&format!("get {blob}")), "read of a blob written this turn hits the cache");
    assert_eq!(vfs.ls("/workspace").await.unwrap(), "['/workspace/notes/']");
    assert_eq!(vfs.ls("/workspace/notes").await.unwrap(), "['/workspace/notes/a.md']");

    // Same content elsewhere: one blob for both.
    vfs.write_file("/workspace/b.md", content).await.unwrap();

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

    // Saving puts each blob the manifest names once, and none of the replaced or deleted files'.
    assert!(!store.recorded().iter().any(|c| c.starts_with("put ")), "nothing is put before the save");
    assert_eq!(vfs.save_workspace().await.unwrap(), 2);
    let new_sha = sha256_hex(b"1\n2\n2\n");
    let mut puts: Vec<String> = store.recorded().into_iter().filter(|c| c.starts_with("put ")).collect();
    puts.sort();
    let mut expected = vec![format!("put {blob}"), format!("put u1/workspaces/S1/blobs/{new_sha}")];
    expected.sort();
    assert_eq!(puts, expected);
    assert_eq!(store.bytes(&blob).as_deref(), Some(content.as_bytes()));

    // The next turn sees the committed manifest, reading blobs from the store.
    let manifest = vfs.into_workspace();
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
async fn a_file_written_then_edited_is_put_once_and_rewrites_hold_bounded_bytes() {
    let store = seeded();
    let mut vfs = vfs(&store);
    vfs.write_file("/workspace/report.md", "draft: total 10\n").await.unwrap();
    vfs.edit_file("/workspace/report.md", "10", "12", false).await.unwrap();
    assert_eq!(vfs.save_workspace().await.unwrap(), 1);
    let puts: Vec<String> = store.recorded().into_iter().filter(|c| c.starts_with("put ")).collect();
    let final_sha = sha256_hex(b"draft: total 12\n");
    assert_eq!(puts, vec![format!("put u1/workspaces/S1/blobs/{final_sha}")]);

    // A file rewritten many times: the held blobs no file names are dropped past the bound.
    let mut vfs = vfs_empty(&store);
    for round in 0..200 {
        let content = format!("{round:08}").repeat(MAX_FILE_BYTES / 8);
        vfs.write_file("/workspace/big.txt", &content).await.unwrap();
        assert!(vfs.unsaved_bytes <= 2 * MAX_WORKSPACE_BYTES + MAX_FILE_BYTES as u64, "{}", vfs.unsaved_bytes);
    }
    let last = format!("{:08}", 199).repeat(MAX_FILE_BYTES / 8);
    assert!(vfs.read_file("/workspace/big.txt", 0, 1).await.unwrap().contains("0000019900000199"));
    assert_eq!(vfs.save_workspace().await.unwrap(), 1);
    let last_sha = sha256_hex(last.as_bytes());
    assert_eq!(store.bytes(&format!("u1/workspaces/S1/blobs/{last_sha}")).as_deref(), Some(last.as_bytes()));
}

#[tokio::test]
async fn files_a_command_brings_back_past_the_held_bytes_bound_are_all_saved() {
    let store = seeded();
    let mut vfs = vfs_empty(&store);
    // Rewrites leave held blobs that no file names, just under the bound.
    for round in 0..79 {
        vfs.write_file("/workspace/big.txt", &format!("{round:08}").repeat(MAX_FILE_BYTES / 8)).await.unwrap();
    }
    // A command's files cross it while they are stored: none of them is dropped.
    let written: Vec<SandboxFile> = (0..3)
        .map(|i| SandboxFile { path: format!("out/{i}.bin"), bytes: Arc::new(vec![i as u8; 200 * 1024]) })
        .collect();
    let changes = WorkspaceChanges { written, deleted: Vec::new(), not_kept: Vec::new() };
    vfs.apply_sandbox_changes(&changes).await.unwrap();
    assert!(vfs.unsaved_bytes <= 2 * MAX_WORKSPACE_BYTES, "{}", vfs.unsaved_bytes);
    assert_eq!(vfs.save_workspace().await.unwrap(), 4);
    for (path, file) in vfs.workspace() {
        let key = format!("u1/workspaces/S1/blobs/{}", file.sha256);
        assert_eq!(store.bytes(&key).map(|bytes| bytes.len() as u64), Some(file.size), "{path}");
    }
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
