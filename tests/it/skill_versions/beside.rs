//! Skills written straight to S3 (`{user}/skills/…`, as `cargo xtask skills sync` or an operator
//! does) beside published ones: both are listed and load, a published skill is served in place of
//! a folder at its own path, and that folder serves again once the skill is deleted.

use local_stack::lambda::Function;
use local_stack::model_server::Reply;
use local_stack::stack::{system_of, Stack};
use serde_json::{json, Value};

use super::{delete, listed_skills, poderes, session, skill_md, text, turn, upload, zip_of, OWNER, SKILL};

const FOLDER_BEFORE: &str = "contratos/arrendamiento";
const FOLDER_AFTER: &str = "general/notas";

/// A turn in a session of its own whose model loads `skill`: the system prompt it then got.
async fn loaded_prompt(stack: &Stack, http: &Function, session: &str, skill: &str) -> String {
    let before = stack.model.requests().len();
    stack.model.push([Reply::tool("load_skill", json!({"skill_path": skill})), Reply::text("Hecho.")]);
    let (status, answer) = turn(http, OWNER, session, json!({"message": "Ayúdame"})).await;
    assert_eq!(status, 200, "{answer}");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), before + 2, "load, answer");
    system_of(&requests[before + 1])
}

/// The `skill_versions` the session's one turn recorded.
async fn recorded(http: &Function, id: &str) -> Value {
    session(http, OWNER, id).await["turns"][0]["skill_versions"].clone()
}

#[tokio::test]
async fn folders_written_to_s3_keep_working_beside_published_skills() {
    let stack = Stack::new().await;
    let http = stack.http(&[]).await;
    let folder_md = |name: &str, marker: &str| skill_md(name, &format!("La carpeta {name}."), marker);
    // Two folders before anything is published: one at a path of its own, one at the path the
    // published skill will take.
    stack
        .put(&format!("{OWNER}/skills/{FOLDER_BEFORE}/SKILL.md"), folder_md("arrendamiento", "CARPETA-ANTES-11"))
        .await;
    stack.put(&format!("{OWNER}/skills/{SKILL}/SKILL.md"), folder_md("poderes", "CARPETA-PODERES-22")).await;
    stack.model.push([Reply::text("Hola.")]);
    assert_eq!(turn(&http, OWNER, "primera", json!({"message": "Hola"})).await.0, 200);

    let zip = zip_of(&[("SKILL.md", poderes("PUBLICADA-UNO-33").as_bytes())]);
    let published = upload(&http, OWNER, SKILL, &zip, None).await;
    assert_eq!(published.status, 201, "{}", text(&published));

    // A folder written after the publish; S3 tells skills-index, which updates the catalog.
    let after_key = format!("{OWNER}/skills/{FOLDER_AFTER}/SKILL.md");
    stack.put(&after_key, folder_md("notas", "CARPETA-DESPUES-44")).await;
    let indexer = stack.skills_index(&[]).await;
    indexer.call(stack.s3_event(&[&after_key], true)).await;

    let listed = listed_skills(&http, OWNER).await;
    for skill in [FOLDER_BEFORE, FOLDER_AFTER, SKILL] {
        assert_eq!(listed.iter().filter(|path| *path == skill).count(), 1, "{skill} listed once: {listed:?}");
    }
    stack.model.push([Reply::text("Puedo con los tres.")]);
    assert_eq!(turn(&http, OWNER, "listado", json!({"message": "¿Qué sabes hacer?"})).await.0, 200);
    let listing = system_of(&stack.model.requests().pop().unwrap());
    for skill in [FOLDER_BEFORE, FOLDER_AFTER, SKILL] {
        assert!(listing.contains(&format!("load_skill(\"{skill}\")")), "{skill} offered: {listing}");
    }

    // Each loads; the published version is served in place of the folder at its path.
    let prompt = loaded_prompt(&stack, &http, "antes", FOLDER_BEFORE).await;
    assert!(prompt.contains("CARPETA-ANTES-11"), "{prompt}");
    let prompt = loaded_prompt(&stack, &http, "despues", FOLDER_AFTER).await;
    assert!(prompt.contains("CARPETA-DESPUES-44"), "{prompt}");
    let prompt = loaded_prompt(&stack, &http, "publicada", SKILL).await;
    assert!(prompt.contains("PUBLICADA-UNO-33") && !prompt.contains("CARPETA-PODERES-22"), "{prompt}");
    // Only the published skill has a version to record.
    assert_eq!(recorded(&http, "publicada").await, json!({SKILL: 1}));
    let folder = recorded(&http, "antes").await;
    assert!(folder.is_null() || folder == json!({}), "a folder's skill has no version: {folder}");

    // Deleting the published skill leaves the folders alone, and the one at its path serves again.
    let deleted = delete(&http, OWNER, SKILL, "").await;
    assert_eq!(deleted.status, 204, "{}", text(&deleted));
    assert!(stack.get(&format!("{OWNER}/skills/{SKILL}/SKILL.md")).await.is_some(), "the folder is not touched");
    let listed = listed_skills(&http, OWNER).await;
    for skill in [FOLDER_BEFORE, FOLDER_AFTER, SKILL] {
        assert!(listed.contains(&skill.to_owned()), "{skill} still listed: {listed:?}");
    }
    let prompt = loaded_prompt(&stack, &http, "carpeta-otra-vez", SKILL).await;
    assert!(prompt.contains("CARPETA-PODERES-22") && !prompt.contains("PUBLICADA-UNO-33"), "{prompt}");
    let prompt = loaded_prompt(&stack, &http, "antes-otra-vez", FOLDER_BEFORE).await;
    assert!(prompt.contains("CARPETA-ANTES-11"), "{prompt}");
}
