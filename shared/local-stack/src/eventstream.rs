//! Amazon's event-stream framing (`application/vnd.amazon.eventstream`), which the Bedrock and
//! AgentCore stand-ins both answer in.

use serde_json::Value;

/// One event frame: its `:event-type` and a JSON payload.
pub(crate) fn event_frame(kind: &str, payload: &Value) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(":message-type", HeaderValue::String("event".into())))
        .add_header(Header::new(":event-type", HeaderValue::String(kind.to_owned().into())))
        .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())));
    let mut bytes = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut bytes).expect("encode an event frame");
    bytes
}
