//! The span fields the layer reads: a step's (`chat`, `execute_tool`, ...), the turn's, and the
//! Lambda runtime invocation's request id.

use tracing::field::{Field, Visit};

use super::*;

#[derive(Default)]
pub(super) struct StepFields {
    pub(super) model: Option<String>,
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) cache_read_tokens: u64,
    pub(super) cache_write_tokens: u64,
    pub(super) first_token_ms: Option<f64>,
    pub(super) error: Option<String>,
    pub(super) tool: Option<String>,
    pub(super) outcome: Option<String>,
    pub(super) images: u64,
    pub(super) documents: u64,
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
            field::CACHE_READ_TOKENS => self.cache_read_tokens = value,
            field::CACHE_WRITE_TOKENS => self.cache_write_tokens = value,
            field::REQUEST_IMAGES => self.images = value,
            field::REQUEST_DOCUMENTS => self.documents = value,
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

#[derive(Default)]
pub(super) struct TurnFields {
    pub(super) turn_id: Option<String>,
    pub(super) session_id: Option<String>,
    pub(super) strategy: Option<String>,
    pub(super) tenant: Option<String>,
    pub(super) status: Option<String>,
    pub(super) error_code: Option<String>,
    pub(super) ending: Option<String>,
    pub(super) steps: Option<u64>,
    pub(super) replayed: bool,
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

pub(super) struct RequestIdVisitor(pub(super) Option<String>);

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
