//! `glob` and `grep` over the visible roots.

use super::*;

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
