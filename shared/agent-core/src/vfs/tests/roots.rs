//! The roots and the tenant walls: what `ls` shows before and after a mount, skills read only when
//! mounted, escapes that never reach another tenant, read-only `/ticket` and `/skills`, and storage
//! failures that name no backend detail.

use super::*;

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
         (read_file shows images and PDFs; other kinds need a command): /skills/compraventa/resources/plantilla.pdf (32 bytes)"
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
    // A write is held until the turn saves it; the save's failure fails the turn (its commit).
    vfs.write_file("/workspace/a.md", "x").await.unwrap();
    let failed = vfs.save_workspace().await.unwrap_err();
    assert!(matches!(failed, StoreError::Backend(_)), "{failed:?}");
}
