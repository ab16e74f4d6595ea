//! The JSON log line of an event: byte for byte what `tracing_subscriber`'s JSON format writes with
//! the settings the functions use (level, fields, the spans from the root), without parsing every
//! span's stored fields again at every line.

use std::fmt;

use serde::Serialize;
use tracing::{Event, Subscriber};
use tracing_serde::fields::AsMap;
use tracing_serde::AsSerde;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

/// `tracing_subscriber`'s `.json().with_current_span(false)` line, without time and target:
/// `{"level":…,"fields":{…},"spans":[{…,"name":…},…]}`. Each span's fields are kept as the JSON
/// object [`JsonFields`] wrote (sorted keys); that format parses it into a map and writes the map
/// back, which gives the same bytes, so this copies the object and appends the span's name.
pub struct LambdaJson;

impl<S> FormatEvent<S, JsonFields> for LambdaJson
where
    S: Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line: Vec<u8> = Vec::with_capacity(512);
        line.extend_from_slice(b"{\"level\":");
        json(&mut line, &event.metadata().level().as_serde())?;
        line.extend_from_slice(b",\"fields\":");
        json(&mut line, &event.field_map())?;
        // As that format does: the list is written when the event has a parent or a current span,
        // and lists the current span's scope.
        let in_a_span = event.parent().and_then(|id| ctx.span(id)).or_else(|| ctx.lookup_current()).is_some();
        if in_a_span {
            line.extend_from_slice(b",\"spans\":[");
            if let Some(leaf) = ctx.lookup_current() {
                for (index, span) in leaf.scope().from_root().enumerate() {
                    if index > 0 {
                        line.push(b',');
                    }
                    span_object(&mut line, &span)?;
                }
            }
            line.push(b']');
        }
        line.push(b'}');
        writer.write_str(std::str::from_utf8(&line).map_err(|_| fmt::Error)?)?;
        writeln!(writer)
    }
}

/// One span of the list: its stored fields' object with `"name"` appended.
fn span_object<S>(line: &mut Vec<u8>, span: &SpanRef<'_, S>) -> fmt::Result
where
    S: for<'lookup> LookupSpan<'lookup>,
{
    let extensions = span.extensions();
    let stored = extensions.get::<FormattedFields<JsonFields>>().map(|fields| fields.fields.as_str()).unwrap_or("{}");
    match stored.strip_suffix('}') {
        Some("{") => line.push(b'{'),
        Some(open) if open.starts_with('{') => {
            line.extend_from_slice(open.as_bytes());
            line.push(b',');
        }
        // Not an object JsonFields wrote: the map that format would have made of it.
        _ => return reparsed_span_object(line, stored, span.metadata().name()),
    }
    line.extend_from_slice(b"\"name\":");
    json(line, span.metadata().name())?;
    line.push(b'}');
    Ok(())
}

/// What that format writes for fields that are not a JSON object: it parses them and, in a release
/// build, writes the value under `field` or the parse error under `field_error`.
fn reparsed_span_object(line: &mut Vec<u8>, stored: &str, name: &str) -> fmt::Result {
    let mut object = serde_json::Map::new();
    match serde_json::from_str::<serde_json::Value>(stored) {
        Ok(serde_json::Value::Object(fields)) => object = fields,
        Ok(value) => {
            object.insert("field".into(), value);
            object.insert("field_error".into(), "field was no a valid object".into());
        }
        Err(err) => {
            object.insert("field_error".into(), err.to_string().into());
        }
    }
    let mut bytes = serde_json::to_vec(&object).map_err(|_| fmt::Error)?;
    bytes.pop();
    if bytes.len() > 1 {
        bytes.push(b',');
    }
    line.extend_from_slice(&bytes);
    line.extend_from_slice(b"\"name\":");
    json(line, name)?;
    line.push(b'}');
    Ok(())
}

fn json(line: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) -> fmt::Result {
    serde_json::to_writer(line, value).map_err(|_| fmt::Error)
}

#[cfg(test)]
mod tests;
