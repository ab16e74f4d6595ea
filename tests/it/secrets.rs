//! The model's API key from Secrets Manager (`LLM_API_KEY_SECRET`), through the compiled function
//! against moto's Secrets Manager: sent to the provider, never logged, read once per process, and
//! refused inside the tenants' namespace (`agent/…`, which the functions may read for every tenant).

use std::time::Duration;

use local_stack::model_server::Reply;
use local_stack::moto;
use local_stack::stack::{status_and_body, turn_event, Stack};
use serde_json::json;

const USER: &str = "user-secret";
const KEY: &str = "sk-from-secrets-manager-5f1c";

#[tokio::test]
async fn the_model_key_is_read_from_secrets_manager_once_per_process_and_never_logged() {
    let stack = Stack::new().await;
    let secrets = aws_sdk_secretsmanager::Client::new(&moto::sdk_config(&stack.endpoint).await);
    let name = moto::unique_name("agent-runtime/llm-key");
    // A console-made secret often ends with a newline; the key sent must not.
    secrets.create_secret().name(&name).secret_string(format!("{KEY}\n")).send().await.expect("create secret");
    stack.model.push([Reply::text("first"), Reply::text("second")]);

    // The plain variable is unset, as in the template: the key exists only in Secrets Manager.
    let http = stack.http(&[("LLM_API_KEY", ""), ("LLM_API_KEY_SECRET", name.as_str())]).await;
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "s1", json!({"message": "hola"}))).await);
    assert_eq!((status, body["reply"].as_str()), (200, Some("first")), "{body}");

    // Gone from Secrets Manager, the key still serves the warm process: it was read at cold start.
    secrets.delete_secret().secret_id(&name).force_delete_without_recovery(true).send().await.expect("delete secret");
    let (status, body) = status_and_body(&http.call(turn_event(Some(USER), "s1", json!({"message": "otra"}))).await);
    assert_eq!((status, body["reply"].as_str()), (200, Some("second")), "{body}");

    let bearer = format!("Bearer {KEY}");
    assert_eq!(stack.model.authorizations(), vec![Some(bearer.clone()), Some(bearer)]);
    let logs = http.logs().join("\n");
    assert!(logs.contains("model API key read from Secrets Manager"), "{logs}");
    assert!(!logs.contains(KEY), "the key never reaches the logs");
}

#[tokio::test]
async fn a_model_key_kept_among_the_tenants_secrets_is_refused_at_start() {
    let stack = Stack::new().await;
    let secrets = aws_sdk_secretsmanager::Client::new(&moto::sdk_config(&stack.endpoint).await);
    // The deployment docs' example once stored the key here, inside the experts' grant (`secret:agent/*`).
    let name = moto::unique_name("agent/llm-api-key");
    secrets.create_secret().name(&name).secret_string(KEY).send().await.expect("create secret");
    let mut http = stack.http(&[("LLM_API_KEY", ""), ("LLM_API_KEY_SECRET", name.as_str())]).await;
    let status = http.exit_status(Duration::from_secs(30)).await;
    assert!(status.is_some_and(|status| !status.success()), "the function started: {status:?}");
    // The pipes are read to their end after the exit.
    let waited = std::time::Instant::now();
    let logs = loop {
        let logs = http.logs().join("\n");
        if logs.contains("LLM_API_KEY_SECRET") || waited.elapsed() > Duration::from_secs(2) {
            break logs;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(logs.contains("LLM_API_KEY_SECRET") && logs.contains("tenants' namespace"), "{logs}");
    assert!(!logs.contains(KEY), "the key never reaches the logs");
}
