//! `run_file_tool`: arguments read as deepagents reads them, and hostile patterns and paths that
//! are error results, never panics.

use super::*;
use serde_json::json;

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
