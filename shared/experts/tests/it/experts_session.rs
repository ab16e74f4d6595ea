//! `McpExperts` and its session, as the agent uses them, against the official Python SDK's server
//! (`shared/local-stack/expert_server.py`, needs `pip install mcp`) on loopback.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_ports::expert::{
    ExpertCallOutcome, ExpertError, ExpertInfo, ExpertSession, ExpertToolCall, ExpertToolResult, Experts,
};
use agent_ports::UserId;
use experts::{experts_key, EnvSecretResolver, McpExperts, SecretResolver};
use local_stack::experts::{dead_url, ExpertOptions, ExpertServer};
use local_store::MemoryObjectStore;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(10);

/// A tool call that must finish without asking the user anything.
async fn call(
    session: &dyn ExpertSession,
    tool: &str,
    arguments: serde_json::Value,
) -> Result<ExpertToolResult, ExpertError> {
    match session.call_tool(ExpertToolCall::new(tool, arguments)).await? {
        ExpertCallOutcome::Done(result) => Ok(result),
        ExpertCallOutcome::NeedsInput(request) => panic!("the call asked for input: {request:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures

/// The machine's host name, if it resolves to 127.0.0.1 only (as `/etc/hosts` usually has it in
/// containers). Tenant experts may not use loopback addresses or `localhost`, but a name that
/// resolves there passes the check (DNS is for egress rules to police), which lets a test point a
/// tenant at a loopback server.
fn loopback_host_name() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?.trim().to_owned();
    if name.is_empty() || name.eq_ignore_ascii_case("localhost") || name.contains(|c: char| c.is_whitespace()) {
        return None;
    }
    let addresses: Vec<SocketAddr> = (name.as_str(), 80).to_socket_addrs().ok()?.collect();
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    (!addresses.is_empty() && addresses.iter().all(|a| a.ip() == loopback)).then_some(name)
}

fn user(id: &str) -> UserId {
    UserId::parse(id).unwrap()
}

fn names(session: &dyn ExpertSession) -> Vec<String> {
    session.experts().into_iter().map(|e| e.name).collect()
}

fn resolver() -> Arc<dyn SecretResolver> {
    Arc::new(EnvSecretResolver::from_vars([("BETA_KEY", "k3y")]))
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test(flavor = "multi_thread")]
async fn opens_live_experts_leaves_a_dead_one_out_and_serves_prompts_and_tools() {
    let mut alpha = ExpertServer::start();
    // beta answers JSON rather than SSE, and only with the header from the deployment's secret.
    let beta = ExpertServer::start_with(&ExpertOptions::default().json().require_header("X-Api-Key=k3y"));
    let dead = dead_url();
    let config = json!({"mcpServers": {
        "alpha": {"url": alpha.url, "description": "Contracts and arithmetic"},
        "beta": {"url": beta.url, "headers": {"X-Api-Key": {"env": "BETA_KEY"}}},
        "dead": {"url": dead},
    }});
    let experts = McpExperts::new(Some(config.to_string()), Arc::new(MemoryObjectStore::new()), resolver(), TIMEOUT);

    let started = Instant::now();
    let session = experts.open(&user("u1")).await;
    assert!(started.elapsed() < Duration::from_secs(5), "opening took {:?}", started.elapsed());
    assert_eq!(
        session.experts(),
        [
            ExpertInfo { name: "alpha".into(), description: "Contracts and arithmetic".into() },
            ExpertInfo { name: "beta".into(), description: String::new() },
        ]
    );

    // Prompts.
    let prompts = session.list_prompts("alpha").await.unwrap();
    let draft = prompts.iter().find(|p| p.name == "draft_contract").expect("draft_contract");
    assert_eq!(draft.description, "Draft a contract between two parties.");
    let arguments: Vec<_> = draft.arguments.iter().map(|a| (a.name.as_str(), a.required)).collect();
    assert_eq!(arguments, [("party_a", true), ("party_b", true)]);
    assert!(prompts.iter().any(|p| p.name == "review_clause"));
    let arguments = BTreeMap::from([("party_a".to_owned(), "Ana".to_owned()), ("party_b".to_owned(), "Bo".to_owned())]);
    let texts = session.get_prompt("alpha", "draft_contract", &arguments).await.unwrap();
    let roles: Vec<_> = texts.iter().map(|t| t.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant"]);
    assert!(texts[0].text.contains("Ana") && texts[0].text.contains("Bo"), "{texts:?}");
    let clause = BTreeMap::from([("clause".to_owned(), "No refunds.".to_owned())]);
    let texts = session.get_prompt("beta", "review_clause", &clause).await.unwrap();
    assert_eq!(texts.len(), 1);
    assert!(texts[0].text.contains("No refunds."), "{texts:?}");
    let missing = session.get_prompt("alpha", "no_such_prompt", &BTreeMap::new()).await.unwrap_err();
    assert!(matches!(missing, ExpertError::Failed(_)), "{missing:?}");
    assert!(matches!(session.list_prompts("dead").await, Err(ExpertError::UnknownExpert(name)) if name == "dead"));

    // Tools, namespaced across both experts.
    let alpha_tools = session.tools("alpha").await.unwrap();
    let beta_tools = session.tools("beta").await.unwrap();
    let alpha_names: Vec<_> = alpha_tools.iter().map(|t| t.name.as_str()).collect();
    let beta_names: Vec<_> = beta_tools.iter().map(|t| t.name.as_str()).collect();
    for name in ["alpha__add", "alpha__fail", "alpha__slow", "alpha__picture"] {
        assert!(alpha_names.contains(&name), "{name} in {alpha_names:?}");
    }
    assert!(beta_names.contains(&"beta__add"), "{beta_names:?}");
    let add = alpha_tools.iter().find(|t| t.name == "alpha__add").unwrap();
    assert_eq!(add.description, "[Expert alpha: Contracts and arithmetic] Add two integers.");
    assert_eq!(add.parameters["type"], "object");
    assert!(add.parameters["properties"].get("a").is_some(), "{}", add.parameters);
    assert!(matches!(session.tools("dead").await, Err(ExpertError::UnknownExpert(_))));

    // Calls, routed by the namespaced name.
    let sum = call(&*session, "alpha__add", json!({"a": 2, "b": 3})).await.unwrap();
    assert!(!sum.is_error);
    assert_eq!(sum.text, "5");
    let sum = call(&*session, "beta__add", json!({"a": 40, "b": 2})).await.unwrap();
    assert_eq!((sum.is_error, sum.text.as_str()), (false, "42"));
    let failed = call(&*session, "alpha__fail", json!({})).await.unwrap();
    assert!(failed.is_error);
    assert!(failed.text.contains("this tool always fails"), "{}", failed.text);
    let bad_arguments = call(&*session, "beta__add", json!([1, 2])).await.unwrap();
    assert!(bad_arguments.is_error, "{bad_arguments:?}");
    for unknown in ["gamma__add", "dead__add", "add", "alpha__nope"] {
        let error = call(&*session, unknown, json!({})).await.unwrap_err();
        assert!(matches!(&error, ExpertError::UnknownTool(name) if name == unknown), "{unknown}: {error:?}");
    }

    // The tool list is fetched once per session: with alpha gone it still comes from the cache,
    // while a call fails with a message that names neither the URL nor the port.
    alpha.stop();
    let cached = session.tools("alpha").await.unwrap();
    assert_eq!(cached, alpha_tools);
    let error = call(&*session, "alpha__add", json!({"a": 1, "b": 1})).await.unwrap_err();
    match &error {
        ExpertError::Failed(message) => {
            assert!(!message.contains(&alpha.port.to_string()) && !message.contains("127.0.0.1"), "{message}")
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    // beta is unaffected.
    assert_eq!(call(&*session, "beta__add", json!({"a": 1, "b": 1})).await.unwrap().text, "2");

    session.close().await;
    assert!(matches!(call(&*session, "beta__add", json!({"a": 1, "b": 1})).await, Err(ExpertError::UnknownExpert(_))));
    // Closing twice is harmless.
    session.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_tool_times_out_with_the_request_deadline() {
    let server = ExpertServer::start();
    let config = json!({"mcpServers": {"alpha": {"url": server.url}}}).to_string();
    let experts = McpExperts::new(Some(config), Arc::new(MemoryObjectStore::new()), resolver(), Duration::from_secs(1));
    assert_eq!(experts.timeout(), Duration::from_secs(1));
    let session = experts.open(&user("u1")).await;
    assert_eq!(names(session.as_ref()), ["alpha"]);
    session.tools("alpha").await.unwrap();
    let started = Instant::now();
    let error = call(&*session, "alpha__slow", json!({"seconds": 5})).await.unwrap_err();
    assert!(matches!(error, ExpertError::Timeout), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
    // The session survives the timeout.
    assert_eq!(call(&*session, "alpha__add", json!({"a": 1, "b": 2})).await.unwrap().text, "3");
    session.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_file_adds_and_removes_experts() {
    let host = loopback_host_name();
    let alpha = ExpertServer::start();
    let mut gamma_options = ExpertOptions::default().json();
    if let Some(host) = &host {
        gamma_options = gamma_options.allow_host(host);
    }
    let gamma = ExpertServer::start_with(&gamma_options);
    let deployment = json!({"mcpServers": {
        "alpha": {"url": alpha.url},
        "beta": {"url": dead_url()},
    }});
    let mut tenant = json!({"mcpServers": {
        // Removes the deployment's beta for this tenant only.
        "beta": null,
        // Tenants may not point at loopback addresses: left out.
        "local": {"url": gamma.url},
        // Nor read the function's environment.
        "sneaky": {"url": "https://experts.example.com/mcp", "headers": {"X-Key": {"env": "BETA_KEY"}}},
    }});
    if let Some(host) = &host {
        tenant["mcpServers"]["gamma"] =
            json!({"url": format!("http://{host}:{}/mcp", gamma.port), "description": "The tenant's own"});
    } else {
        eprintln!("the host name does not resolve to 127.0.0.1 only: not testing a live tenant expert");
    }
    let objects = Arc::new(MemoryObjectStore::new());
    objects.insert(&experts_key(&user("u1")), tenant.to_string().into_bytes());
    let experts = McpExperts::new(Some(deployment.to_string()), objects, resolver(), TIMEOUT);

    let session = experts.open(&user("u1")).await;
    if host.is_some() {
        assert_eq!(
            session.experts(),
            [
                ExpertInfo { name: "alpha".into(), description: String::new() },
                ExpertInfo { name: "gamma".into(), description: "The tenant's own".into() },
            ]
        );
        let tools: Vec<_> = session.tools("gamma").await.unwrap().into_iter().map(|t| t.name).collect();
        assert!(tools.contains(&"gamma__add".to_owned()), "{tools:?}");
        assert_eq!(call(&*session, "gamma__add", json!({"a": 20, "b": 1})).await.unwrap().text, "21");
        let texts = session.get_prompt("gamma", "filler_1", &BTreeMap::new()).await.unwrap();
        assert_eq!(texts[0].text, "Filler prompt number 1.");
    } else {
        assert_eq!(names(session.as_ref()), ["alpha"]);
    }
    session.close().await;

    // Another tenant, without a file, gets the deployment's experts (the dead beta left out).
    let session = experts.open(&user("u2")).await;
    assert_eq!(names(session.as_ref()), ["alpha"]);
    session.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_configuration_means_no_experts() {
    let experts = McpExperts::new(None, Arc::new(MemoryObjectStore::new()), resolver(), TIMEOUT);
    let session = experts.open(&user("u1")).await;
    assert!(session.experts().is_empty());
    assert!(matches!(session.tools("alpha").await, Err(ExpertError::UnknownExpert(_))));
    assert!(matches!(call(&*session, "alpha__add", json!({})).await, Err(ExpertError::UnknownTool(_))));
    session.close().await;
}

/// Lists kept across sessions: a tenant's own expert serves only that tenant its lists, even when the
/// server calls them public; a deployment expert's public lists are shared.
#[tokio::test(flavor = "multi_thread")]
async fn kept_lists_stay_with_their_tenant_unless_public_and_the_deployments() {
    let Some(host) = loopback_host_name() else {
        eprintln!("the host name does not resolve to 127.0.0.1 only: not testing a tenant's expert");
        return;
    };
    let shared = ExpertServer::start_with(&ExpertOptions::default().record().cache(60_000, "public"));
    let own = ExpertServer::start_with(&ExpertOptions::default().record().cache(60_000, "public").allow_host(&host));
    let deployment = json!({"mcpServers": {"shared": {"url": shared.url}}});
    let tenant = json!({"mcpServers": {"own": {"url": format!("http://{host}:{}/mcp", own.port)}}}).to_string();
    let objects = Arc::new(MemoryObjectStore::new());
    for id in ["u1", "u2"] {
        objects.insert(&experts_key(&user(id)), tenant.clone().into_bytes());
    }
    let experts = McpExperts::new(Some(deployment.to_string()), objects, resolver(), TIMEOUT);
    for id in ["u1", "u1", "u2"] {
        let session = experts.open(&user(id)).await;
        assert_eq!(names(session.as_ref()), ["own", "shared"]);
        for expert in ["own", "shared"] {
            assert!(!session.tools(expert).await.unwrap().is_empty());
            assert!(!session.list_prompts(expert).await.unwrap().is_empty());
        }
        session.close().await;
    }
    assert_eq!((own.count("tools/list"), own.count("prompts/list")), (2, 2), "once per tenant");
    assert_eq!((shared.count("tools/list"), shared.count("prompts/list")), (1, 1), "once for everyone");
    assert_eq!(experts.lists().tools.len(), 3, "u1's own, u2's own, the shared one");
}
