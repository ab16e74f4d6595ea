//! The console's demo model: the workspace's scripted model server (`local_stack::model_server`)
//! with a decider that answers each request as a model would, from the user's words, the tool
//! results since them and the system prompt (state 1, or state 2 with a skill's SKILL.md, loaded or
//! forced by a slash command, or a subagent's, which ends with `<subagent>`), and the images and PDFs
//! the request shows it (`seen`). A message that names a skill of the listing loads it, and what the
//! skill says is followed in the reply; the evals' grader is answered by `grader`. What it says comes
//! from `console/demo-model/texts.json`, which the browser tests read too.

use std::collections::HashMap;

use local_stack::model_server::{Received, Reply};
use serde_json::{json, Value};

use super::grader;
use super::seen::{self, Seen};
use super::texts::{say, texts};

/// The two subagents' tasks: what each is told (`description`), the `file` it writes, its
/// `content` and its `answer`.
fn subtasks() -> &'static [Value] {
    texts()["SUBTASKS"].as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A field of a subtask.
fn field<'a>(task: &'a Value, name: &str) -> &'a str {
    task[name].as_str().unwrap_or_default()
}

/// The conversation since the user's last message: what the decisions read.
struct Turn {
    system: String,
    user: String,
    /// The files the user's message showed (attached to it).
    attached: Vec<Seen>,
    /// The tool results since the user's message, with the name of the tool that gave each.
    results: Vec<(String, String)>,
    /// The files those results showed (`read_file` of an image).
    shown_by_tools: Vec<Seen>,
    /// The skill the model loaded since the user's message (`load_skill`'s `skill_path`).
    loaded: Option<String>,
}

impl Turn {
    fn of(body: &Value) -> Turn {
        let messages = body["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
        let content = |message: &Value| seen::text_of(&message["content"]);
        let system = messages.first().filter(|message| message["role"] == "system").map(content);
        // A forced skill's per-step reminder, and the message showing tool results' files, are
        // user messages of the runtime's, not the user's.
        let last_user =
            messages.iter().rposition(|message| message["role"] == "user" && !seen::is_runtimes(&content(message)));
        let user = last_user.map(|index| content(&messages[index])).unwrap_or_default();
        let attached = last_user.map(|index| seen::attached(&messages[index]["content"])).unwrap_or_default();
        let since = &messages[last_user.map_or(0, |index| index + 1)..];
        let shown_by_tools = since
            .iter()
            .filter(|message| message["role"] == "user")
            .flat_map(|message| seen::shown_by_tools(&message["content"]))
            .collect();
        let mut names = HashMap::new();
        let mut loaded = None;
        for call in since.iter().flat_map(|message| message["tool_calls"].as_array().into_iter().flatten()) {
            let name = call["function"]["name"].as_str().unwrap_or_default();
            names.insert(call["id"].as_str().unwrap_or_default(), name);
            if name == "load_skill" {
                let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or_default())
                    .unwrap_or_default();
                loaded = arguments["skill_path"].as_str().map(str::to_owned).or(loaded);
            }
        }
        let results = since
            .iter()
            .filter(|message| message["role"] == "tool")
            .map(|message| {
                let name = message["name"]
                    .as_str()
                    .or_else(|| names.get(message["tool_call_id"].as_str().unwrap_or_default()).copied());
                (name.unwrap_or_default().to_owned(), content(message))
            })
            .collect();
        Turn { system: system.unwrap_or_default(), user, attached, results, shown_by_tools, loaded }
    }

    fn done(&self, tool: &str) -> bool {
        self.results.iter().any(|(name, _)| name == tool)
    }

    /// The last result of `tool`, empty when it did not run.
    fn result(&self, tool: &str) -> &str {
        self.results.iter().rev().find(|(name, _)| name == tool).map_or("", |(_, content)| content.as_str())
    }

    fn asks(&self, words: &str) -> bool {
        self.user.to_lowercase().contains(words)
    }

    /// The skill of the listing (state 1) the user's message names, by its path or its name.
    fn named_skill(&self) -> Option<String> {
        let said = self.user.to_lowercase();
        listed_skills(&self.system)
            .into_iter()
            .find(|(name, path)| names(&said, &path.to_lowercase()) || names(&said, &name.to_lowercase()))
            .map(|(_, path)| path)
    }
}

/// The skills a state-1 prompt's listing shows, as `(name, path)`: its lines
/// `- {name} (load_skill("{path}")): {description}`.
fn listed_skills(system: &str) -> Vec<(String, String)> {
    const MARKER: &str = " (load_skill(\"";
    system
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("- ")?.split_once(MARKER)?;
            let (path, _) = rest.split_once("\")")?;
            Some((name.trim().to_owned(), path.to_owned()))
        })
        .collect()
}

/// Whether `said` has `words` as words of its own (not inside a longer word or path).
fn names(said: &str, words: &str) -> bool {
    let part_of_a_word = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '/');
    !words.is_empty()
        && said.match_indices(words).any(|(at, _)| {
            let before = said[..at].chars().next_back();
            let after = said[at + words.len()..].chars().next();
            !before.is_some_and(part_of_a_word) && !after.is_some_and(part_of_a_word)
        })
}

/// What a loaded SKILL.md (the state-2 prompt) tells the model to do: its first line of text after
/// the frontmatter that is no heading.
fn instructions(system: &str) -> &str {
    let body = match system.strip_prefix("---\n") {
        Some(rest) => rest.split_once("\n---").map_or(rest, |(_, body)| body),
        None => system,
    };
    body.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with("---"))
        .unwrap_or_default()
}

fn first_line(text: &str) -> &str {
    text.split('\n').next().unwrap_or_default()
}

/// The reply to one request.
pub fn decide(request: &Received) -> Reply {
    if grader::is_grading(request) {
        return grader::grade(request);
    }
    let turn = Turn::of(&request.body);
    let text = |text: &str| Reply::text(text);
    // A subagent's prompt ends with `<subagent>…</subagent>`; its task is its user message.
    if turn.system.contains("<subagent>") {
        if turn.user.contains(say("RESCHEDULE_TASK")) {
            if !turn.done("edit_file") {
                return edit_note("12:00");
            }
            let edited = turn.result("edit_file");
            if edited.starts_with("The user rejected") {
                return text("No he cambiado la hora: la persona lo rechazó.");
            }
            if edited.starts_with("Error") {
                return text(&format!("No he podido cambiarla: {}", first_line(edited)));
            }
            return text(say("SUBAGENT_RESCHEDULED"));
        }
        let Some(task) = subtasks().iter().find(|task| turn.user.contains(field(task, "file"))) else {
            return text("Soy un subagente del modelo de demostración y no sé hacer esta tarea.");
        };
        if !turn.done("write_file") {
            return Reply::tool(
                "write_file",
                json!({"file_path": field(task, "file"), "content": field(task, "content")}),
            );
        }
        return text(field(task, "answer"));
    }
    // Files attached to the message: the demo says what it was shown, as a model that sees would.
    if !turn.attached.is_empty() {
        return text(&seen::said_attached(&turn.attached));
    }
    if turn.asks("vuelve a mirar") {
        return look_again(&turn);
    }
    if turn.asks("un subagente") {
        if !turn.done("task") {
            return Reply::tool(
                "task",
                json!({"description": say("RESCHEDULE_TASK"), "subagent_type": "general-purpose"}),
            );
        }
        let answered = turn.result("task");
        if answered != say("SUBAGENT_RESCHEDULED") {
            return text(&format!("El subagente no cambió la hora: {}", first_line(answered)));
        }
        return text(say("DELEGATED_RESCHEDULED"));
    }
    if turn.asks("en paralelo") {
        if !turn.done("task") {
            let calls = subtasks().iter().map(|task| {
                (
                    "task".to_owned(),
                    json!({"description": field(task, "description"), "subagent_type": "general-purpose"}),
                )
            });
            return Reply::Tools(calls.collect());
        }
        if let Some((_, failed)) = turn.results.iter().find(|(_, content)| content.starts_with("Error")) {
            return text(&format!("Un subagente no terminó su parte: {}", first_line(failed)));
        }
        return text(say("DELEGATED"));
    }
    if turn.asks("cambia la hora") {
        if !turn.done("edit_file") {
            return edit_note("11:00");
        }
        let edited = turn.result("edit_file");
        if edited.starts_with("The user rejected") {
            return text(say("NOT_RESCHEDULED"));
        }
        if edited.starts_with("Error") {
            return text(&format!("No he podido cambiarla: {}", first_line(edited)));
        }
        return text(say("RESCHEDULED"));
    }
    let word_skill = turn.system.contains("# Minuta en Word");
    if turn.asks("word") || word_skill {
        if !word_skill && !turn.done("load_skill") {
            return Reply::tool("load_skill", json!({"skill_path": "documentos/minuta-word"}));
        }
        if !turn.done("execute") {
            let command = format!("python /skills/minuta-word/scripts/md_a_docx.py nota.md {}", say("WORD_FILE"));
            return Reply::tool("execute", json!({ "command": command }));
        }
        if !turn.result("execute").contains("[Command succeeded") {
            return text(say("WORD_FAILED"));
        }
        return text(say("WORD_DONE"));
    }
    let note_skill = turn.system.contains("# Nota rápida");
    if turn.asks("nota") || note_skill {
        if !note_skill && !turn.done("load_skill") {
            return Reply::tool("load_skill", json!({"skill_path": "borradores/nota-rapida"}));
        }
        if !turn.done("write_file") {
            return Reply::tool("write_file", json!({"file_path": "/workspace/nota.md", "content": say("NOTE_TEXT")}));
        }
        return text(say("NOTE_SAVED"));
    }
    // Any other skill: loaded when the message names it, then followed.
    if let Some(skill) = &turn.loaded {
        let loaded = turn.result("load_skill");
        if loaded.starts_with("Error") {
            return text(&format!("No he podido cargar {skill}: {}", first_line(loaded)));
        }
        let followed = say("SKILL_FOLLOWED").replace("{skill}", skill);
        return text(&followed.replace("{instructions}", instructions(&turn.system)));
    }
    if let Some(skill) = turn.named_skill() {
        return Reply::tool("load_skill", json!({ "skill_path": skill }));
    }
    text(say("GREETING"))
}

/// "Vuelve a mirar sello.png": `read_file` of the file the message names, then what it showed.
fn look_again(turn: &Turn) -> Reply {
    let Some(path) = seen::named_file(&turn.user) else {
        return Reply::text(say("LOOK_AT_WHAT"));
    };
    if !turn.done("read_file") {
        return Reply::tool("read_file", json!({ "file_path": path }));
    }
    match turn.shown_by_tools.first() {
        Some(file) => Reply::text(&file.said_by_tool()),
        None => Reply::text(&format!("No he podido verla: {}", first_line(turn.result("read_file")))),
    }
}

/// The note's edit of the meeting's hour, which the console's policy asks the person about.
fn edit_note(hour: &str) -> Reply {
    Reply::tool("edit_file", json!({"file_path": "/workspace/nota.md", "old_string": "10:00", "new_string": hour}))
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    fn request(messages: Value) -> Received {
        Received {
            path: "/v1/chat/completions".to_owned(),
            headers: Default::default(),
            body: json!({ "messages": messages }),
            at: std::time::Instant::now(),
        }
    }

    #[test]
    fn a_note_loads_its_skill_writes_the_note_then_says_so() {
        let asked = json!([{"role": "system", "content": "state 1"}, {"role": "user", "content": "Toma nota"}]);
        assert!(matches!(decide(&request(asked)), Reply::Tools(calls) if calls[0].0 == "load_skill"));
        let written = json!([
            {"role": "system", "content": "# Nota rápida"},
            {"role": "user", "content": "Toma nota"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "function": {"name": "write_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]);
        assert!(matches!(decide(&request(written)), Reply::Text(text) if text == say("NOTE_SAVED")));
        let other = json!([{"role": "user", "content": "Hola"}]);
        assert!(matches!(decide(&request(other)), Reply::Text(text) if text == say("GREETING")));
    }

    #[test]
    fn a_skill_the_message_names_is_loaded_and_followed_and_a_greeting_loads_none() {
        let listing = "## Skills\n- horario-oficina (load_skill(\"pruebas/horario-oficina\")): Dice el horario.\n\
                       - compraventa (load_skill(\"escrituras/compraventa\")): Escrituras.\n";
        let asked = json!([{"role": "system", "content": listing}, {"role": "user", "content": "¿Cuándo abre? Usa horario-oficina."}]);
        assert!(matches!(decide(&request(asked)),
            Reply::Tools(calls) if calls[0].0 == "load_skill" && calls[0].1["skill_path"] == "pruebas/horario-oficina"));
        let skill_md = "---\nname: horario-oficina\ndescription: Dice el horario.\n---\n# Horario\n\n\
                        La oficina atiende de 9:00 a 14:00.\n\n## Memory\n/memories is yours.";
        let loaded = json!([
            {"role": "system", "content": skill_md},
            {"role": "user", "content": "¿Cuándo abre? Usa horario-oficina."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "function": {"name": "load_skill",
                "arguments": "{\"skill_path\":\"pruebas/horario-oficina\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Loaded pruebas/horario-oficina."},
        ]);
        let said = say("SKILL_FOLLOWED")
            .replace("{skill}", "pruebas/horario-oficina")
            .replace("{instructions}", "La oficina atiende de 9:00 a 14:00.");
        assert!(matches!(decide(&request(loaded)), Reply::Text(text) if text == said));
        // A word inside another (`compraventas`), or no skill named, loads nothing.
        for message in ["Hola, ¿qué tal?", "Dos compraventas"] {
            let greeting = json!([{"role": "system", "content": listing}, {"role": "user", "content": message}]);
            assert!(matches!(decide(&request(greeting)), Reply::Text(text) if text == say("GREETING")), "{message}");
        }
    }

    /// A 4 × 3 PNG's header as a `data:` URL: all the demo reads of an image.
    fn png_url() -> String {
        let mut bytes = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        bytes.extend(4u32.to_be_bytes());
        bytes.extend(3u32.to_be_bytes());
        format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    #[test]
    fn an_attached_image_is_described_as_it_arrived_and_looked_at_again_with_read_file() {
        let attached = json!([{"role": "user", "content": [
            {"type": "text", "text": "¿Qué ves? nota\n\nAttached files:\n- Showing the image /workspace/sello.png (image/png, 4×3, 60 bytes)."},
            {"type": "image_url", "image_url": {"url": png_url()}},
        ]}]);
        let said = say("IMAGE_SEEN").replace("{file}", "/workspace/sello.png, de 4×3 píxeles");
        assert!(matches!(decide(&request(attached)), Reply::Text(text) if text == said));

        let again = json!([{"role": "user", "content": say("LOOK_AGAIN")}]);
        assert!(matches!(decide(&request(again)),
            Reply::Tools(calls) if calls[0].0 == "read_file" && calls[0].1["file_path"] == "/workspace/sello.png"));
        let read = json!([
            {"role": "user", "content": say("LOOK_AGAIN")},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Showing the image /workspace/sello.png."},
            {"role": "user", "content": [
                {"type": "text", "text": "Files shown by the tool results above:\n- /workspace/sello.png (image/png, from tool call c1)"},
                {"type": "image_url", "image_url": {"url": png_url()}},
            ]},
        ]);
        let said =
            say("TOOL_SEEN").replace("{file}", "/workspace/sello.png, de 4×3 píxeles").replace("{kind}", "imagen");
        assert!(matches!(decide(&request(read)), Reply::Text(text) if text == said));
    }
}
