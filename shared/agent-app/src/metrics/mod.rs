//! Per-turn metrics and the turn summary, from the spans a turn runs in: a tracing layer that adds
//! each closed `chat`, `execute_tool`, `summarize`, `session.load`, `catalog` and `commit` span
//! (see `agent_core::telemetry`) to its enclosing `turn` span, and when the turn span closes writes
//! one `turn summary` log line and the turn's CloudWatch Embedded Metric Format (EMF) lines to
//! stdout, where Lambda's log stream turns them into metrics with no API call of their own.
//!
//! One EMF document carries one value per dimension, so a turn writes one line for the turn and
//! its first model, and one more line per further model and per tool and outcome it used.
//! Dimensions are bounded: function, strategy, model, tool (built-in names; others are `expert` or
//! `other`), outcome, ending, status and error code; never a tenant or a session.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use agent_core::telemetry::{self, field, outcome};
use agent_core::turn::TurnReply;
use aws_store::CallCounter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Span, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

mod fields;
mod lines;

use fields::{RequestIdVisitor, StepFields, TurnFields};
use lines::{count_document, emf_lines, summary_line};

/// The CloudWatch namespace of every metric.
pub const NAMESPACE: &str = "AgentRuntime";
/// The span a turn runs in (`crate::turn::turn_span`).
const TURN: &str = "turn";
/// The field of the Lambda runtime's invocation span that names the request.
const REQUEST_ID: &str = "requestId";
/// Longest value kept of a dimension (a model id, say); CloudWatch allows 1,024 characters.
const MAX_DIMENSION_CHARS: usize = 250;
/// Most values one EMF member may hold (CloudWatch's limit); a turn makes far fewer calls.
const MAX_VALUES: usize = 100;

/// Where the lines go: stdout in the functions, a buffer in tests.
pub type Sink = Arc<dyn Fn(&str) + Send + Sync>;

/// The process's storage request counter, so a turn's summary can say what it asked of storage.
static STORAGE: OnceLock<CallCounter> = OnceLock::new();

/// Counts the turns' storage requests with `counter` (the one the stores report to).
pub fn count_storage(counter: &CallCounter) {
    let _ = STORAGE.set(counter.clone());
}

/// The function's name (`AWS_LAMBDA_FUNCTION_NAME`), the `Function` dimension of every metric.
pub fn function_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "local".to_owned()))
}

/// Writes `line` and a newline to stdout in one write, so it never interleaves with a log line.
fn stdout_line(line: &str) {
    let mut buffer = String::with_capacity(line.len() + 1);
    buffer.push_str(line);
    buffer.push('\n');
    let _ = std::io::stdout().lock().write_all(buffer.as_bytes());
}

fn stdout_sink() -> Sink {
    Arc::new(stdout_line)
}

/// The layer, writing to stdout with the function's name as the `Function` dimension; `None` when
/// `AGENT_METRICS=off` (no summary lines and no metrics: for measuring what they cost).
pub fn layer() -> Option<MetricsLayer> {
    enabled().then(|| MetricsLayer::new(function_name(), stdout_sink()))
}

/// False when `AGENT_METRICS=off`.
fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| !std::env::var("AGENT_METRICS").is_ok_and(|value| value.trim().eq_ignore_ascii_case("off")))
}

/// Writes one EMF line to stdout counting `value` of `name` for this function, outside any turn
/// (a background turn queued, a catalog index rebuilt).
pub fn put_count(name: &str, value: u64) {
    if !enabled() {
        return;
    }
    stdout_line(&count_document(function_name(), name, value));
}

/// Records how a turn ended on its span (from `crate::turn::turn_span`): `status` (the HTTP status, or
/// a queue record's `completed`, `failed` or `retried`), the error code if it failed, and from the
/// reply its ending, steps and whether it replayed an earlier delivery.
pub fn record_turn(span: &Span, status: impl std::fmt::Display, error_code: Option<&str>, reply: Option<&TurnReply>) {
    span.record("status", tracing::field::display(status));
    if let Some(code) = error_code {
        span.record("errorCode", code);
    }
    if let Some(reply) = reply {
        span.record("ending", ending_name(reply.ending));
        span.record("steps", reply.steps);
        span.record("replayed", reply.replayed);
        if let Some(usd) = reply.cost.usd {
            keep_cost(span, usd);
        }
        crate::traces::record_turn_usage(span, &reply.usage, reply.cost.usd);
    }
}

/// Keeps a turn's cost with the turn being measured. The turn span declares no field for it, so
/// it goes straight to the span's extensions in the registry (the functions' subscriber is one).
fn keep_cost(span: &Span, usd: f64) {
    span.with_subscriber(|(id, dispatch)| {
        let Some(registry) = dispatch.downcast_ref::<tracing_subscriber::Registry>() else { return };
        if let Some(data) = registry.span(id) {
            if let Some(turn) = data.extensions_mut().get_mut::<Turn>() {
                turn.cost_usd = Some(usd);
            }
        }
    });
}

fn ending_name(ending: agent_core::agent::Ending) -> &'static str {
    use agent_core::agent::Ending;
    match ending {
        Ending::Answered => "answered",
        Ending::StepLimit => "step_limit",
        Ending::Deadline => "deadline",
        Ending::Aborted => "aborted",
        Ending::PlanContinues => "plan_continues",
        Ending::AwaitingChoice => "awaiting_choice",
        Ending::AwaitingClarification => "awaiting_clarification",
        Ending::PlanFailed => "plan_failed",
        Ending::ContextFull => "context_full",
        Ending::AwaitingApproval => "awaiting_approval",
    }
}

/// The per-operation requests made between two [`CallCounter::operations`] snapshots, without
/// the operations that made none.
pub fn operations_since(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(operation, &count)| {
            let made = count.saturating_sub(before.get(operation).copied().unwrap_or(0));
            (made > 0).then(|| (operation.clone(), made))
        })
        .collect()
}

/// See the module's documentation.
pub struct MetricsLayer {
    function: String,
    sink: Sink,
}

impl MetricsLayer {
    /// A layer that names `function` in its metrics and hands each line to `sink`.
    pub fn new(function: &str, sink: Sink) -> Self {
        Self { function: function.to_owned(), sink }
    }
}

/// What the layer keeps of the Lambda runtime's invocation span.
struct Invocation {
    request_id: String,
}

/// A step of a turn being measured.
struct Step {
    started: Instant,
    fields: StepFields,
}

/// One model's calls in a turn.
#[derive(Default)]
struct ModelStats {
    calls: u64,
    errors: u64,
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
    latency_ms: Vec<f64>,
    first_token_ms: Vec<f64>,
}

/// One tool's calls with one outcome in a turn.
#[derive(Default)]
struct ToolStats {
    calls: u64,
    duration_ms: Vec<f64>,
}

/// A turn being measured: its span's fields and what its steps added.
#[derive(Default)]
struct Turn {
    started: Option<Instant>,
    request_id: Option<String>,
    fields: TurnFields,
    storage_before: Option<BTreeMap<String, u64>>,
    models: BTreeMap<String, ModelStats>,
    tools: BTreeMap<(String, String), ToolStats>,
    refused: u64,
    summaries: u64,
    summary_failures: u64,
    sandbox_ms: Vec<f64>,
    /// Images and PDF documents sent to models, counted once per request that carried them.
    images_sent: u64,
    documents_sent: u64,
    /// From the turn's start to the first delta of a streamed reply.
    first_token_ms: Option<f64>,
    storage_ms: BTreeMap<&'static str, f64>,
    /// The reply's cost in US dollars, when some call had a price ([`record_turn`] keeps it).
    cost_usd: Option<f64>,
}

fn is_step(name: &str) -> bool {
    matches!(
        name,
        telemetry::CHAT
            | telemetry::EXECUTE_TOOL
            | telemetry::SUMMARIZE
            | telemetry::SESSION_LOAD
            | telemetry::CATALOG
            | telemetry::COMMIT
    )
}

fn millis(since: Instant) -> f64 {
    (since.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

fn now_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |now| now.as_millis() as u64)
}

/// The `Tool` dimension: a built-in tool's name; an expert's tool (`{expert}__{tool}`) is `expert`
/// and any other name (one the model made up) `other`, so the model cannot add dimensions.
fn tool_label(name: &str) -> &str {
    use agent_core::tools::{ABORT, EXECUTE, FIND_SKILLS, LOAD_SKILL, TODO_READ, TODO_WRITE};
    if [LOAD_SKILL, FIND_SKILLS, EXECUTE, ABORT, TODO_READ, TODO_WRITE].contains(&name)
        || agent_core::vfs::FILE_TOOL_NAMES.contains(&name)
    {
        name
    } else if name.contains("__") {
        "expert"
    } else {
        "other"
    }
}

fn dimension(value: &str) -> String {
    value.chars().take(MAX_DIMENSION_CHARS).collect()
}

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let name = attrs.metadata().name();
        if name == TURN {
            let mut turn = Turn { started: Some(Instant::now()), ..Turn::default() };
            attrs.record(&mut turn.fields);
            turn.request_id = span
                .scope()
                .skip(1)
                .find_map(|parent| parent.extensions().get::<Invocation>().map(|inv| inv.request_id.clone()));
            turn.storage_before = STORAGE.get().map(CallCounter::operations);
            span.extensions_mut().insert(turn);
        } else if is_step(name) {
            let mut fields = StepFields::default();
            attrs.record(&mut fields);
            span.extensions_mut().insert(Step { started: Instant::now(), fields });
        } else if attrs.metadata().fields().field(REQUEST_ID).is_some() {
            let mut visitor = RequestIdVisitor(None);
            attrs.record(&mut visitor);
            if let Some(request_id) = visitor.0 {
                span.extensions_mut().insert(Invocation { request_id });
            }
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(turn) = extensions.get_mut::<Turn>() {
            values.record(&mut turn.fields);
        } else if let Some(step) = extensions.get_mut::<Step>() {
            values.record(&mut step.fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let name = span.name();
        if name == TURN {
            if let Some(turn) = span.extensions_mut().remove::<Turn>() {
                self.finish(turn);
            }
            return;
        }
        let Some(step) = span.extensions_mut().remove::<Step>() else { return };
        let Some(parent) = span.scope().skip(1).find(|parent| parent.name() == TURN) else { return };
        let mut extensions = parent.extensions_mut();
        let Some(turn) = extensions.get_mut::<Turn>() else { return };
        let duration = millis(step.started);
        let fields = step.fields;
        match name {
            telemetry::CHAT => {
                let model = fields.model.as_deref().filter(|model| !model.is_empty()).unwrap_or("default");
                let stats = turn.models.entry(dimension(model)).or_default();
                stats.calls += 1;
                stats.errors += u64::from(fields.error.is_some());
                stats.input_tokens += fields.input_tokens;
                stats.output_tokens += fields.output_tokens;
                stats.cache_read_tokens += fields.cache_read_tokens;
                stats.cache_write_tokens += fields.cache_write_tokens;
                stats.latency_ms.push(duration);
                turn.images_sent += fields.images;
                turn.documents_sent += fields.documents;
                if let Some(first) = fields.first_token_ms {
                    stats.first_token_ms.push(first);
                    if let Some(started) = turn.started {
                        let since_turn = step.started.saturating_duration_since(started).as_secs_f64() * 1000.0 + first;
                        let since_turn = (since_turn * 1000.0).round() / 1000.0;
                        turn.first_token_ms = Some(turn.first_token_ms.map_or(since_turn, |f| f.min(since_turn)));
                    }
                }
            }
            telemetry::EXECUTE_TOOL => {
                let tool = tool_label(fields.tool.as_deref().unwrap_or("")).to_owned();
                let outcome = match fields.outcome.as_deref() {
                    Some(outcome::REFUSED) => outcome::REFUSED,
                    Some(outcome::ERROR) => outcome::ERROR,
                    _ => outcome::OK,
                };
                if outcome == outcome::REFUSED {
                    turn.refused += 1;
                } else if tool == agent_core::tools::EXECUTE {
                    turn.sandbox_ms.push(duration);
                }
                let stats = turn.tools.entry((tool, outcome.to_owned())).or_default();
                stats.calls += 1;
                stats.duration_ms.push(duration);
            }
            telemetry::SUMMARIZE => {
                if fields.outcome.as_deref() == Some(outcome::OK) {
                    turn.summaries += 1;
                } else {
                    turn.summary_failures += 1;
                }
            }
            telemetry::SESSION_LOAD => {
                turn.storage_ms.insert("session_load_ms", duration);
            }
            telemetry::CATALOG => {
                turn.storage_ms.insert("catalog_ms", duration);
            }
            telemetry::COMMIT => {
                turn.storage_ms.insert("commit_ms", duration);
            }
            _ => {}
        }
    }
}

impl MetricsLayer {
    /// Writes a closed turn's summary line and EMF lines.
    fn finish(&self, turn: Turn) {
        let duration = turn.started.map_or(0.0, millis);
        let storage = match (STORAGE.get(), &turn.storage_before) {
            (Some(counter), Some(before)) => Some(operations_since(before, &counter.operations())),
            _ => None,
        };
        (self.sink)(&summary_line(&turn, duration, storage.as_ref()));
        for line in emf_lines(&self.function, &turn, duration) {
            (self.sink)(&line);
        }
    }
}

#[cfg(test)]
mod tests;
