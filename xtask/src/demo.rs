//! The demo: a short conversation over the embedded store, each turn validated by the HTTP
//! contract (`agent_app::api`) and run as the streaming endpoint runs it, printing the model's text
//! as it streams and, for every model call, the prompt state, the tool calls and their results.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use std::io::Write;
use std::sync::atomic::AtomicBool;

use agent_app::api::{parse_turn_body, turn_request};
use agent_core::store::LinkHeaders;
use agent_core::turn::{FileDownload, TurnService, UserProfile};
use agent_core::{
    ChatModel, ChatRequest, ChatResponse, DeltaSink, Message, ModelError, SessionId, TurnEvent, TurnObserver, UserId,
};
use async_trait::async_trait;
use local_store::{MemoryObjectStore, MemorySessionStore};
use serde_json::{json, Value};

const DEMO_USER: &str = "user-demo";
const DEMO_MESSAGES: [&str; 4] = [
    "Hola, ¿qué puedes hacer por mí?",
    "Necesito preparar una escritura de compraventa de un piso en Madrid. Vende Ana García López, \
     compra Luis Pérez Martín, precio 250.000 euros pagados por transferencia.",
    "¿Qué borradores tengo guardados?",
    "Pásame el borrador en Word, por favor.",
];
/// The document the last turn's skill makes with its own script, and where the demo saves it.
const DEMO_DOCUMENT: &str = "minuta_compraventa.docx";
const DEMO_DOCUMENT_SAVED: &str = "target/demo/minuta_compraventa.docx";

pub fn run(root: &Path) -> Result<(), String> {
    // The last turn runs a skill's script in the sandbox image, built on first use (minutes).
    if crate::local::sandbox_settings(root).is_none() {
        println!("The last turn's command will not run: no sandbox (see above).");
    }
    let runtime = tokio::runtime::Runtime::new().map_err(|err| err.to_string())?;
    runtime.block_on(conversation(root))
}

async fn conversation(root: &Path) -> Result<(), String> {
    let objects = Arc::new(MemoryObjectStore::new());
    let uploaded = objects
        .upload_dir(&root.join("examples/skills"), &format!("{DEMO_USER}/skills/"))
        .map_err(|err| format!("could not read examples/skills: {err}"))?;
    // A skill with a script of its own (python-docx, in the sandbox image), run by `execute` in the last turn.
    let uploaded = uploaded
        + objects
            .upload_dir(&root.join("examples/demo/skills"), &format!("{DEMO_USER}/skills/"))
            .map_err(|err| format!("could not read examples/demo/skills: {err}"))?;
    let sessions = Arc::new(MemorySessionStore::new());

    let live = std::env::var("LLM_PROVIDER").is_ok_and(|provider| provider != "replay");
    let model = if live {
        llm::build(&llm::LlmConfig::from_env().map_err(|err| err.to_string())?).await.map_err(|err| err.to_string())?
    } else {
        let path = std::env::var("LLM_REPLAY_FILE")
            .map(Into::into)
            .unwrap_or_else(|_| root.join("examples/demo/replay.jsonl"));
        Arc::new(llm::ReplayModel::from_file(&path).map_err(|err| err.to_string())?) as Arc<dyn ChatModel>
    };
    let config = agent_app::agent_config(|name| std::env::var(name).ok()).map_err(|err| err.to_string())?;
    let narrator = Arc::new(Narrator::new(model));
    let mut service = TurnService::new(sessions, objects.clone(), narrator.clone(), config);
    match sandbox::LocalSandbox::from_env() {
        Ok(local) => service = service.with_sandbox(Arc::new(local)),
        Err(err) => println!("No local sandbox ({err}): the last turn's command will not run."),
    }

    println!(
        "Demo: {uploaded} files of examples/skills uploaded for tenant `{DEMO_USER}`; model: {}.",
        if live { "live (LLM_PROVIDER)" } else { "replayed from examples/demo/replay.jsonl" }
    );
    let user = UserId::parse(DEMO_USER).map_err(|err| err.to_string())?;
    let session_id = SessionId::parse("demo-session").map_err(|err| err.to_string())?;
    for (turn, message) in DEMO_MESSAGES.iter().enumerate() {
        println!("\n━━ Turn {} ━━\nuser: {message}", turn + 1);
        let body = json!({ "message": message }).to_string();
        let body = parse_turn_body(Some(&body), false).map_err(|err| err.message)?;
        let request =
            turn_request(user.clone(), session_id.clone(), body, &Default::default(), UserProfile::default(), None)
                .map_err(|err| err.message)?;
        let printer = StreamPrinter::default();
        narrator.start_turn();
        let reply =
            service.run_turn_observed(request, &printer).await.map_err(|err| format!("turn {}: {err}", turn + 1))?;
        println!(
            "\n  ({}, ended in skill {}, {} tokens in / {} out)",
            model_calls(reply.steps),
            reply.current_skill.map_or("none".to_owned(), |skill| skill.to_string()),
            reply.usage.input_tokens,
            reply.usage.output_tokens,
        );
    }

    // What `GET /sessions/demo-session/files/...` and `GET /sessions/demo-session` answer, asked of
    // the turn service as http-turn's routes ask it, without an API Gateway event.
    let heading = format!("\n━━ GET /sessions/demo-session/files/{DEMO_DOCUMENT} ━━");
    let path = format!("/workspace/{DEMO_DOCUMENT}");
    // The bytes whatever their size: the demo saves the file, it hands out no link.
    match service.workspace_file(&user, &session_id, &path, u64::MAX, &LinkHeaders::default()).await {
        Ok(Some(FileDownload::Bytes { bytes, .. })) => {
            let saved = root.join(DEMO_DOCUMENT_SAVED);
            if let Some(parent) = saved.parent() {
                std::fs::create_dir_all(parent).map_err(|err| err.to_string())?;
            }
            std::fs::write(&saved, &bytes).map_err(|err| err.to_string())?;
            println!("{heading}\n{} bytes, saved to {DEMO_DOCUMENT_SAVED}", bytes.len());
            if let Some(headings) = word_headings(&saved) {
                println!("Word headings in it: {headings}");
            }
        }
        Ok(Some(FileDownload::Link { url, .. })) => println!("{heading}\na link: {url}"),
        Ok(None) => println!("{heading}\nnot in the session's workspace"),
        Err(err) => println!("{heading}\n{err}"),
    }
    let (session, history) = service
        .session_page(&user, &session_id, None, DEMO_MESSAGES.len(), usize::MAX)
        .await
        .map_err(|err| err.to_string())?
        .ok_or("the demo's session was not stored")?;
    let messages: usize = history.turns.iter().map(|(_, messages)| messages.len()).sum();
    let workspace: Vec<Value> = session
        .state
        .workspace
        .iter()
        .map(|(path, file)| json!({"path": format!("/workspace/{path}"), "size": file.size}))
        .collect();
    println!(
        "\n━━ GET /sessions/demo-session ━━\nversion {}, {messages} messages in history, current_skill {}, workspace {}",
        session.version,
        json!(session.state.current_skill),
        Value::from(workspace)
    );
    Ok(())
}

/// The document's paragraphs in Word heading styles, read with python-docx in the sandbox image.
fn word_headings(document: &Path) -> Option<String> {
    std::env::var_os("SANDBOX_ROOT")?;
    let dir = document.parent()?;
    let name = document.file_name()?.to_str()?;
    let script = "import sys; from docx import Document; \
                  print('; '.join(f'{p.style.name}: {p.text}' for p in Document(sys.argv[1]).paragraphs \
                  if p.style is not None and p.style.name.startswith('Heading')))";
    let output = local_stack::image::run_in_image(dir, "python3", &["-c", script, name]);
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// Prints the model's text as it streams, and the skills that become current.
#[derive(Default)]
struct StreamPrinter {
    writing: AtomicBool,
}

impl TurnObserver for StreamPrinter {
    fn event(&self, event: TurnEvent) {
        let mut out = std::io::stdout().lock();
        match event {
            TurnEvent::MessageDelta { text } => {
                if !self.writing.swap(true, Ordering::Relaxed) {
                    let _ = write!(out, "  assistant ▸ ");
                }
                let _ = write!(out, "{}", text.replace('\n', "\n    "));
            }
            TurnEvent::SkillLoaded { skill, forced, .. } => {
                let _ = writeln!(out, "    ✓ skill {skill} loaded{}", if forced { " (forced)" } else { "" });
            }
            TurnEvent::FileWritten { path, size } => {
                let _ = writeln!(out, "    ✎ {path} written ({size} bytes)");
            }
            _ => {}
        }
        let _ = out.flush();
    }
}

/// "1 model call", "3 model calls".
fn model_calls(count: u32) -> String {
    crate::counted(u64::from(count), "model call", "model calls")
}

/// What the demo adds after a tool result: the replayed turn reads a PDF on purpose, to show the
/// file tools refusing a binary file and the model carrying on, and says so, so it does not read
/// like a failure.
fn aside(name: &str, content: &str) -> Option<&'static str> {
    (name == "read_file" && content.starts_with("Error:") && content.contains("is a binary file"))
        .then_some("(on purpose: the file tools refuse binary files, and the model carries on without it)")
}

fn preview(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ⏎ ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max).collect::<String>())
    }
}

/// Wraps the model to narrate each call: which prompt state it was sent, the results of the
/// tools run since the previous call, and what the model asked for.
struct Narrator {
    inner: Arc<dyn ChatModel>,
    calls: AtomicUsize,
}

impl Narrator {
    fn new(inner: Arc<dyn ChatModel>) -> Self {
        Self { inner, calls: AtomicUsize::new(0) }
    }

    /// Model calls are numbered per turn.
    fn start_turn(&self) {
        self.calls.store(0, Ordering::Relaxed);
    }
}

fn prompt_state(system: &str) -> String {
    if let Some(rest) = system.strip_prefix("---") {
        let name = rest.lines().find_map(|line| line.strip_prefix("name:")).unwrap_or("?").trim();
        return format!("state 2: SKILL.md of `{name}` is the whole system prompt ({} chars)", system.len());
    }
    if let Some(start) = system.find("Loaded skill: ") {
        let skill = system[start + 14..].lines().next().unwrap_or("?");
        return format!("state 2: base prompt with SKILL.md of `{skill}` injected ({} chars)", system.len());
    }
    let listed = system.matches("\")): ").count();
    format!("state 1: base prompt + listing of {listed} skills ({} chars)", system.len())
}

#[async_trait]
impl ChatModel for Narrator {
    fn file_input(&self) -> agent_core::model::FileInput {
        self.inner.file_input()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        self.narrate_call(request);
        let response = self.inner.complete(request).await?;
        Ok(self.narrate_answer(response))
    }

    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        self.narrate_call(request);
        let response = self.inner.complete_streaming(request, sink).await?;
        Ok(self.narrate_answer(response))
    }
}

impl Narrator {
    /// The tool results since the previous call, and the prompt state this call is sent.
    fn narrate_call(&self, request: &ChatRequest) {
        let call = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        for message in request
            .messages
            .iter()
            .rev()
            .take_while(|m| matches!(m, Message::Tool { .. }))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if let Message::Tool { name, content, .. } = message {
                println!("    ← {name}: {}", preview(content, 110));
                if let Some(aside) = aside(name, content) {
                    println!("      {aside}");
                }
            }
        }
        println!("  · model call {call}: {}", prompt_state(&request.system));
    }

    fn narrate_answer(&self, response: ChatResponse) -> ChatResponse {
        for tool_call in &response.tool_calls {
            println!("    → {}({})", tool_call.name, preview(&tool_call.arguments.to_string(), 100));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_model_call_is_singular() {
        assert_eq!(model_calls(1), "1 model call");
        assert_eq!(model_calls(6), "6 model calls");
    }

    #[test]
    fn the_deliberate_binary_read_is_called_deliberate_and_other_errors_are_not() {
        let binary = "Error: File '/skills/compraventa/resources/plantilla.pdf' is a binary file (793 bytes)";
        assert!(aside("read_file", binary).is_some_and(|text| text.contains("on purpose")));
        assert_eq!(aside("read_file", "Error: File '/x.md' not found"), None);
        assert_eq!(aside("ls", binary), None);
    }

    #[tokio::test]
    async fn model_calls_are_numbered_per_turn() {
        let text =
            r#"{"content":"a","tool_calls":[],"usage":{"input_tokens":1,"output_tokens":1},"stop_reason":"end_turn"}"#;
        let replay = llm::ReplayModel::from_jsonl("mem", &format!("{text}\n{text}\n{text}\n")).unwrap();
        let narrator = Narrator::new(Arc::new(replay));
        narrator.complete(&ChatRequest::default()).await.unwrap();
        narrator.complete(&ChatRequest::default()).await.unwrap();
        assert_eq!(narrator.calls.load(Ordering::Relaxed), 2);
        narrator.start_turn();
        narrator.complete(&ChatRequest::default()).await.unwrap();
        assert_eq!(narrator.calls.load(Ordering::Relaxed), 1);
    }
}
