//! The lines a measured turn writes: its `turn summary` log line and its Embedded Metric Format
//! documents, written straight into strings (see the parent module for what they carry).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::*;

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
pub(super) fn summary_line(turn: &Turn, duration: f64, storage: Option<&BTreeMap<String, u64>>) -> String {
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
        .int("cache_read_tokens", sum(|m| m.cache_read_tokens))
        .int("cache_write_tokens", sum(|m| m.cache_write_tokens))
        .opt_num("cost_usd", turn.cost_usd)
        .int("tool_calls", turn.tools.values().map(|t| t.calls).sum())
        .int("refused_tool_calls", turn.refused)
        .int("summaries", turn.summaries)
        .int("summary_failures", turn.summary_failures)
        .int("sandbox_executions", turn.sandbox_ms.len() as u64)
        .int("images_sent", turn.images_sent)
        .int("documents_sent", turn.documents_sent)
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
        one.int("calls", m.calls)
            .int("input_tokens", m.input_tokens)
            .int("output_tokens", m.output_tokens)
            .int("cache_read_tokens", m.cache_read_tokens)
            .int("cache_write_tokens", m.cache_write_tokens)
            .close();
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

pub(super) fn count_document(function: &str, name: &str, value: u64) -> String {
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
    metrics.extend([
        ("InputTokens", "Count"),
        ("OutputTokens", "Count"),
        ("CacheReadInputTokens", "Count"),
        ("CacheWriteInputTokens", "Count"),
    ]);
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
    line.int("InputTokens", stats.input_tokens)
        .int("OutputTokens", stats.output_tokens)
        .int("CacheReadInputTokens", stats.cache_read_tokens)
        .int("CacheWriteInputTokens", stats.cache_write_tokens);
    if stats.errors > 0 {
        line.int("ModelErrors", stats.errors);
    }
}

/// The turn's EMF lines: the turn (and its first model), then one per further model and one per
/// tool and outcome.
pub(super) fn emf_lines(function: &str, turn: &Turn, duration: f64) -> Vec<String> {
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
    if turn.images_sent + turn.documents_sent > 0 {
        counts.extend([("ImagesSent", "Count"), ("DocumentsSent", "Count")]);
    }
    // Dollars have no CloudWatch unit; the name says the currency. Unpriced turns write none.
    if turn.cost_usd.is_some() {
        counts.push(("TurnCostUSD", "None"));
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
        if turn.images_sent + turn.documents_sent > 0 {
            line.int("ImagesSent", turn.images_sent).int("DocumentsSent", turn.documents_sent);
        }
        if let Some(usd) = turn.cost_usd {
            line.num("TurnCostUSD", usd);
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
