//! Tests of the planner: the stored plan's shape, the schemas, and whole turns over a scripted
//! model and a fake of the experts port.

use std::sync::Mutex;

use agent_ports::testing::ScriptedModel;
use async_trait::async_trait;
use serde_json::json;

use super::assess::assessment_schema;
use super::discover::discovery_schema;
use super::plan::plan_schema;
use super::*;
use crate::events::{NoObserver, TurnEvent};
use crate::expert::{ExpertCallOutcome, ExpertError, ExpertInfo, ExpertToolCall, PromptInfo, PromptText};
use crate::message::ToolSpec;

/// A prompt candidate with only a name, for tests that choose among prompts.
pub(super) fn option(name: &str) -> PromptCandidate {
    PromptCandidate {
        name: name.into(),
        description: String::new(),
        match_confidence: 0.5,
        arguments: BTreeMap::new(),
        declared: Vec::new(),
    }
}

#[test]
fn a_plan_round_trips_through_json_with_its_selection() {
    for selection in [None, Some(Selection::NoPrompt), Some(Selection::Prompt { prompt: option("x") })] {
        let plan = PlanState {
            request: "r".into(),
            tasks: vec![],
            position: 0,
            pending_choice: Some(vec![option("y")]),
            selection,
            pending_arguments: None,
            pending_input: None,
            resumed: None,
        };
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(serde_json::from_value::<PlanState>(json).unwrap(), plan);
    }
}

#[test]
fn schemas_are_strict_objects() {
    for schema in [plan_schema(), discovery_schema(), assessment_schema()] {
        assert_eq!(schema["additionalProperties"], false);
        let properties = schema["properties"].as_object().unwrap();
        assert_eq!(schema["required"].as_array().unwrap().len(), properties.len());
    }
}

#[test]
fn a_plan_stored_before_pending_arguments_still_decodes() {
    let stored = json!({
        "request": "r",
        "tasks": [{"expert": "alpha", "task": "t", "status": "pending", "result": null, "rounds": 1}],
        "position": 0,
        "pending_choice": [{"name": "p", "description": "", "match_confidence": 0.5, "arguments": {"a": "1"}}],
        "selection": {"kind": "prompt", "prompt": {"name": "p", "description": "", "match_confidence": 0.9, "arguments": {}}}
    });
    let plan: PlanState = serde_json::from_value(stored).unwrap();
    assert_eq!(plan.pending_arguments, None);
    assert_eq!(plan.tasks[0].prompt_failure, None);
    assert!(plan.pending_choice.as_ref().unwrap()[0].declared.is_empty());
    let with_question = PlanState {
        pending_arguments: Some(PendingArguments {
            prompt: PromptCandidate { declared: vec![argument("deed_type", true)], ..option("p") },
            asked: vec!["deed_type".into()],
            refusal: Some("no".into()),
        }),
        ..plan
    };
    let json = serde_json::to_value(&with_question).unwrap();
    assert_eq!(serde_json::from_value::<PlanState>(json).unwrap(), with_question);
}

/// The experts port with one expert, `alpha`: its prompts, and how each `prompts/get` answers.
struct FakeExperts {
    prompts: Vec<PromptInfo>,
    answer: fn(&str, &BTreeMap<String, String>) -> Result<String, ExpertError>,
    fetched: Mutex<Vec<(String, BTreeMap<String, String>)>>,
}

impl FakeExperts {
    fn fetched(&self) -> Vec<(String, BTreeMap<String, String>)> {
        self.fetched.lock().unwrap().clone()
    }
}

#[async_trait]
impl ExpertSession for FakeExperts {
    fn experts(&self) -> Vec<ExpertInfo> {
        vec![ExpertInfo { name: "alpha".into(), description: "Notary deeds".into() }]
    }

    async fn list_prompts(&self, _expert: &str) -> Result<Vec<PromptInfo>, ExpertError> {
        Ok(self.prompts.clone())
    }

    async fn get_prompt(
        &self,
        _expert: &str,
        prompt: &str,
        arguments: &BTreeMap<String, String>,
    ) -> Result<Vec<PromptText>, ExpertError> {
        self.fetched.lock().unwrap().push((prompt.to_owned(), arguments.clone()));
        (self.answer)(prompt, arguments).map(|text| vec![PromptText { role: "user".into(), text }])
    }

    async fn tools(&self, _expert: &str) -> Result<Vec<ToolSpec>, ExpertError> {
        Ok(Vec::new())
    }

    async fn call_tool(&self, call: ExpertToolCall) -> Result<ExpertCallOutcome, ExpertError> {
        Err(ExpertError::UnknownTool(call.tool))
    }

    async fn close(&self) {}
}

/// `draft_deed` needs `deed_type` (declared required); `notarize` takes an optional `deed` but
/// refuses any but D-17; `register` never answers in time.
fn notary() -> FakeExperts {
    let info = |name: &str, arguments: Vec<PromptArgument>| PromptInfo {
        name: name.into(),
        description: format!("The {name} prompt."),
        arguments,
    };
    FakeExperts {
        prompts: vec![
            info("draft_deed", vec![argument("deed_type", true)]),
            info("notarize", vec![argument("deed", false)]),
            info("register", Vec::new()),
        ],
        answer: |prompt, arguments| match (prompt, arguments.get("deed_type"), arguments.get("deed")) {
            ("draft_deed", Some(kind), _) => Ok(format!("Draft a deed of type {kind}.")),
            ("draft_deed", None, _) => Err(ExpertError::InvalidParams("Missing required arguments".into())),
            ("notarize", _, Some(deed)) if deed == "D-17" => Ok("Notarize the deed D-17.".into()),
            ("notarize", _, _) => Err(ExpertError::InvalidParams("the deed is not on record".into())),
            _ => Err(ExpertError::Timeout),
        },
        fetched: Mutex::new(Vec::new()),
    }
}

fn argument(name: &str, required: bool) -> PromptArgument {
    PromptArgument { name: name.into(), description: format!("The {name}."), required }
}

fn plan_reply() -> String {
    json!({"decision": "replace", "plan": [{"expert": "alpha", "task": "Prepare the deed"}], "next_task": 0,
           "clarification": null})
    .to_string()
}

fn scores(prompt: &str, arguments: &[(&str, &str)]) -> String {
    let arguments: Vec<Value> = arguments.iter().map(|(n, v)| json!({"name": n, "value": v})).collect();
    json!({"prompts": [{"name": prompt, "description": "", "match_confidence": 0.9, "arguments": arguments}]})
        .to_string()
}

fn done() -> String {
    json!({"is_completed": true, "explanation": "done", "confidence": 0.9}).to_string()
}

fn limits() -> Limits {
    Limits { max_steps: 20, deadline: None, reserve: Duration::ZERO, input_tokens: 100_000 }
}

async fn run(
    model: &ScriptedModel,
    experts: &FakeExperts,
    events: &dyn TurnObserver,
    plan: Option<PlanState>,
    message: &str,
) -> PlannerOutcome {
    let config = PlannerConfig::default();
    let planner = Planner { model, experts, config: &config, events };
    planner.run(plan, &[], message, &limits()).await.unwrap()
}

#[tokio::test]
async fn a_required_argument_nobody_filled_is_asked_for_and_the_answer_fills_it() {
    let (model, experts) = (ScriptedModel::default(), notary());
    model.push([plan_reply(), scores("draft_deed", &[])]);
    let asked = run(&model, &experts, &NoObserver, None, "Prepare my deed").await;
    assert_eq!(asked.ending, Ending::AwaitingClarification);
    assert!(asked.reply.contains("- deed_type: The deed_type."), "{}", asked.reply);
    assert!(experts.fetched().is_empty(), "asked before calling prompts/get");
    let plan = asked.plan.expect("the plan waits for the answer");
    let pending = plan.pending_arguments.as_ref().expect("the question is stored");
    assert_eq!(pending.asked, ["deed_type"]);
    assert_eq!(plan.selection, None);
    assert_eq!(model.requests().len(), 2);

    // The answer: no planning, the prompt is fetched with it, and the task runs.
    model.push(["Deed drafted.".to_owned(), done(), "Here is your deed.".to_owned()]);
    let answered = run(&model, &experts, &NoObserver, Some(plan), "compraventa").await;
    assert_eq!((answered.ending, answered.reply.as_str()), (Ending::Answered, "Here is your deed."));
    assert_eq!(answered.plan, None);
    let fetched = experts.fetched();
    assert_eq!(fetched.len(), 1);
    assert_eq!(fetched[0].1.get("deed_type").map(String::as_str), Some("compraventa"));
    let requests = model.requests();
    assert_eq!(requests.len(), 5);
    assert!(requests[2].system.contains("Draft a deed of type compraventa."), "{}", requests[2].system);
}

#[tokio::test]
async fn refused_values_are_asked_for_again_with_the_experts_words() {
    let (model, experts) = (ScriptedModel::default(), notary());
    model.push([plan_reply(), scores("notarize", &[("deed", "D-99")])]);
    let asked = run(&model, &experts, &NoObserver, None, "Notarize deed D-99").await;
    assert_eq!(asked.ending, Ending::AwaitingClarification);
    assert!(asked.reply.contains("the deed is not on record"), "{}", asked.reply);
    assert!(asked.reply.contains("- deed: The deed. (tried: \"D-99\")"), "{}", asked.reply);

    // A value over the bound is refused before it reaches the expert, and the question stays.
    let too_long = "D".repeat(MAX_ARGUMENT_CHARS + 1);
    let again = run(&model, &experts, &NoObserver, asked.plan, &too_long).await;
    assert!(again.reply.starts_with("That answer is longer than"), "{}", again.reply);
    assert!(again.plan.as_ref().is_some_and(|plan| plan.pending_arguments.is_some()));
    assert_eq!((experts.fetched().len(), model.requests().len()), (1, 2));

    model.push(["Notarized.".to_owned(), done(), "The deed is notarized.".to_owned()]);
    let answered = run(&model, &experts, &NoObserver, again.plan, "D-17").await;
    assert_eq!(answered.reply, "The deed is notarized.");
    assert!(model.requests()[2].system.contains("Notarize the deed D-17."));
}

#[tokio::test]
async fn none_or_skip_runs_the_task_without_the_prompt() {
    let (model, experts) = (ScriptedModel::default(), notary());
    model.push([plan_reply(), scores("draft_deed", &[])]);
    let asked = run(&model, &experts, &NoObserver, None, "Prepare my deed").await;
    model.push(["Done anyway.".to_owned(), done(), "Done.".to_owned()]);
    let answered = run(&model, &experts, &NoObserver, asked.plan, "skip").await;
    assert_eq!(answered.reply, "Done.");
    assert!(experts.fetched().is_empty());
    assert!(!model.requests()[2].system.contains("<expert-prompt"));
}

/// Keeps the streamed text.
#[derive(Default)]
struct Deltas(Mutex<String>);

impl TurnObserver for Deltas {
    fn event(&self, event: TurnEvent) {
        if let TurnEvent::MessageDelta { text } = event {
            self.0.lock().unwrap().push_str(&text);
        }
    }
}

#[tokio::test]
async fn a_prompt_that_fails_otherwise_is_named_in_the_final_reply() {
    let (model, experts) = (ScriptedModel::default(), notary());
    model.push([plan_reply(), scores("register", &[]), "Registered.".to_owned(), done(), "All done.".to_owned()]);
    let deltas = Deltas::default();
    let outcome = run(&model, &experts, &deltas, None, "Register the deed").await;
    assert_eq!(outcome.ending, Ending::Answered);
    let note = "Note: the prompt \"register\" of the expert alpha could not be fetched (the expert did not answer \
                in time), so its task ran without it.";
    assert_eq!(outcome.reply, format!("All done.\n\n{note}"));
    assert_eq!(*deltas.0.lock().unwrap(), outcome.reply, "the note streams with the answer");
    assert!(!model.requests()[2].system.contains("<expert-prompt"));
}
