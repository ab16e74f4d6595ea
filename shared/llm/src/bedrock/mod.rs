//! Amazon Bedrock provider on the Converse API (`Converse` buffered, `ConverseStream` streamed) through
//! the AWS SDK, with the function's IAM credentials, converting to and from core types.

use std::time::Duration;

use agent_ports::{
    ChatModel, ChatRequest, ChatResponse, DeltaSink, FileInput, JsonSchemaFormat, Message, ModelError, ToolCall, Usage,
};
use async_trait::async_trait;
use aws_config::SdkConfig;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::config::timeout::TimeoutConfig;
use aws_sdk_bedrockruntime::config::StalledStreamProtectionConfig;
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse::ConverseError;
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::error::ConverseStreamOutputError;
use aws_sdk_bedrockruntime::types::{
    self as wire, ContentBlock, ContentBlockDelta, ContentBlockStart, ConversationRole, ConverseOutput,
    ConverseStreamOutput, InferenceConfiguration, SpecificToolChoice, SystemContentBlock, Tool, ToolConfiguration,
    ToolInputSchema, ToolResultBlock, ToolResultContentBlock, ToolSpecification, ToolUseBlock,
};
use aws_sdk_bedrockruntime::Client;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::event_stream::RawMessage;
use aws_smithy_types::{Document, Number};
use serde_json::{Map, Value};

use crate::config::{FileInputSetting, LlmConfig, PromptCache, ProviderKind};
use crate::retry::{retry, retry_streamed, truncate, Attempt, RetryPolicy, Watched, MAX_MESSAGE_CHARS};
use crate::stream::MAX_STREAM_BYTES;
use crate::structured::{self, object_or_empty};

mod errors;
mod reply;
mod request;
mod stream;

use errors::*;
use reply::*;
use request::*;
use stream::*;

const PROVIDER: &str = "bedrock";
/// Description of the tool that carries a structured reply (see [`JsonSchemaFormat`]).
const STRUCTURED_TOOL_DESCRIPTION: &str = "Respond with the structured result.";
/// Description of a tool declared only because the history uses it (see [`to_wire`]).
const HISTORY_TOOL_DESCRIPTION: &str = "A tool used earlier in this conversation; it is not available now.";
/// Bedrock rejects a tool result without content, so an empty one says so.
const EMPTY_TOOL_RESULT: &str = "(no output)";
/// Most content blocks one streamed reply may carry (their `contentBlockIndex`).
const MAX_STREAMED_BLOCKS: usize = 64;
/// Error kinds worth another attempt: throttling, capacity, a model still loading, passing faults.
const RETRYABLE_KINDS: [&str; 6] = [
    "ThrottlingException",
    "ServiceUnavailableException",
    "ModelNotReadyException",
    "InternalServerException",
    "ModelTimeoutException",
    "ModelStreamErrorException",
];

/// A chat model reached through Bedrock's `Converse` and `ConverseStream` operations.
pub struct BedrockModel {
    client: Client,
    model: String,
    max_tokens: u32,
    /// For a streamed call, the longest silence allowed between two events.
    timeout: Duration,
    files: FileInputSetting,
    cache: PromptCache,
    retry: RetryPolicy,
}

impl BedrockModel {
    /// Region and credentials come from the standard AWS chain (environment, profile, the Lambda
    /// role). The endpoint is `LLM_BASE_URL` when set, else `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` (or
    /// the profile's `services` section), else the region's. The global `AWS_ENDPOINT_URL` is
    /// deliberately not followed: here it points the storage clients at an emulator, which does
    /// not speak Bedrock.
    pub async fn new(config: &LlmConfig) -> Result<Self, ModelError> {
        let loaded = aws_http::load_config().await;
        let mut builder = loaded.into_builder();
        builder.set_endpoint_url(None);
        Self::from_sdk_config(&builder.build(), config)
    }

    /// Builds the client from an SDK configuration made by the caller (tests give static credentials).
    /// The SDK's own retries are off, so [`RetryPolicy`] is the one place that retries and counts.
    pub fn from_sdk_config(sdk: &SdkConfig, config: &LlmConfig) -> Result<Self, ModelError> {
        if sdk.region().is_none() {
            return Err(ModelError::Config(format!("{PROVIDER}: no AWS region is configured; set AWS_REGION")));
        }
        let timeouts = TimeoutConfig::builder()
            .operation_attempt_timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build();
        let mut builder = aws_sdk_bedrockruntime::config::Builder::from(sdk)
            .retry_config(RetryConfig::disabled())
            .timeout_config(timeouts)
            // A model may think in silence for a while; the silence bound is ours (`timeout`).
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled());
        if !config.base_url.is_empty() {
            builder = builder.endpoint_url(&config.base_url);
        }
        Ok(BedrockModel {
            client: Client::from_conf(builder.build()),
            model: config.model.clone(),
            max_tokens: config.max_tokens,
            timeout: config.timeout,
            files: config.file_input,
            cache: config.prompt_cache.clone(),
            retry: RetryPolicy::from_config(config),
        })
    }

    /// The model id (or inference profile) sent with each request.
    pub fn model_name(&self) -> &str {
        &self.model
    }

    /// What `model` may be shown: the configured model's, or a request's own model's, by its id.
    fn file_input_of(&self, model: &str) -> FileInput {
        self.files.resolve(ProviderKind::Bedrock, model)
    }

    async fn converse_once(&self, model: &str, request: &WireRequest) -> Attempt<Reply> {
        let sent = self.client.converse().model_id(model).with_request(request).send().await;
        match sent {
            Ok(output) => match Reply::from_output(output.output, output.stop_reason, output.usage) {
                Ok(reply) => Attempt::Done(reply),
                Err(error) => Attempt::Fail(error),
            },
            Err(error) => sdk_failure(error, |raw: &HttpResponse| Some(raw.status().as_u16())),
        }
    }

    async fn stream_once(&self, model: &str, request: &WireRequest, sink: &dyn DeltaSink) -> Attempt<Reply> {
        let sent = self.client.converse_stream().model_id(model).with_request(request).send().await;
        let mut events = match sent {
            Ok(output) => output.stream,
            Err(error) => return sdk_failure(error, |raw: &HttpResponse| Some(raw.status().as_u16())),
        };
        let mut reply = StreamedReply::default();
        loop {
            let event = match tokio::time::timeout(self.timeout, events.recv()).await {
                Ok(Ok(Some(event))) => event,
                Ok(Ok(None)) => break,
                // The reply is whole once `messageStop` came; only the usage may be lost.
                Ok(Err(_)) | Err(_) if reply.stop.is_some() => break,
                Ok(Err(error)) => return stream_failure(error),
                Err(_) => {
                    return Attempt::Retry {
                        status: None,
                        message: format!("no stream event for {} s", self.timeout.as_secs()),
                        retry_after: None,
                    }
                }
            };
            if let Err(error) = reply.event(event, sink) {
                return Attempt::Fail(error);
            }
        }
        if reply.stop.is_none() {
            return Attempt::Retry {
                status: None,
                message: "the stream ended before the reply was complete".to_owned(),
                retry_after: None,
            };
        }
        match reply.finish() {
            Ok(reply) => Attempt::Done(reply),
            Err(error) => Attempt::Fail(error),
        }
    }
}

#[async_trait]
impl ChatModel for BedrockModel {
    fn file_input(&self) -> FileInput {
        self.file_input_of(&self.model)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let model = crate::effective_model(request, &self.model);
        let wire = to_wire(self.max_tokens, request, self.file_input_of(model), Marks::of(model, &self.cache))?;
        let structured = request.response_format.as_ref().map(|format| format.name.as_str());
        tracing::debug!(provider = PROVIDER, model, response_format = structured, "model call");
        let reply = retry(&self.retry, PROVIDER, || self.converse_once(model, &wire)).await?;
        let response = reply.into_response(structured)?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }

    async fn complete_streaming(
        &self,
        request: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, ModelError> {
        // A structured reply arrives as a forced tool's input, not as text: nothing to stream.
        if request.response_format.is_some() {
            return agent_ports::complete_as_one_delta(self, request, sink).await;
        }
        let model = crate::effective_model(request, &self.model);
        let wire = to_wire(self.max_tokens, request, self.file_input_of(model), Marks::of(model, &self.cache))?;
        tracing::debug!(provider = PROVIDER, model, "streamed model call");
        let watched = Watched::new(sink);
        let reply =
            retry_streamed(&self.retry, PROVIDER, &watched, || self.stream_once(model, &wire, &watched)).await?;
        let response = reply.into_response(None)?;
        crate::log_call_done(PROVIDER, model, &response);
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_ports::StopReason;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.to_string(), name: "read".to_string(), arguments: json!({"path": id}) }
    }

    fn tool(id: &str) -> Message {
        Message::tool(id, "read", format!("result {id}"))
    }

    fn roles(request: &WireRequest) -> Vec<&str> {
        request.messages.iter().map(|m| m.role.as_str()).collect()
    }

    #[test]
    fn roles_alternate_and_tool_results_come_first() {
        let request = ChatRequest {
            system: "be brief".into(),
            messages: vec![
                Message::user("first"),
                Message::user("second"),
                Message::Assistant { content: String::new(), tool_calls: vec![call("a"), call("b")] },
                tool("a"),
                tool("b"),
                Message::user("and then"),
                Message::assistant("  "),
                Message::assistant("done"),
            ],
            tools: vec![agent_ports::ToolSpec {
                name: "read".into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            }]
            .into(),
            ..Default::default()
        };
        let wire = to_wire(100, &request, FileInput::TEXT_ONLY, Marks::default()).unwrap();
        assert_eq!(roles(&wire), ["user", "assistant", "user", "assistant"]);
        let third = &wire.messages[2].content;
        assert!(matches!(&third[0], ContentBlock::ToolResult(r) if r.tool_use_id == "a"));
        assert!(matches!(&third[1], ContentBlock::ToolResult(r) if r.tool_use_id == "b"));
        assert!(matches!(&third[2], ContentBlock::Text(t) if t == "and then"));
        let config = wire.tool_config.unwrap();
        assert_eq!(config.tools.len(), 1);
        assert!(config.tool_choice.is_none());
        let Tool::ToolSpec(spec) = &config.tools[0] else { panic!("a tool spec") };
        assert_eq!(spec.description, None, "an empty description is left out");
        assert_eq!(wire.inference.max_tokens, Some(100));
    }

    #[test]
    fn history_tools_are_declared_when_none_is_offered() {
        let request = ChatRequest {
            messages: vec![
                Message::user("q"),
                Message::Assistant { content: String::new(), tool_calls: vec![call("a")] },
                Message::tool("a", "read", ""),
            ],
            ..Default::default()
        };
        let wire = to_wire(10, &request, FileInput::TEXT_ONLY, Marks::default()).unwrap();
        assert!(wire.system.is_none());
        let tools = wire.tool_config.unwrap().tools;
        assert_eq!(tools.len(), 1);
        let Tool::ToolSpec(spec) = &tools[0] else { panic!("a tool spec") };
        assert_eq!(spec.name, "read");
        let ContentBlock::ToolResult(result) = &wire.messages[2].content[0] else { panic!("a tool result") };
        assert_eq!(result.content, [ToolResultContentBlock::Text(EMPTY_TOOL_RESULT.into())]);

        let plain = ChatRequest { messages: vec![Message::user("q")], ..Default::default() };
        let plain = to_wire(10, &plain, FileInput::TEXT_ONLY, Marks::default()).unwrap();
        assert!(plain.tool_config.is_none());
    }

    #[test]
    fn documents_round_trip() {
        let value = json!({"a": [1, -2, 2.5, true, null, "x"], "b": {"c": u64::MAX}});
        assert_eq!(from_document(to_document(&value)), value);
        assert_eq!(from_document(Document::Number(Number::Float(f64::NAN))), Value::Null);
    }

    #[test]
    fn a_forced_tool_that_is_missing_is_an_error_unless_cut_off() {
        let reply = || Reply { blocks: vec![Block::Text("hm".into())], stop: None, usage: Usage::default() };
        let mut end = reply();
        end.stop = Some(wire::StopReason::EndTurn);
        assert!(matches!(end.into_response(Some("plan")), Err(ModelError::InvalidResponse(_))));
        let mut cut = reply();
        cut.stop = Some(wire::StopReason::MaxTokens);
        let response = cut.into_response(Some("plan")).unwrap();
        assert_eq!((response.content.as_str(), response.stop_reason), ("", StopReason::MaxTokens));
    }

    #[test]
    fn stream_events_are_bounded_and_checked() {
        struct Ignore;
        impl DeltaSink for Ignore {
            fn delta(&self, _: &str) {}
        }
        let delta = |index: i32, delta: ContentBlockDelta| {
            ConverseStreamOutput::ContentBlockDelta(
                wire::ContentBlockDeltaEvent::builder().content_block_index(index).delta(delta).build().unwrap(),
            )
        };
        let mut reply = StreamedReply::default();
        assert!(reply.event(delta(MAX_STREAMED_BLOCKS as i32, ContentBlockDelta::Text("x".into())), &Ignore).is_err());
        assert!(reply.event(delta(-1, ContentBlockDelta::Text("x".into())), &Ignore).is_err());
        let piece = wire::ToolUseBlockDelta::builder().input("{").build().unwrap();
        assert!(reply.event(delta(0, ContentBlockDelta::ToolUse(piece)), &Ignore).is_err(), "no toolUse start");
    }
}
