//! The prefix a provider caches holds: every model call of a turn, and every turn of the same
//! prompt state, sends byte for byte the same tools and system prompt, what varies (the date) comes
//! in the tail after it, and the messages of a call start with those of the call before. Under
//! context pressure the tenant's base prompt stays whole while the turn's older steps are condensed.

use std::sync::Arc;

use agent_core::turn::{AgentConfig, OffsetDateTime, TurnRequest, TurnService};
use agent_core::{ChatRequest, ChatResponse, Message, ObjectStore, SessionId, ToolCall, UserId};
use agent_ports::testing::{FnModel, ScriptedModel};
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::json;

const DAY_ONE: i64 = 1_795_564_800; // 2026-11-25 00:00 UTC
const DAY: i64 = 86_400;

fn request(user: &str, message: &str, now: i64) -> TurnRequest {
    let now = OffsetDateTime::from_unix_timestamp(now).unwrap();
    TurnRequest::new(UserId::parse(user).unwrap(), SessionId::parse("s1").unwrap(), message, now)
}

/// Whether `earlier`'s messages are the first messages of `later`.
fn extends(later: &ChatRequest, earlier: &ChatRequest) -> bool {
    later.messages.len() > earlier.messages.len() && later.messages[..earlier.messages.len()] == earlier.messages[..]
}

fn same_prefix(a: &ChatRequest, b: &ChatRequest) -> bool {
    a.system == b.system && a.tools == b.tools && a.cache_key == b.cache_key
}

#[tokio::test]
async fn the_calls_of_a_turn_and_the_turns_of_a_session_share_the_cached_prefix() {
    let model = Arc::new(
        ScriptedModel::default()
            .tool("write_file", json!({"file_path": "/workspace/a.md", "content": "uno"}))
            .tool("ls", json!({"path": "/workspace"}))
            .tool("read_file", json!({"file_path": "/workspace/a.md"}))
            .tool("edit_file", json!({"file_path": "/workspace/a.md", "old_string": "uno", "new_string": "dos"}))
            .text("Hecho.")
            .tool("ls", json!({"path": "/workspace"}))
            .text("Sigue ahí.")
            .text("Hola, Bob."),
    );
    let sessions = Arc::new(MemorySessionStore::new());
    let objects = Arc::new(MemoryObjectStore::new());
    let service = TurnService::new(sessions, objects, model.clone(), AgentConfig::default());
    service.run_turn(request("alice", "escribe a.md", DAY_ONE + 100)).await.unwrap();
    // The next turn, the next day.
    service.run_turn(request("alice", "¿sigue a.md?", DAY_ONE + DAY + 100)).await.unwrap();
    service.run_turn(request("bob", "hola", DAY_ONE + 100)).await.unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 8);
    let (first, second, bob) = (&requests[..5], &requests[5..7], &requests[7]);

    // One turn: the same prefix, and each call's messages extend the previous call's.
    for pair in first.windows(2) {
        assert!(same_prefix(&pair[0], &pair[1]), "the calls of a turn share tools, system and key");
        assert_eq!(pair[0].system_tail, pair[1].system_tail);
        assert!(extends(&pair[1], &pair[0]), "{:?}\nthen\n{:?}", pair[0].messages, pair[1].messages);
    }
    // The next turn: the same prefix, though the date changed, and the history first.
    assert!(same_prefix(&first[0], &second[0]));
    assert!(!first[0].system.contains("2026-11-2"), "no date in the cached part: {}", first[0].system);
    assert!(first[0].system_tail.contains("Today is 2026-11-25."), "{}", first[0].system_tail);
    assert!(second[0].system_tail.contains("Today is 2026-11-26."), "{}", second[0].system_tail);
    assert!(extends(&second[0], &first[4]), "the second turn starts with the first one's conversation");
    assert!(extends(&second[1], &second[0]));
    // Another tenant: the same built-in prompt, but a key of its own.
    assert_eq!((bob.system.as_str(), &bob.tools), (first[0].system.as_str(), &first[0].tools));
    assert!(bob.cache_key.is_some() && bob.cache_key != first[0].cache_key);
}

#[tokio::test]
async fn a_loaded_skill_is_a_prefix_of_its_own_shared_by_every_turn_of_that_skill() {
    let objects = Arc::new(MemoryObjectStore::new());
    let skill = "---\nname: informe\ndescription: Redacta informes.\n---\n# Informe\nRedacta el informe.\n";
    objects.put("alice/skills/docs/informe/SKILL.md", skill.as_bytes().to_vec()).await.unwrap();
    let load = json!({"skill_path": "docs/informe"});
    let model = Arc::new(
        ScriptedModel::default()
            .tool("load_skill", load.clone())
            .tool("ls", json!({"path": "/workspace"}))
            .text("Uno.")
            .tool("load_skill", load)
            .text("Dos."),
    );
    let service = TurnService::new(Arc::new(MemorySessionStore::new()), objects, model.clone(), AgentConfig::default());
    service.run_turn(request("alice", "informe uno", DAY_ONE)).await.unwrap();
    service.run_turn(request("alice", "informe dos", DAY_ONE + 60)).await.unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 5);
    // State 1, then state 2 with the SKILL.md; the next turn goes through the same two prefixes.
    assert!(requests[1].system.contains("# Informe") && same_prefix(&requests[1], &requests[2]));
    assert_ne!(requests[0].system, requests[1].system);
    assert_ne!(requests[0].cache_key, requests[1].cache_key, "a key per prompt state");
    assert!(same_prefix(&requests[0], &requests[3]));
    assert!(same_prefix(&requests[1], &requests[4]));
}

/// A long turn under context pressure: the tenant's base prompt is in every request whole, and the
/// turn's older steps are condensed instead.
#[tokio::test]
async fn under_context_pressure_the_base_prompt_stays_and_the_turn_is_condensed() {
    let objects = Arc::new(MemoryObjectStore::new());
    let policy = "Regla de la casa: cita siempre la fuente. ".repeat(150);
    let base = format!("{policy}\nTrabajas para {{name}} en {{language}}. {{profile}}\n\n{{skill}}\n");
    objects.put("alice/skills/BASE_PROMPT.md", base.into_bytes()).await.unwrap();
    let steps = std::sync::atomic::AtomicU32::new(0);
    let model = Arc::new(FnModel::new(move |request: &ChatRequest| {
        if request.system == agent_core::agent::compact::INSTRUCTIONS {
            return Ok(ChatResponse::text("Leí los ficheros uno a uno; falta resumirlos."));
        }
        let step = steps.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if step >= 12 {
            return Ok(ChatResponse::text("Listo."));
        }
        let content = format!("{step} ").repeat(700);
        let call = ToolCall::new(
            format!("w{step}"),
            "write_file",
            json!({"file_path": format!("/workspace/{step}.txt"), "content": content}),
        );
        let read =
            ToolCall::new(format!("r{step}"), "read_file", json!({"file_path": format!("/workspace/{step}.txt")}));
        Ok(ChatResponse::calling(vec![call, read]))
    }));
    let config = AgentConfig { context_tokens: 14_000, ..AgentConfig::default() };
    let service = TurnService::new(Arc::new(MemorySessionStore::new()), objects, model.clone(), config);
    let reply = service.run_turn(request("alice", "lee todo", DAY_ONE)).await.unwrap();
    assert_eq!(reply.reply, "Listo.");
    let requests = model.requests();
    let (condensing, turn): (Vec<&ChatRequest>, Vec<&ChatRequest>) =
        requests.iter().partition(|request| request.system == agent_core::agent::compact::INSTRUCTIONS);
    assert!(!condensing.is_empty(), "the turn's older steps were condensed");
    assert_eq!(turn.len(), 13);
    for request in &turn {
        assert!(request.system.starts_with(&policy), "the base prompt is whole in every request");
        assert!(same_prefix(request, turn[0]));
    }
    let condensed = turn.iter().filter(|request| {
        request
            .messages
            .iter()
            .any(|m| matches!(m, Message::User { content, .. } if content.starts_with("[Earlier steps")))
    });
    assert!(condensed.count() > 0);
}

#[tokio::test]
async fn a_base_prompt_that_alone_does_not_fit_is_said_before_any_call() {
    let objects = Arc::new(MemoryObjectStore::new());
    let base = format!("{}\n{{name}} {{language}} {{profile}}\n{{skill}}\n", "Política. ".repeat(4000));
    objects.put("alice/skills/BASE_PROMPT.md", base.into_bytes()).await.unwrap();
    let model = Arc::new(ScriptedModel::default().text("nunca"));
    let config = AgentConfig { context_tokens: 4_000, ..AgentConfig::default() };
    let service = TurnService::new(Arc::new(MemorySessionStore::new()), objects, model.clone(), config);
    let failed = service.run_turn(request("alice", "hola", DAY_ONE)).await;
    assert!(
        matches!(failed, Err(agent_core::turn::TurnError::Model(agent_core::ModelError::ContextTooLarge { .. }))),
        "{:?}",
        failed.map(|reply| reply.reply)
    );
    assert!(model.requests().is_empty());
}
