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
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use agent_core::telemetry::{self, field, outcome};
use agent_core::turn::TurnReply;
use aws_store::CallCounter;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Span, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The CloudWatch namespace of every metric.
pub const NAMESPACE: &str = "AgentRuntime";
/// The span a turn runs in (`crate::turn_span`).
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

/// Records how a turn ended on its span (from [`crate::turn_span`]): `status` (the HTTP status, or
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
    }
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
    }
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

#[derive(Default)]
struct StepFields {
    model: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    first_token_ms: Option<f64>,
    error: Option<String>,
    tool: Option<String>,
    outcome: Option<String>,
}

impl Visit for StepFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            field::REQUEST_MODEL => self.model = Some(value.to_owned()),
            field::ERROR_TYPE => self.error = Some(value.to_owned()),
            field::TOOL_NAME => self.tool = Some(value.to_owned()),
            field::OUTCOME => self.outcome = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            field::INPUT_TOKENS => self.input_tokens = value,
            field::OUTPUT_TOKENS => self.output_tokens = value,
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or(0));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == field::TIME_TO_FIRST_TOKEN_MS {
            self.first_token_ms = Some(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

/// One model's calls in a turn.
#[derive(Default)]
struct ModelStats {
    calls: u64,
    errors: u64,
    input_tokens: u64,
    output_tokens: u64,
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
    /// From the turn's start to the first delta of a streamed reply.
    first_token_ms: Option<f64>,
    storage_ms: BTreeMap<&'static str, f64>,
}

#[derive(Default)]
struct TurnFields {
    turn_id: Option<String>,
    session_id: Option<String>,
    strategy: Option<String>,
    tenant: Option<String>,
    status: Option<String>,
    error_code: Option<String>,
    ending: Option<String>,
    steps: Option<u64>,
    replayed: bool,
}

impl Visit for TurnFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "turnId" => &mut self.turn_id,
            "sessionId" => &mut self.session_id,
            "strategy" => &mut self.strategy,
            "tenant" => &mut self.tenant,
            "status" => &mut self.status,
            "errorCode" => &mut self.error_code,
            "ending" => &mut self.ending,
            _ => return,
        };
        *slot = Some(value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "steps" => self.steps = Some(value),
            _ => self.record_str(field, &value.to_string()),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or(0));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "replayed" {
            self.replayed = value;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

struct RequestIdVisitor(Option<String>);

impl Visit for RequestIdVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == REQUEST_ID {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == REQUEST_ID {
            self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
        }
    }
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
                stats.latency_ms.push(duration);
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
            (Some(counter), Some(before)) => Some(crate::operations_since(before, &counter.operations())),
            _ => None,
        };
        (self.sink)(&summary_line(&turn, duration, storage.as_ref()));
        for line in emf_lines(&self.function, &turn, duration) {
            (self.sink)(&line);
        }
    }
}

/// A JSON object written straight into a string: the lines are written once per turn, and building
/// `serde_json::Value`s for them cost more than the JSON logs of the whole turn.
struct Object<'a> {
    out: &'a mut String,
    empty: bool,
}

impl<'a> Object<'a> {
    fn open(out: &'a mut String) -> Self {
        out.push('{');
        Self { out, empty: true }
    }

    fn key(&mut self, key: &str) -> &mut String {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        string(self.out, key);
        self.out.push(':');
        self.out
    }

    fn str(&mut self, key: &str, value: &str) -> &mut Self {
        string(self.key(key), value);
        self
    }

    fn opt_str(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        match value {
            Some(value) => self.str(key, value),
            None => self.raw(key, "null"),
        }
    }

    fn int(&mut self, key: &str, value: u64) -> &mut Self {
        let _ = write!(self.key(key), "{value}");
        self
    }

    fn num(&mut self, key: &str, value: f64) -> &mut Self {
        number(self.key(key), value);
        self
    }

    fn opt_num(&mut self, key: &str, value: Option<f64>) -> &mut Self {
        match value {
            Some(value) => self.num(key, value),
            None => self.raw(key, "null"),
        }
    }

    /// `value` is JSON already.
    fn raw(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key).push_str(value);
        self
    }

    /// An array of numbers: EMF takes one as many samples of a metric (for its percentiles).
    fn samples(&mut self, key: &str, values: &[f64]) -> &mut Self {
        let out = self.key(key);
        out.push('[');
        for (index, value) in values.iter().take(MAX_VALUES).enumerate() {
            if index > 0 {
                out.push(',');
            }
            number(out, *value);
        }
        out.push(']');
        self
    }

    fn close(&mut self) {
        self.out.push('}');
    }
}

/// `text` as a JSON string.
fn string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A finite number as JSON (durations and counts are never anything else).
fn number(out: &mut String, value: f64) {
    if value.is_finite() {
        let _ = write!(out, "{value}");
    } else {
        out.push('0');
    }
}

/// The `turn summary` line, shaped as the JSON log lines are (`level`, `fields`, `spans`).
fn summary_line(turn: &Turn, duration: f64, storage: Option<&BTreeMap<String, u64>>) -> String {
    let f = &turn.fields;
    let mut out = String::with_capacity(1024);
    let mut line = Object::open(&mut out);
    line.str("level", "INFO");
    let mut fields = Object::open(line.key("fields"));
    fields
        .str("message", "turn summary")
        .opt_str("requestId", turn.request_id.as_deref())
        .opt_str("turnId", f.turn_id.as_deref())
        .opt_str("sessionId", f.session_id.as_deref())
        .opt_str("strategy", f.strategy.as_deref())
        .opt_str("tenant", f.tenant.as_deref())
        .str("ending", f.ending.as_deref().unwrap_or("error"))
        .opt_str("status", f.status.as_deref())
        .opt_str("errorCode", f.error_code.as_deref())
        .raw("replayed", if f.replayed { "true" } else { "false" });
    match f.steps {
        Some(steps) => fields.int("steps", steps),
        None => fields.raw("steps", "null"),
    };
    let sum = |of: fn(&ModelStats) -> u64| turn.models.values().map(of).sum::<u64>();
    fields
        .int("model_calls", sum(|m| m.calls))
        .int("model_errors", sum(|m| m.errors))
        .int("input_tokens", sum(|m| m.input_tokens))
        .int("output_tokens", sum(|m| m.output_tokens))
        .int("tool_calls", turn.tools.values().map(|t| t.calls).sum())
        .int("refused_tool_calls", turn.refused)
        .int("summaries", turn.summaries)
        .int("summary_failures", turn.summary_failures)
        .int("sandbox_executions", turn.sandbox_ms.len() as u64)
        .num("duration_ms", duration)
        .opt_num("time_to_first_token_ms", turn.first_token_ms);
    for (name, millis) in &turn.storage_ms {
        fields.num(name, *millis);
    }
    if let Some(storage) = storage {
        fields.int("storage_requests", storage.values().sum());
        let mut operations = Object::open(fields.key("storage_operations"));
        for (operation, count) in storage {
            operations.int(operation, *count);
        }
        operations.close();
    }
    let mut models = Object::open(fields.key("models"));
    for (model, m) in &turn.models {
        let mut one = Object::open(models.key(model));
        one.int("calls", m.calls).int("input_tokens", m.input_tokens).int("output_tokens", m.output_tokens).close();
    }
    models.close();
    let mut tools = Object::open(fields.key("tools"));
    let mut current: Option<&str> = None;
    let mut outcomes: Option<Object> = None;
    for ((tool, outcome), stats) in &turn.tools {
        if current != Some(tool.as_str()) {
            if let Some(mut done) = outcomes.take() {
                done.close();
            }
            current = Some(tool.as_str());
            outcomes = Some(Object::open(tools.key(tool)));
        }
        if let Some(outcomes) = outcomes.as_mut() {
            outcomes.int(outcome, stats.calls);
        }
    }
    if let Some(mut done) = outcomes {
        done.close();
    }
    tools.close();
    fields.close();
    let spans = line.key("spans");
    spans.push('[');
    if let Some(request_id) = &turn.request_id {
        let mut span = Object::open(spans);
        span.str("name", "Lambda runtime invoke").str("requestId", request_id).close();
        spans.push(',');
    }
    let mut span = Object::open(spans);
    span.str("name", TURN)
        .opt_str("turnId", f.turn_id.as_deref())
        .opt_str("sessionId", f.session_id.as_deref())
        .opt_str("strategy", f.strategy.as_deref())
        .opt_str("tenant", f.tenant.as_deref())
        .close();
    spans.push(']');
    line.close();
    out
}

/// A directive of an EMF line: its dimension sets and its metrics (name, unit).
type Directive<'a> = (&'a [&'a [&'a str]], Vec<(&'a str, &'a str)>);

/// A metric directive: its dimension sets and its metrics (name, unit).
fn directive(out: &mut String, dimensions: &[&[&str]], metrics: &[(&str, &str)]) {
    let mut directive = Object::open(out);
    directive.str("Namespace", NAMESPACE);
    let sets = directive.key("Dimensions");
    sets.push('[');
    for (index, set) in dimensions.iter().enumerate() {
        if index > 0 {
            sets.push(',');
        }
        sets.push('[');
        for (index, name) in set.iter().enumerate() {
            if index > 0 {
                sets.push(',');
            }
            string(sets, name);
        }
        sets.push(']');
    }
    sets.push(']');
    let list = directive.key("Metrics");
    list.push('[');
    for (index, (name, unit)) in metrics.iter().enumerate() {
        if index > 0 {
            list.push(',');
        }
        Object::open(list).str("Name", name).str("Unit", unit).close();
    }
    list.push(']');
    directive.close();
}

/// An EMF line: its directives, then its members (written by `members`), then the turn's ids (not
/// dimensions: they only let a line be found next to the turn's other lines).
fn document(directives: &[Directive], turn: Option<&Turn>, members: impl FnOnce(&mut Object)) -> String {
    let mut out = String::with_capacity(1024);
    let mut line = Object::open(&mut out);
    let mut aws = Object::open(line.key("_aws"));
    aws.int("Timestamp", now_millis());
    let list = aws.key("CloudWatchMetrics");
    list.push('[');
    for (index, (dimensions, metrics)) in directives.iter().enumerate() {
        if index > 0 {
            list.push(',');
        }
        directive(list, dimensions, metrics);
    }
    list.push(']');
    aws.close();
    members(&mut line);
    if let Some(turn) = turn {
        if let Some(turn_id) = &turn.fields.turn_id {
            line.str("turnId", turn_id);
        }
        if let Some(request_id) = &turn.request_id {
            line.str("requestId", request_id);
        }
    }
    line.close();
    out
}

fn count_document(function: &str, name: &str, value: u64) -> String {
    let only_function: &[&[&str]] = &[&["Function"]];
    document(&[(only_function, vec![(name, "Count")])], None, |line| {
        line.str("Function", function).int(name, value);
    })
}

const MODEL_DIMENSIONS: &[&[&str]] = &[&["Function", "Model"]];

/// The metrics of one model's calls in a turn.
fn model_metrics(stats: &ModelStats) -> Vec<(&'static str, &'static str)> {
    let mut metrics = vec![("ModelCalls", "Count"), ("ModelLatency", "Milliseconds")];
    if !stats.first_token_ms.is_empty() {
        metrics.push(("TimeToFirstToken", "Milliseconds"));
    }
    metrics.extend([("InputTokens", "Count"), ("OutputTokens", "Count")]);
    if stats.errors > 0 {
        metrics.push(("ModelErrors", "Count"));
    }
    metrics
}

fn model_members(line: &mut Object, model: &str, stats: &ModelStats) {
    line.str("Model", model).int("ModelCalls", stats.calls).samples("ModelLatency", &stats.latency_ms);
    if !stats.first_token_ms.is_empty() {
        line.samples("TimeToFirstToken", &stats.first_token_ms);
    }
    line.int("InputTokens", stats.input_tokens).int("OutputTokens", stats.output_tokens);
    if stats.errors > 0 {
        line.int("ModelErrors", stats.errors);
    }
}

/// The turn's EMF lines: the turn (and its first model), then one per further model and one per
/// tool and outcome.
fn emf_lines(function: &str, turn: &Turn, duration: f64) -> Vec<String> {
    const TURNS: &[&[&str]] = &[
        &["Function"],
        &["Function", "Strategy"],
        &["Function", "Ending"],
        &["Function", "Status"],
        &["Function", "ErrorCode"],
    ];
    const DURATION: &[&[&str]] = &[&["Function"], &["Function", "Strategy"]];
    const COUNTS: &[&[&str]] = &[&["Function"]];
    const TOOLS: &[&[&str]] = &[&["Function", "Tool", "Outcome"], &["Function", "Tool"]];
    let f = &turn.fields;
    let status = f.status.as_deref().unwrap_or("unknown");
    let background = match status {
        "completed" => Some("BackgroundTurnsCompleted"),
        "failed" => Some("BackgroundTurnsFailed"),
        "retried" => Some("BackgroundTurnsRetried"),
        _ => None,
    };
    let mut counts: Vec<(&str, &str)> = vec![("RefusedToolCalls", "Count"), ("Summaries", "Count")];
    if f.replayed {
        counts.push(("IdempotentReplays", "Count"));
    }
    if let Some(name) = background {
        counts.push((name, "Count"));
    }
    if !turn.sandbox_ms.is_empty() {
        counts.extend([("SandboxExecutions", "Count"), ("SandboxDuration", "Milliseconds")]);
    }
    let mut directives: Vec<Directive> =
        vec![(TURNS, vec![("Turns", "Count")]), (DURATION, vec![("TurnDuration", "Milliseconds")]), (COUNTS, counts)];
    let mut models = turn.models.iter();
    let first = models.next();
    if let Some((_, stats)) = first {
        directives.push((MODEL_DIMENSIONS, model_metrics(stats)));
    }
    let mut lines = vec![document(&directives, Some(turn), |line| {
        line.str("Function", function)
            .str("Strategy", f.strategy.as_deref().unwrap_or("skills"))
            .str("Ending", f.ending.as_deref().unwrap_or("error"))
            .str("Status", &dimension(status))
            .str("ErrorCode", &dimension(f.error_code.as_deref().unwrap_or("none")))
            .int("Turns", 1)
            .num("TurnDuration", duration)
            .int("RefusedToolCalls", turn.refused)
            .int("Summaries", turn.summaries);
        if f.replayed {
            line.int("IdempotentReplays", 1);
        }
        if let Some(name) = background {
            line.int(name, 1);
        }
        if !turn.sandbox_ms.is_empty() {
            line.int("SandboxExecutions", turn.sandbox_ms.len() as u64).samples("SandboxDuration", &turn.sandbox_ms);
        }
        if let Some((model, stats)) = first {
            model_members(line, model, stats);
        }
    })];
    for (model, stats) in models {
        lines.push(document(&[(MODEL_DIMENSIONS, model_metrics(stats))], Some(turn), |line| {
            line.str("Function", function);
            model_members(line, model, stats);
        }));
    }
    for ((tool, outcome), stats) in &turn.tools {
        let metrics = vec![("ToolCalls", "Count"), ("ToolDuration", "Milliseconds")];
        lines.push(document(&[(TOOLS, metrics)], Some(turn), |line| {
            line.str("Function", function)
                .str("Tool", tool)
                .str("Outcome", outcome)
                .int("ToolCalls", stats.calls)
                .samples("ToolDuration", &stats.duration_ms);
        }));
    }
    lines
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::{json, Value};
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Runs `turn` under a subscriber with only the metrics layer; returns the lines it wrote.
    fn lines_of(turn: impl FnOnce()) -> Vec<Value> {
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let written = lines.clone();
        let sink: Sink = Arc::new(move |line: &str| written.lock().unwrap().push(line.to_owned()));
        let subscriber = tracing_subscriber::registry().with(MetricsLayer::new("fn", sink));
        tracing::subscriber::with_default(subscriber, turn);
        let lines = lines.lock().unwrap();
        lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect()
    }

    fn chat(model: &str, input: u64, output: u64) {
        let span = tracing::info_span!(
            "chat",
            gen_ai.request.model = model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            time_to_first_token_ms = tracing::field::Empty,
        );
        span.record(field::INPUT_TOKENS, input);
        span.record(field::OUTPUT_TOKENS, output);
        span.record(field::TIME_TO_FIRST_TOKEN_MS, 5.0);
    }

    fn tool(name: &str, result: &str) {
        let span = telemetry::tool_span(name, "call-1");
        span.record(field::OUTCOME, result);
    }

    #[test]
    fn a_turn_writes_its_summary_and_emf_lines() {
        let lines = lines_of(|| {
            let invocation = tracing::info_span!("Lambda runtime invoke", requestId = "req-9");
            let _entered = invocation.enter();
            let span = tracing::info_span!(
                "turn",
                turnId = "s/1",
                sessionId = "s",
                strategy = "skills",
                tenant = "abc",
                status = tracing::field::Empty,
                errorCode = tracing::field::Empty,
                ending = tracing::field::Empty,
                steps = tracing::field::Empty,
                replayed = tracing::field::Empty,
            );
            span.in_scope(|| {
                chat("m1", 100, 10);
                tool("read_file", outcome::OK);
                tool("read_file", outcome::OK);
                tool("made_up", outcome::REFUSED);
                chat("m1", 120, 20);
                chat("m2", 7, 3);
                telemetry::summarize_span().record(field::OUTCOME, outcome::OK);
            });
            span.record("status", 200);
            span.record("ending", "answered");
            span.record("steps", 2u64);
        });
        let summary = &lines[0]["fields"];
        assert_eq!(summary["message"], "turn summary");
        assert_eq!(summary["requestId"], "req-9");
        assert_eq!((summary["model_calls"].as_u64(), summary["input_tokens"].as_u64()), (Some(3), Some(227)));
        assert_eq!((summary["tool_calls"].as_u64(), summary["refused_tool_calls"].as_u64()), (Some(3), Some(1)));
        assert_eq!(summary["tools"]["read_file"]["ok"], 2);
        assert_eq!(summary["tools"]["other"]["refused"], 1, "a made-up name is not a dimension");
        assert_eq!((summary["status"].as_str(), summary["ending"].as_str()), (Some("200"), Some("answered")));
        assert!(summary["time_to_first_token_ms"].as_f64().is_some());

        let turn = &lines[1];
        assert_eq!((turn["Turns"].as_u64(), turn["Status"].as_str()), (Some(1), Some("200")));
        assert_eq!((turn["Model"].as_str(), turn["ModelCalls"].as_u64()), (Some("m1"), Some(2)));
        assert_eq!(turn["InputTokens"], 220);
        assert_eq!(turn["ModelLatency"].as_array().map(Vec::len), Some(2), "one sample per call");
        assert_eq!(turn["Summaries"], 1);
        assert!(turn.get("tenant").is_none() && turn.get("sessionId").is_none());
        let names: Vec<&str> = turn["_aws"]["CloudWatchMetrics"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["Metrics"].as_array().unwrap().iter().map(|m| m["Name"].as_str().unwrap()))
            .collect();
        assert!(names.contains(&"Turns") && names.contains(&"TimeToFirstToken"), "{names:?}");
        assert_eq!((lines[2]["Model"].as_str(), lines[2]["InputTokens"].as_u64()), (Some("m2"), Some(7)));
        let tools: Vec<(&str, &str, u64)> = lines[3..]
            .iter()
            .map(|l| (l["Tool"].as_str().unwrap(), l["Outcome"].as_str().unwrap(), l["ToolCalls"].as_u64().unwrap()))
            .collect();
        assert_eq!(tools, [("other", "refused", 1), ("read_file", "ok", 2)]);
    }

    #[test]
    fn steps_outside_a_turn_are_not_counted() {
        let lines = lines_of(|| chat("m", 1, 1));
        assert!(lines.is_empty());
    }

    /// The spans and events of a warm turn like the benchmark's: the storage steps, 3 model calls,
    /// 2 tool calls and the loop's lines.
    fn synthetic_turn() {
        let span = tracing::info_span!(
            "turn",
            turnId = "s/1",
            sessionId = "s",
            strategy = "skills",
            tenant = "abc",
            status = tracing::field::Empty,
            errorCode = tracing::field::Empty,
            ending = tracing::field::Empty,
            steps = tracing::field::Empty,
            replayed = tracing::field::Empty,
        );
        span.in_scope(|| {
            drop(telemetry::storage_span(telemetry::SESSION_LOAD));
            drop(telemetry::storage_span(telemetry::CATALOG));
            for step in 0..3 {
                chat("m1", 100, 10);
                if step < 2 {
                    tracing::info!(tool = "read_file", step, "tool call");
                    tool("read_file", outcome::OK);
                }
            }
            drop(telemetry::storage_span(telemetry::COMMIT));
            tracing::info!(steps = 3, "turn committed");
        });
        span.record("status", 200);
        span.record("ending", "answered");
    }

    /// CPU per turn of the JSON logs alone and with this layer, over synthetic turns in this process
    /// (`cargo test -p agent-app --release metrics::tests::cost -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn cost() {
        const TURNS: u32 = 20_000;
        let json = || {
            tracing_subscriber::fmt::layer().json().with_current_span(false).without_time().with_writer(std::io::sink)
        };
        let run = |name: &str, dispatch: tracing::Dispatch| {
            tracing::dispatcher::with_default(&dispatch, || {
                let started = std::time::Instant::now();
                for _ in 0..TURNS {
                    synthetic_turn();
                }
                println!("{name}: {:.1} µs per turn", started.elapsed().as_secs_f64() * 1e6 / f64::from(TURNS));
            });
        };
        let drop_lines: Sink = Arc::new(|line: &str| {
            std::hint::black_box(line);
        });
        let lines = lines_of(synthetic_turn);
        let bytes: usize = lines.iter().map(|line| line.to_string().len()).sum();
        // (Re-serialised, so about the size written.)
        println!("{} lines, {bytes} bytes per turn", lines.len());
        let mut turn = Turn { started: Some(Instant::now()), ..Turn::default() };
        turn.models.insert("m1".into(), ModelStats { calls: 3, latency_ms: vec![1.0, 2.0, 3.0], ..Default::default() });
        turn.tools.insert(("read_file".into(), "ok".into()), ToolStats { calls: 2, duration_ms: vec![1.0, 2.0] });
        let started = std::time::Instant::now();
        for _ in 0..TURNS {
            std::hint::black_box(summary_line(&turn, 1.0, None));
            std::hint::black_box(emf_lines("fn", &turn, 1.0));
        }
        println!("the lines alone: {:.1} µs per turn", started.elapsed().as_secs_f64() * 1e6 / f64::from(TURNS));
        for _ in 0..2 {
            run("no subscriber", tracing::Dispatch::none());
            run("JSON logs", tracing::Dispatch::new(tracing_subscriber::registry().with(json())));
            let both = tracing_subscriber::registry().with(json()).with(MetricsLayer::new("fn", drop_lines.clone()));
            run("JSON logs and metrics", tracing::Dispatch::new(both));
        }
    }

    #[test]
    fn a_count_is_one_emf_document() {
        let document: Value = serde_json::from_str(&count_document("skills-index", "CatalogIndexRebuilds", 2)).unwrap();
        assert_eq!(document["CatalogIndexRebuilds"], 2);
        assert_eq!(document["_aws"]["CloudWatchMetrics"][0]["Namespace"], NAMESPACE);
        assert_eq!(document["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function"]]));
    }
}
