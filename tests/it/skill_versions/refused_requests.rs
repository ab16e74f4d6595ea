//! Requests refused whatever the zip: another tenant's skill (404 to every route, and an upload to
//! the same path is a skill of its own), skill paths that are no skill path, versions that do not
//! exist, bad promote bodies and a caller without identity.

use local_stack::model_server::Reply;
use local_stack::stack::{system_of, Stack};
use serde_json::{json, Value};

use super::{
    call, delete, event, get, poderes, promote, text, turn, upload, upload_event, versions, with_json, zip_of, OWNER,
    SKILL, STRANGER,
};

/// The version numbers and default `GET /skills/{skill}/versions` answers for `user`.
async fn state(http: &local_stack::lambda::Function, user: &str) -> (Vec<u64>, Value) {
    let listed = versions(http, user, SKILL).await;
    assert_eq!(listed.status, 200, "{}", text(&listed));
    let body = listed.json();
    let numbers = body["versions"].as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect();
    (numbers, body["default"].clone())
}

#[tokio::test]
async fn another_tenants_skill_is_not_found_and_the_same_path_is_a_skill_of_its_own() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    for body in ["DEL-DUENO-1", "DEL-DUENO-2"] {
        let zip = zip_of(&[("SKILL.md", poderes(body).as_bytes()), ("privado.md", body.as_bytes())]);
        assert_eq!(upload(&http, OWNER, SKILL, &zip, None).await.status, 201);
    }

    // Nothing of the owner's skill exists for the stranger: not to read, promote or delete.
    for path in
        ["/versions", "/versions/1", "/versions/1/files/SKILL.md", "/versions/2/files/privado.md", "/versions/1/zip"]
    {
        let answer = get(&http, STRANGER, SKILL, path).await;
        assert_eq!((answer.status, answer.code().as_str()), (404, "not_found"), "{path}: {}", text(&answer));
        assert!(!String::from_utf8_lossy(&answer.bytes).contains("DEL-DUENO"), "{}", text(&answer));
    }
    let promoted = promote(&http, STRANGER, SKILL, 2).await;
    assert_eq!((promoted.status, promoted.code().as_str()), (404, "not_found"), "{}", text(&promoted));
    for path in ["/versions/2", "/versions/1", ""] {
        let deleted = delete(&http, STRANGER, SKILL, path).await;
        assert_eq!((deleted.status, deleted.code().as_str()), (404, "not_found"), "{path}: {}", text(&deleted));
    }
    assert_eq!(state(&http, OWNER).await, (vec![2, 1], json!(1)), "the owner's skill is untouched");

    // The stranger's upload to the same path: its own version 1, its own default.
    let theirs = zip_of(&[("SKILL.md", poderes("DEL-OTRO-1").as_bytes())]);
    let published = upload(&http, STRANGER, SKILL, &theirs, None).await;
    assert_eq!(published.status, 201, "{}", text(&published));
    let published = published.json();
    assert_eq!(
        (published["version"].as_u64(), published["default"].as_bool(), published["created"].as_bool()),
        (Some(1), Some(true), Some(true)),
        "{published}"
    );
    assert_eq!(published["uploaded_by"], STRANGER);
    assert_eq!(state(&http, STRANGER).await, (vec![1], json!(1)));
    assert_eq!(state(&http, OWNER).await, (vec![2, 1], json!(1)));
    let mine = get(&http, OWNER, SKILL, "/versions/1/files/SKILL.md").await;
    assert!(String::from_utf8_lossy(&mine.bytes).contains("DEL-DUENO-1"), "{}", text(&mine));
    let other = get(&http, STRANGER, SKILL, "/versions/1").await.json();
    assert!(other["skill_md"].as_str().is_some_and(|md| md.contains("DEL-OTRO-1")), "{other}");
    let their_keys = stack.object_keys(&format!("{STRANGER}/")).await;
    assert!(!their_keys.is_empty() && their_keys.iter().all(|key| key.starts_with(&format!("{STRANGER}/"))));
    // The same bytes as the owner's version 1, uploaded by the stranger, are the stranger's.
    let owners_zip = zip_of(&[("SKILL.md", poderes("DEL-DUENO-1").as_bytes()), ("privado.md", b"DEL-DUENO-1")]);
    let copied = upload(&http, STRANGER, SKILL, &owners_zip, None).await;
    assert_eq!((copied.status, copied.json()["version"].as_u64()), (201, Some(2)), "{}", text(&copied));

    // Each tenant's turn loads its own.
    for (user, own, other) in [(OWNER, "DEL-DUENO-1", "DEL-OTRO-1"), (STRANGER, "DEL-OTRO-1", "DEL-DUENO")] {
        let before = stack.model.requests().len();
        stack.model.push([Reply::tool("load_skill", json!({"skill_path": SKILL})), Reply::text("Hecho.")]);
        let (status, answer) = turn(&http, user, "s1", json!({"message": "Un poder"})).await;
        assert_eq!(status, 200, "{answer}");
        let loaded = system_of(&stack.model.requests()[before + 1]);
        assert!(loaded.contains(own) && !loaded.contains(other), "{user}: {loaded}");
    }
}

#[tokio::test]
async fn bad_skill_paths_missing_versions_and_bad_bodies_are_refused() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let zip = zip_of(&[("SKILL.md", poderes("Instrucciones.").as_bytes())]);

    // Paths that are no skill path, as a client sends them: not found or refused, nothing stored.
    for raw in [
        "/skills/notaria/../poderes/versions",
        "/skills/../poderes/versions",
        "/skills/notaria/%2E%2E/versions",
        "/skills/notaria/%2e%2e%2Fpoderes/versions",
        "/skills/notaria/po%20deres/versions",
        "/skills/notaria/po%2Fderes/versions",
        "/skills/notaria/.poderes/versions",
        "/skills/notaria/pod%C3%A9res/versions",
        "/skills/a/b/c/versions",
        "/skills/a/b/c/d/e/versions",
        "/skills//versions",
    ] {
        for method in ["PUT", "GET"] {
            let mut sent = event(OWNER, method, raw, &[]);
            if method == "PUT" {
                sent = upload_event(OWNER, "x", &zip, None);
                sent["rawPath"] = json!(raw);
                sent["requestContext"]["http"]["path"] = json!(raw);
            }
            let answer = call(&http, sent).await;
            assert!(matches!(answer.status, 400 | 404), "{method} {raw}: {}", text(&answer));
        }
    }
    assert_eq!(stack.object_keys(&format!("{OWNER}/")).await, Vec::<String>::new(), "nothing stored");

    // No identity: 401 on every route.
    for (method, path) in [("PUT", "/versions"), ("GET", "/versions"), ("PUT", "/default"), ("DELETE", "")] {
        let mut sent = event(OWNER, method, &format!("/skills/{SKILL}{path}"), &[]);
        sent["requestContext"].as_object_mut().unwrap().remove("authorizer");
        let answer = call(&http, sent).await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (401, "unauthorized"),
            "{method} {path}: {}",
            text(&answer)
        );
    }

    // A skill with no versions: 404 to promote, list, read or delete.
    assert_eq!(promote(&http, OWNER, SKILL, 1).await.status, 404);
    for path in ["/versions", "/versions/1", "/versions/1/zip"] {
        assert_eq!(get(&http, OWNER, SKILL, path).await.status, 404, "{path}");
    }
    assert_eq!(delete(&http, OWNER, SKILL, "").await.status, 404);
    assert_eq!(delete(&http, OWNER, SKILL, "/versions/1").await.status, 404);

    // With one version: a promote to a version that does not exist is 404, a bad body 400, and a
    // version that is not a number never found.
    assert_eq!(upload(&http, OWNER, SKILL, &zip, None).await.status, 201);
    let missing = promote(&http, OWNER, SKILL, 9).await;
    assert_eq!((missing.status, missing.code().as_str()), (404, "not_found"), "{}", text(&missing));
    for body in [json!({}), json!({"version": "dos"}), json!({"version": -1})] {
        let sent = with_json(event(OWNER, "PUT", &format!("/skills/{SKILL}/default"), &[]), &body);
        let answer = call(&http, sent).await;
        assert_eq!(answer.status, 400, "{body}: {}", text(&answer));
    }
    for path in ["/versions/dos", "/versions/-1", "/versions/1.0", "/versions/99999999999"] {
        let answer = get(&http, OWNER, SKILL, path).await;
        assert!(matches!(answer.status, 400 | 404), "{path}: {}", text(&answer));
    }
    assert_eq!(delete(&http, OWNER, SKILL, "/versions/9").await.status, 404);
    let listed = versions(&http, OWNER, SKILL).await.json();
    assert_eq!((listed["default"].as_u64(), listed["versions"].as_array().map(Vec::len)), (Some(1), Some(1)));
}
