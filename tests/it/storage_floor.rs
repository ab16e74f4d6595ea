//! A turn's storage requests at their floor, through the compiled `http-turn` against moto: a warm
//! turn reads its session once (the meta item and the recent turns in one Query), revalidates the
//! catalog index once, commits once, and does the workload's own file operations; loading a skill
//! lists nothing (its files come from the index entry), and a skill file a warm process has read is
//! read again only when the index names another ETag for it. A session stored in the older layout (the
//! meta item at `sk = META`) still loads and commits, and moves to the new layout on that commit.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{status_and_body, tool_results, turn_event, Stack};
use serde_json::{json, Value};

const USER: &str = "user-floor";

async fn turn(function: &Function, session: &str, message: &str) -> (u16, Value) {
    status_and_body(&function.call(turn_event(Some(USER), session, json!({ "message": message }))).await)
}

fn ops(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(operation, count)| (operation.to_string(), *count)).collect()
}

/// A plain skill with a file besides its SKILL.md, and a skill in a category with a nested file.
async fn upload_skills(stack: &Stack) {
    stack
        .put(
            &format!("{USER}/skills/pdf/SKILL.md"),
            "---\nname: pdf\ndescription: Fill PDF forms.\n---\n\n# pdf\n\nRead reference.md first.\n",
        )
        .await;
    stack.put(&format!("{USER}/skills/pdf/reference.md"), "The reference of the pdf skill.\n").await;
    stack
        .put(
            &format!("{USER}/skills/docs/memo/SKILL.md"),
            "---\nname: memo\ndescription: Write memos.\n---\n\n# memo\n\nSee examples/one.md.\n",
        )
        .await;
    stack.put(&format!("{USER}/skills/docs/memo/examples/one.md"), "An example memo.\n").await;
}

/// Loads the pdf skill, reads its file, answers.
fn pdf_turn() -> [Reply; 3] {
    [
        Reply::tool("load_skill", json!({"skill_path": "pdf"})),
        Reply::tool("read_file", json!({"file_path": "/skills/pdf/reference.md"})),
        Reply::text("done"),
    ]
}

#[tokio::test]
async fn a_warm_turn_reads_its_session_once_and_loading_a_skill_lists_nothing() {
    let stack = Stack::new().await;
    upload_skills(&stack).await;
    let http = stack.http(&[]).await;
    // The first turn of the tenant builds the index (a listing of skills/ and one of agents/), which
    // is not measured.
    stack.model.push([Reply::text("hello")]);
    assert_eq!(turn(&http, "warmup", "hola").await.0, 200);

    // A new process: its first turn of a new session is cold (the index and the SKILL.md are read).
    let http = stack.http(&[]).await;
    stack.model.push(pdf_turn());
    let mark = http.log_mark();
    let (status, body) = turn(&http, "s1", "Fill the form").await;
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    assert!(tool_results(requests.last().unwrap()).last().unwrap().contains("The reference of the pdf skill."));
    let cold = http.storage_requests_since(mark).await;
    assert_eq!(
        cold,
        ops(&[("DynamoDB.Query", 1), ("DynamoDB.TransactWriteItems", 1), ("S3.GetObject", 3)]),
        "a new session is one Query; the index, the SKILL.md and the file are one GET each; no listing"
    );

    // The same session again in the warm process: one Query, one commit and the index's conditional
    // GET (304); the SKILL.md and the file are kept under the ETags the index names for them.
    stack.model.push(pdf_turn());
    let mark = http.log_mark();
    let (status, body) = turn(&http, "s1", "Fill another form").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], 2, "{body}");
    let requests = stack.model.requests();
    assert!(tool_results(requests.last().unwrap()).last().unwrap().contains("The reference of the pdf skill."));
    let warm = http.storage_requests_since(mark).await;
    assert_eq!(warm, ops(&[("DynamoDB.Query", 1), ("DynamoDB.TransactWriteItems", 1), ("S3.GetObject", 1)]));

    // Another tenant's skill at the same path is its own file: the kept one is not served to it.
    let other = "user-floor-other";
    stack
        .put(&format!("{other}/skills/pdf/SKILL.md"), "---\nname: pdf\ndescription: Other PDFs.\n---\n\n# pdf\n")
        .await;
    stack.put(&format!("{other}/skills/pdf/reference.md"), "The other tenant's reference.\n").await;
    stack.model.push(pdf_turn());
    let event = turn_event(Some(other), "s1", json!({ "message": "Fill the form" }));
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");
    let result = tool_results(stack.model.requests().last().unwrap()).last().unwrap().clone();
    assert!(result.contains("The other tenant's reference.") && !result.contains("pdf skill"), "{result}");

    // A file written then edited in one turn is put once, when the turn commits, and reads back.
    stack.model.push([
        Reply::tool("write_file", json!({"file_path": "/workspace/form.md", "content": "total: 10\n"})),
        Reply::tool("edit_file", json!({"file_path": "/workspace/form.md", "old_string": "10", "new_string": "12"})),
        Reply::text("done"),
    ]);
    let mark = http.log_mark();
    let (status, body) = turn(&http, "s1", "Write the form").await;
    assert_eq!(status, 200, "{body}");
    let requests = http.storage_requests_since(mark).await;
    assert_eq!(requests.get("S3.PutObject"), Some(&1), "{requests:?}");
    stack.model.push([Reply::tool("read_file", json!({"file_path": "/workspace/form.md"})), Reply::text("done")]);
    let fresh = stack.http(&[]).await;
    let (status, body) = turn(&fresh, "s1", "Read the form").await;
    assert_eq!(status, 200, "{body}");
    let result = tool_results(stack.model.requests().last().unwrap()).last().unwrap().clone();
    assert!(result.contains("total: 12"), "a new process reads the committed blob: {result}");

    // A skill in a category, with its file one folder down: ls and read_file see it without a listing.
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "docs/memo"})),
        Reply::tool("ls", json!({"path": "/skills/memo/examples"})),
        Reply::tool("read_file", json!({"file_path": "/skills/memo/examples/one.md"})),
        Reply::text("done"),
    ]);
    let mark = http.log_mark();
    let (status, body) = turn(&http, "s1", "A memo").await;
    assert_eq!(status, 200, "{body}");
    let results = tool_results(stack.model.requests().last().unwrap());
    assert!(results.iter().any(|result| result.contains("/skills/memo/examples/one.md")), "{results:?}");
    assert!(results.last().unwrap().contains("An example memo."), "{results:?}");
    let requests = http.storage_requests_since(mark).await;
    assert_eq!(requests.get("S3.ListObjectsV2"), None, "{requests:?}");
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

#[tokio::test]
async fn a_session_stored_in_the_old_layout_loads_commits_and_moves_to_the_new_one() {
    let stack = Stack::new().await;
    upload_skills(&stack).await;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let created = now - 3_600;
    let pk = format!("{USER}#old");
    // What the previous release wrote: the meta item at `sk = META` and two turn items.
    let put = |item: HashMap<String, AttributeValue>| {
        stack.dynamodb.put_item().table_name(&stack.table).set_item(Some(item)).send()
    };
    put(HashMap::from([
        ("pk".to_owned(), s(&pk)),
        ("sk".to_owned(), s("META")),
        ("user_id".to_owned(), s(USER)),
        ("session_id".to_owned(), s("old")),
        ("version".to_owned(), n(2)),
        ("current_skill".to_owned(), AttributeValue::Null(true)),
        ("loaded_skills".to_owned(), AttributeValue::L(vec![])),
        ("plan".to_owned(), AttributeValue::Null(true)),
        ("workspace".to_owned(), AttributeValue::M(HashMap::new())),
        ("todos".to_owned(), AttributeValue::L(vec![])),
        ("summary".to_owned(), AttributeValue::Null(true)),
        ("created_at".to_owned(), n(created)),
        ("updated_at".to_owned(), n(created)),
        ("expires_at".to_owned(), n(now + 86_400)),
        ("commit_token".to_owned(), s("old-token")),
    ]))
    .await
    .expect("put the old meta item");
    for (turn, question, answer) in [(1, "first question", "first answer"), (2, "second question", "second answer")] {
        let messages = json!([{"role": "user", "content": question}, {"role": "assistant", "content": answer}]);
        put(HashMap::from([
            ("pk".to_owned(), s(&pk)),
            ("sk".to_owned(), s(&format!("TURN#{turn:010}"))),
            ("messages".to_owned(), s(&messages.to_string())),
            ("message_offset".to_owned(), n(2 * (turn - 1))),
            ("created_at".to_owned(), n(created)),
            ("expires_at".to_owned(), n(now + 86_400)),
        ]))
        .await
        .expect("put an old turn item");
    }

    let http = stack.http(&[]).await;
    stack.model.push([Reply::text("third answer"), Reply::text("fourth answer")]);
    let (status, body) = turn(&http, "old", "third question").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], 3, "{body}");
    let request = stack.model.requests().last().unwrap().to_string();
    for earlier in ["first question", "second answer"] {
        assert!(request.contains(earlier), "the model saw the stored history: {request}");
    }

    // The commit moved the meta item: the old one is gone, the new one keeps the session's creation time.
    let items = stack
        .dynamodb
        .query()
        .table_name(&stack.table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s(&pk))
        .consistent_read(true)
        .send()
        .await
        .expect("query")
        .items
        .unwrap_or_default();
    let keys: Vec<&str> = items.iter().map(|item| item["sk"].as_s().unwrap().as_str()).collect();
    assert!(!keys.contains(&"META"), "{keys:?}");
    let meta = items.iter().find(|item| item["sk"] == s(aws_store::META_SORT_KEY)).expect("the new meta item");
    assert_eq!(meta["version"], n(3));
    assert_eq!(meta["created_at"], n(created));

    // From then on a turn reads the session with one Query.
    let mark = http.log_mark();
    let (status, body) = turn(&http, "old", "fourth question").await;
    assert_eq!((status, &body["version"]), (200, &json!(4)), "{body}");
    let request = stack.model.requests().last().unwrap().to_string();
    assert!(request.contains("first question") && request.contains("third answer"), "{request}");
    let requests = http.storage_requests_since(mark).await;
    assert_eq!(requests.get("DynamoDB.Query"), Some(&1), "{requests:?}");
    assert_eq!(requests.get("DynamoDB.GetItem"), None, "{requests:?}");
}

#[tokio::test]
async fn skills_index_keeps_each_skills_file_list_as_its_files_come_and_go() {
    let stack = Stack::new().await;
    upload_skills(&stack).await;
    let indexer = stack.skills_index(&[]).await;
    let run = |event: Value| async {
        match indexer.invoke_with_budget(event, std::time::Duration::from_secs(60)).await {
            local_stack::lambda::Invocation::Response(value) => value,
            other => panic!("skills-index failed: {other:?}"),
        }
    };
    run(json!({"rebuild": {"user_id": USER}})).await;
    // The catalog is small enough to be held whole in the index's head; each file is kept with its
    // size, and its ETag apart (which builds before the ETags ignore).
    let files = |index: &Value, skill: &str| index["inline"]["files"][skill].clone();
    let index = index_json(&stack).await;
    assert_eq!(files(&index, "pdf"), json!([["reference.md", 32]]), "{index}");
    assert_eq!(files(&index, "docs/memo"), json!([["examples/one.md", 17]]), "{index}");
    let reference = format!("{USER}/skills/pdf/reference.md");
    let head = stack.s3.head_object().bucket(&stack.bucket).key(&reference).send().await.unwrap();
    let etag = head.e_tag().map(|etag| etag.trim_matches('"'));
    assert_eq!(index["inline"]["etags"]["pdf"][0].as_str(), etag, "{index}");

    // A file added to a skill, then one removed: each event updates that skill's list only.
    let added = format!("{USER}/skills/pdf/forms/guide.md");
    stack.put(&added, "How to fill forms.\n").await;
    // The template delivers these as EventBridge events (S3 notifications cannot match every file
    // under `*/skills/`); the removal comes as a notification, which the function also takes.
    let summary = run(stack.bridge_event(&added, true)).await;
    assert_eq!(summary["updated"], 1, "{summary}");
    let index = index_json(&stack).await;
    assert_eq!(files(&index, "pdf"), json!([["forms/guide.md", 19], ["reference.md", 32]]), "{index}");
    let removed = format!("{USER}/skills/pdf/reference.md");
    stack.delete(&removed).await;
    run(stack.s3_event(&[&removed], false)).await;
    let index = index_json(&stack).await;
    assert_eq!(files(&index, "pdf"), json!([["forms/guide.md", 19]]), "{index}");
    assert_eq!(files(&index, "docs/memo"), json!([["examples/one.md", 17]]), "{index}");

    // A turn sees the skill's files as the index has them, with no listing.
    let http = stack.http(&[]).await;
    stack.model.push([
        Reply::tool("load_skill", json!({"skill_path": "pdf"})),
        Reply::tool("ls", json!({"path": "/skills/pdf"})),
        Reply::tool("read_file", json!({"file_path": "/skills/pdf/forms/guide.md"})),
        Reply::text("done"),
    ]);
    let mark = http.log_mark();
    let (status, body) = turn(&http, "s1", "forms").await;
    assert_eq!(status, 200, "{body}");
    let results = tool_results(stack.model.requests().last().unwrap());
    assert!(results[1].contains("/skills/pdf/forms") && !results[1].contains("reference.md"), "{results:?}");
    assert!(results[2].contains("How to fill forms."), "{results:?}");
    let requests = http.storage_requests_since(mark).await;
    assert_eq!(requests.get("S3.ListObjectsV2"), None, "{requests:?}");

    // The file changed: once the index names its new ETag, the warm process reads it again, once.
    stack.put(&added, "How to fill forms, second edition.\n").await;
    run(stack.bridge_event(&added, true)).await;
    let read_guide = || {
        [
            Reply::tool("load_skill", json!({"skill_path": "pdf"})),
            Reply::tool("read_file", json!({"file_path": "/skills/pdf/forms/guide.md"})),
            Reply::text("done"),
        ]
    };
    for (round, gets) in [(1, 2), (2, 1)] {
        stack.model.push(read_guide());
        let mark = http.log_mark();
        let (status, body) = turn(&http, "s1", "forms again").await;
        assert_eq!(status, 200, "{body}");
        let result = tool_results(stack.model.requests().last().unwrap()).last().unwrap().clone();
        assert!(result.contains("second edition"), "round {round}: {result}");
        let requests = http.storage_requests_since(mark).await;
        assert_eq!(requests.get("S3.GetObject"), Some(&gets), "round {round}: the index, then the file: {requests:?}");
    }
}

async fn index_json(stack: &Stack) -> Value {
    let bytes = stack.get(&format!("{USER}/catalog/index.json")).await.expect("the index exists");
    serde_json::from_slice(&bytes).expect("the index is JSON")
}
