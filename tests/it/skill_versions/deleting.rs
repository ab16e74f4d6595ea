//! Deleting: a version that is not the default goes (and reads 404 after), the default stays while
//! others remain, and deleting the whole skill unpublishes it: gone from `GET /skills`, from the
//! bucket, and from what a turn can load.

use local_stack::model_server::Reply;
use local_stack::stack::{system_of, tool_results, Stack};
use serde_json::json;

use super::{
    delete, get, listed_skills, poderes, skill_md, stored_versions, text, turn, upload, versions, zip_of, OWNER, SKILL,
};

/// The version numbers `GET /skills/{skill}/versions` lists, newest first.
async fn numbers(http: &local_stack::lambda::Function, skill: &str) -> Vec<u64> {
    let listed = versions(http, OWNER, skill).await;
    assert_eq!(listed.status, 200, "{}", text(&listed));
    listed.json()["versions"].as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect()
}

#[tokio::test]
async fn a_version_is_deleted_unless_it_is_the_default_and_deleting_the_skill_unpublishes_it() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    for body in ["cuerpo-uno-a1", "cuerpo-dos-b2", "cuerpo-tres-c3"] {
        let zip = zip_of(&[("SKILL.md", poderes(body).as_bytes()), ("notas.md", body.as_bytes())]);
        assert_eq!(upload(&http, OWNER, SKILL, &zip, None).await.status, 201);
    }
    assert_eq!(numbers(&http, SKILL).await, [3, 2, 1]);

    // The default, with others left: 409, and it is all still there.
    let refused = delete(&http, OWNER, SKILL, "/versions/1").await;
    assert_eq!((refused.status, refused.code().as_str()), (409, "conflict"), "{}", text(&refused));
    assert_eq!(get(&http, OWNER, SKILL, "/versions/1").await.status, 200);

    // Another version: 204, then 404 wherever it was read.
    let stored_before = stored_versions(&stack, OWNER).await;
    let deleted = delete(&http, OWNER, SKILL, "/versions/2").await;
    assert_eq!(deleted.status, 204, "{}", text(&deleted));
    for path in ["/versions/2", "/versions/2/files/notas.md", "/versions/2/zip"] {
        let gone = get(&http, OWNER, SKILL, path).await;
        assert_eq!((gone.status, gone.code().as_str()), (404, "not_found"), "{path}: {}", text(&gone));
    }
    let again = delete(&http, OWNER, SKILL, "/versions/2").await;
    assert_eq!(again.status, 404, "{}", text(&again));
    assert_eq!(numbers(&http, SKILL).await, [3, 1]);
    let stored_after = stored_versions(&stack, OWNER).await;
    assert!(stored_after.len() < stored_before.len(), "its objects are gone: {stored_after:?}");
    assert!(!stored_after.iter().any(|key| key.ends_with("/@v/00000002.json")), "{stored_after:?}");
    // The others are intact, and a new upload takes a new number (never a deleted one's again).
    let third = get(&http, OWNER, SKILL, "/versions/3/files/notas.md").await;
    assert_eq!((third.status, third.bytes.as_slice()), (200, b"cuerpo-tres-c3".as_slice()));
    let zip = zip_of(&[("SKILL.md", poderes("cuatro").as_bytes())]);
    let fourth = upload(&http, OWNER, SKILL, &zip, None).await;
    assert_eq!((fourth.status, fourth.json()["version"].as_u64()), (201, Some(4)), "{}", text(&fourth));

    // The skill is served, so a turn can load it.
    stack.model.push([Reply::tool("load_skill", json!({"skill_path": SKILL})), Reply::text("Cargada.")]);
    let (status, answer) = turn(&http, OWNER, "antes", json!({"message": "Un poder"})).await;
    assert_eq!(status, 200, "{answer}");
    assert!(system_of(&stack.model.requests()[1]).contains("cuerpo-uno-a1"), "version 1 is served");

    // The whole skill: 204, then nothing of it anywhere.
    let removed = delete(&http, OWNER, SKILL, "").await;
    assert_eq!(removed.status, 204, "{}", text(&removed));
    assert!(!listed_skills(&http, OWNER).await.contains(&SKILL.to_owned()));
    let listed = versions(&http, OWNER, SKILL).await;
    assert_eq!((listed.status, listed.code().as_str()), (404, "not_found"), "{}", text(&listed));
    for path in ["/versions/1", "/versions/3/zip"] {
        assert_eq!(get(&http, OWNER, SKILL, path).await.status, 404, "{path}");
    }
    let skill_prefix = format!("{OWNER}/skill-versions/{SKILL}/");
    assert_eq!(stack.object_keys(&skill_prefix).await, Vec::<String>::new());
    let twice = delete(&http, OWNER, SKILL, "").await;
    assert_eq!((twice.status, twice.code().as_str()), (404, "not_found"), "{}", text(&twice));

    // A turn can no longer load it, nor is it offered.
    let before = stack.model.requests().len();
    stack.model.push([Reply::tool("load_skill", json!({"skill_path": SKILL})), Reply::text("No está.")]);
    let (status, answer) = turn(&http, OWNER, "despues", json!({"message": "Un poder"})).await;
    assert_eq!(status, 200, "{answer}");
    let requests = &stack.model.requests()[before..];
    assert!(!system_of(&requests[0]).contains(&format!("load_skill(\"{SKILL}\")")), "not listed");
    let results = tool_results(&requests[1]);
    assert!(results[0].contains("Skill not found"), "{results:?}");
    assert!(!requests[1].to_string().contains("cuerpo-uno-a1"), "no SKILL.md of it served");
}

#[tokio::test]
async fn the_last_version_of_a_skill_may_be_deleted_and_the_skill_is_then_unpublished() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let only = "contratos/arras";
    let zip = zip_of(&[("SKILL.md", skill_md("arras", "Contratos de arras.", "cuerpo").as_bytes())]);
    assert_eq!(upload(&http, OWNER, only, &zip, None).await.status, 201);
    assert!(listed_skills(&http, OWNER).await.contains(&only.to_owned()));

    let deleted = delete(&http, OWNER, only, "/versions/1").await;
    assert_eq!(deleted.status, 204, "{}", text(&deleted));
    assert!(!listed_skills(&http, OWNER).await.contains(&only.to_owned()), "no longer published");
    assert_eq!(versions(&http, OWNER, only).await.status, 404);
    // Published again, it starts over as a new default.
    let again = upload(&http, OWNER, only, &zip, None).await;
    assert_eq!((again.status, again.json()["default"].as_bool()), (201, Some(true)), "{}", text(&again));
    assert!(listed_skills(&http, OWNER).await.contains(&only.to_owned()));
}
