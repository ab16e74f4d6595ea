//! Where a bundle comes from is checked: through the compiled http-turn, with the local backend and
//! with the Lambda backend running the compiled sandbox in the image, a well-formed bundle of real
//! wheels that a tenant placed under its skill's `.bundle/` itself (a direct S3 write) is never
//! installed unless its name carries the runtime's signature for that tenant: not unsigned, not
//! with a forged signature, not signed for another tenant, not even when the same bytes are already
//! installed for the tenant. The command runs without it and its result says why. The same bytes
//! signed by the runtime for the tenant are installed and import.

use std::path::PathBuf;

use agent_core::UserId;
use local_stack::lambda::Function;
use local_stack::lambda_invoke::InvokeApi;
use local_stack::model_server::Reply;
use local_stack::stack::{get_event, status_and_body, test_bundle_key, tool_results, turn_event, Stack};
use sandbox::bundles::BundleKey;
use serde_json::{json, Value};

/// What a command prints when the bundle is installed.
const IMPORTED: &str = "plazo de 10 dias habiles\n";
/// What the model is told when a bundle is not the runtime's.
const NOT_THE_RUNTIMES: &str = "the skill's bundle was not built by the runtime";

fn scratch(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir =
        std::env::temp_dir().join(format!("{name}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst)));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

/// A skill `name` of `user` whose script imports the wheel, with `bundle` (its file name under
/// `.bundle/`) holding `tar`: what a tenant with write access to its own skills folder can place.
fn skill_with_bundle(user: &str, name: &str, bundle: &str, tar: &[u8]) -> Vec<(String, Vec<u8>)> {
    let prefix = format!("{user}/skills/{name}/");
    vec![
        (format!("{prefix}SKILL.md"), format!("---\nname: {name}\ndescription: Plazos.\n---\n# Plazos\n").into_bytes()),
        (format!("{prefix}scripts/plazo.py"), b"import notarial_dates\nprint(notarial_dates.plazo(10))\n".to_vec()),
        (format!("{prefix}.bundle/{bundle}"), tar.to_vec()),
    ]
}

/// The file names a bundle of `sha256` can be given: none of them but `signed` is the runtime's
/// for `tenant`.
struct Names {
    unsigned: String,
    forged: String,
    for_another_tenant: String,
    signed: String,
}

fn names(sha256: &str, tenant: &str, other: &str) -> Names {
    let key = test_bundle_key();
    let another_key = BundleKey::new(b"a key that is not the deployment's one").unwrap();
    let file =
        |key: &BundleKey, tenant: &str| key.file(&user(tenant), sha256).trim_start_matches(".bundle/").to_owned();
    Names {
        unsigned: format!("{sha256}.tar"),
        forged: file(&another_key, tenant),
        for_another_tenant: file(&key, other),
        signed: file(&key, tenant),
    }
}

/// One turn of `user` that loads `skill` and runs its script (the skill mounted at `skills`); the
/// command's result.
async fn run_script(stack: &Stack, http: &Function, user: &str, session: &str, skills: &str, skill: &str) -> String {
    let command = format!("python {skills}/{skill}/scripts/plazo.py");
    stack.model.push([
        Reply::tool("load_skill", json!({ "skill_path": skill })),
        Reply::tool("execute", json!({ "command": command, "timeout": 120 })),
        Reply::text("Done."),
    ]);
    let before = stack.model.requests().len();
    let (status, body) =
        status_and_body(&http.call(turn_event(Some(user), session, json!({ "message": "plazo" }))).await);
    assert_eq!(status, 200, "{body}");
    tool_results(&stack.model.requests()[before + 2]).pop().expect("the execute result")
}

/// The import failed and the result names the skill and says why, before the command's output.
fn refused(result: &str, skill: &str) {
    assert!(result.starts_with("[Not installed: the packages of skill"), "{result}");
    assert!(result.contains(&format!("skill `{skill}`")) && result.contains(NOT_THE_RUNTIMES), "{result}");
    assert!(result.contains("sync the skill again"), "{result}");
    assert!(result.contains("ModuleNotFoundError: No module named 'notarial_dates'"), "{result}");
}

/// Whether anything under `dir` (recursively) is named `notarial_dates...`: the wheel installed.
fn holds_the_package(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|entry| {
        entry.file_name().to_string_lossy().starts_with("notarial_dates")
            || (entry.path().is_dir() && holds_the_package(&entry.path()))
    })
}

/// `GET /skills` of `user`: the skill at `path` as the catalog shows it.
async fn catalog_entry(http: &Function, user: &str, path: &str) -> Value {
    let mut event = get_event(Some(user), "s");
    event["rawPath"] = json!("/skills");
    event["requestContext"]["http"]["path"] = json!("/skills");
    let (status, body) = status_and_body(&http.call(event).await);
    assert_eq!(status, 200, "{body}");
    body["skills"].as_array().unwrap().iter().find(|skill| skill["path"] == path).expect(path).clone()
}

/// The local backend: bundles a tenant placed itself are not installed, whatever their name says;
/// the runtime's are, for the tenant they were signed for only.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_backend_installs_only_bundles_the_runtime_signed_for_the_tenant() {
    const USER: &str = "user-provenance";
    const OTHER: &str = "user-provenance-other";
    let stack = Stack::new().await;
    let (tar, sha256) = local_stack::image::test_wheel_bundle();
    let names = names(&sha256, USER, OTHER);
    let mut objects = Vec::new();
    for (skill, bundle) in [
        ("sin-firma", &names.unsigned),
        ("firma-falsa", &names.forged),
        ("ajena", &names.for_another_tenant),
        ("firmada", &names.signed),
    ] {
        objects.extend(skill_with_bundle(USER, skill, bundle, &tar));
    }
    // The other tenant's own copy, signed for it.
    objects.extend(skill_with_bundle(OTHER, "ajena", &names.for_another_tenant, &tar));
    stack.put_many(objects).await;
    let installed = scratch("provenance-installed");
    let env = local_stack::image::local_sandbox_env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(key, value)| (*key, value.as_str())).collect();
    env.push(("SANDBOX_BUNDLE_DIR", installed.to_str().unwrap()));
    let http = stack.http(&env).await;

    // Unsigned, forged or another tenant's signature: the command runs without the packages.
    for (session, skill) in [("s1", "sin-firma"), ("s2", "firma-falsa"), ("s3", "ajena")] {
        let result = run_script(&stack, &http, USER, session, "/skills", skill).await;
        refused(&result, skill);
    }
    assert!(!holds_the_package(&installed), "nothing was installed");
    let admitted =
        |http: &Function| http.logs().iter().filter(|line| line.contains("installed a skill's bundle")).count();
    assert_eq!(admitted(&http), 0);
    // The owner sees it too, where unmet needs are shown.
    let entry = catalog_entry(&http, USER, "sin-firma").await;
    assert!(entry["warnings"][0].as_str().unwrap().contains("not built by the runtime"), "{entry}");

    // The same bytes signed by the runtime for this tenant: installed, and the import works.
    let result = run_script(&stack, &http, USER, "s4", "/skills", "firmada").await;
    assert!(result.starts_with(IMPORTED), "{result}");
    assert_eq!(admitted(&http), 1);
    // Now that those bytes are installed for this tenant, an unsigned name for them still gets nothing.
    let result = run_script(&stack, &http, USER, "s5", "/skills", "sin-firma").await;
    refused(&result, "sin-firma");
    // The bundle signed for the other tenant is that tenant's: installed for it, in a folder of its own.
    let result = run_script(&stack, &http, OTHER, "s1", "/skills", "ajena").await;
    assert!(result.starts_with(IMPORTED), "{result}");
    assert_eq!(admitted(&http), 2, "installed again for the other tenant");
    assert!(holds_the_package(&installed));
    let _ = std::fs::remove_dir_all(&installed);
}

/// With no signing key configured nothing is installed, not even the runtime's own bundles, and
/// the function says so once, at cold start.
#[tokio::test(flavor = "multi_thread")]
async fn without_a_signing_key_no_bundle_is_installed_and_the_log_says_so_once() {
    const USER: &str = "user-provenance-nokey";
    let stack = Stack::new().await;
    let (tar, sha256) = local_stack::image::test_wheel_bundle();
    let names = names(&sha256, USER, "someone-else");
    stack.put_many(skill_with_bundle(USER, "firmada", &names.signed, &tar)).await;
    let installed = scratch("provenance-nokey");
    let env = local_stack::image::local_sandbox_env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(key, value)| (*key, value.as_str())).collect();
    env.extend([("SANDBOX_BUNDLE_DIR", installed.to_str().unwrap()), ("BUNDLE_SIGNING_KEY", "")]);
    let http = stack.http(&env).await;
    for session in ["s1", "s2"] {
        let result = run_script(&stack, &http, USER, session, "/skills", "firmada").await;
        assert!(result.contains("no bundle signing key"), "{result}");
        assert!(result.contains("ModuleNotFoundError"), "{result}");
    }
    assert!(!holds_the_package(&installed), "nothing was installed");
    let said = http.logs().iter().filter(|line| line.contains("no bundle signing key is configured")).count();
    assert_eq!(said, 1, "{:?}", http.logs());
    let _ = std::fs::remove_dir_all(&installed);
}

/// The Lambda backend: an unsigned bundle is never named to the function nor sent to it in parts
/// (the Invoke API stand-in records every call); the runtime's bundle is sent and installed once.
#[tokio::test(flavor = "multi_thread")]
async fn the_lambda_backend_never_names_or_sends_a_bundle_the_runtime_did_not_sign() {
    const USER: &str = "user-provenance-lambda";
    let api = InvokeApi::start().await;
    let stack = Stack::new().await;
    let (tar, sha256) = local_stack::image::test_wheel_bundle();
    let names = names(&sha256, USER, "someone-else");
    let mut objects = skill_with_bundle(USER, "sin-firma", &names.unsigned, &tar);
    objects.extend(skill_with_bundle(USER, "ajena", &names.for_another_tenant, &tar));
    objects.extend(skill_with_bundle(USER, "firmada", &names.signed, &tar));
    stack.put_many(objects).await;
    let http = stack
        .http(&[("SANDBOX", "lambda"), ("SANDBOX_FUNCTION", "sandbox"), ("AWS_ENDPOINT_URL_LAMBDA", &api.endpoint)])
        .await;
    // A bundle part's payload is `{"bundle_part": ...}`, with no tenant of its own at the top.
    let parts = |api: &InvokeApi| api.calls().iter().filter(|call| call.payload_tenant.is_none()).count();
    let skills = "/tmp/sandbox/skills";

    for (session, skill) in [("s1", "sin-firma"), ("s2", "ajena")] {
        let before = api.calls().len();
        let result = run_script(&stack, &http, USER, session, skills, skill).await;
        refused(&result, skill);
        // One invocation: the function was not told of a bundle, so it asked for none.
        assert_eq!(api.calls().len(), before + 1, "{:?}", api.calls());
    }
    assert_eq!(parts(&api), 0, "no part of an unsigned bundle was sent");

    let result = run_script(&stack, &http, USER, "s3", skills, "firmada").await;
    assert!(result.starts_with(IMPORTED), "{result}");
    assert!(parts(&api) >= 1, "the runtime's bundle was sent in parts: {:?}", api.calls());
    let sent = parts(&api);
    // Installed in the tenant's environment now, yet an unsigned name for the same bytes gets nothing.
    let result = run_script(&stack, &http, USER, "s4", skills, "sin-firma").await;
    refused(&result, "sin-firma");
    assert_eq!(parts(&api), sent);
    assert!(api.calls().iter().all(|call| call.tenant.as_deref() == Some(USER)));
}
