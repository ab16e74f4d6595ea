//! A model request's JSON body, encoded once per call into a buffer sized from the provider's last
//! body, so that a request is not copied through a dozen reallocations while it is written, nor
//! written again for each attempt.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use serde::Serialize;

/// The smallest buffer a body starts in.
const MIN_CAPACITY: usize = 4 * 1024;
/// The largest: a body of files shown (megabytes of base64) must not make every later body, the
/// small ones too, start in a buffer of its size; past this, growing costs little beside the body.
const MAX_CAPACITY: usize = 1024 * 1024;

/// Encodes a provider's request bodies; remembers the size of the last one.
#[derive(Debug, Default)]
pub(crate) struct JsonBodies {
    last_len: AtomicUsize,
}

impl JsonBodies {
    /// `value` as JSON. A turn's next request is its last one plus a step, so the buffer starts a
    /// quarter larger than the last body (within [`MIN_CAPACITY`] and [`MAX_CAPACITY`]). `None` if `value` cannot be encoded (a map with
    /// non-string keys): the caller then lets reqwest encode it and report the error as it does.
    pub(crate) fn encode(&self, value: &impl Serialize) -> Option<Bytes> {
        let last = self.last_len.load(Ordering::Relaxed);
        let mut buffer = Vec::with_capacity(start_capacity(last));
        serde_json::to_writer(&mut buffer, value).ok()?;
        self.last_len.store(buffer.len(), Ordering::Relaxed);
        Some(Bytes::from(buffer))
    }
}

/// The buffer a body starts in after a body of `last` bytes.
fn start_capacity(last: usize) -> usize {
    (last + last / 4).clamp(MIN_CAPACITY, MAX_CAPACITY)
}

/// `builder` with `value` as its JSON body: the `encoded` bytes when there are some, else
/// reqwest's own encoding of `value` (which reports the error).
pub(crate) fn with_json(
    builder: reqwest::RequestBuilder,
    encoded: &Option<Bytes>,
    value: &impl Serialize,
) -> reqwest::RequestBuilder {
    match encoded {
        Some(bytes) => builder.header(reqwest::header::CONTENT_TYPE, "application/json").body(bytes.clone()),
        None => builder.json(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_body_is_the_values_json_and_the_next_buffer_is_sized_from_it() {
        let bodies = JsonBodies::default();
        let value = json!({"model": "m", "messages": [{"role": "user", "content": "a \"quoted\" question"}]});
        let encoded = bodies.encode(&value).unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&encoded).unwrap(), value);
        assert_eq!(bodies.last_len.load(Ordering::Relaxed), encoded.len());
        let long = json!({"content": "x".repeat(100_000)});
        let encoded = bodies.encode(&long).unwrap();
        assert_eq!(encoded.len(), 100_000 + r#"{"content":""}"#.len());
        assert_eq!(bodies.last_len.load(Ordering::Relaxed), encoded.len());
        // After a body of megabytes, a small one is still whole, and starts in a bounded buffer.
        bodies.encode(&json!({"content": "x".repeat(3 * MAX_CAPACITY)})).unwrap();
        let small = bodies.encode(&value).unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&small).unwrap(), value);
        assert_eq!(start_capacity(3 * MAX_CAPACITY), MAX_CAPACITY);
        assert_eq!(start_capacity(0), MIN_CAPACITY);
        assert_eq!(start_capacity(20_000), 25_000);
    }

    #[test]
    fn a_value_that_cannot_be_encoded_is_left_to_reqwest() {
        let mut map = std::collections::HashMap::new();
        map.insert(vec![1u8], 1);
        assert!(JsonBodies::default().encode(&map).is_none());
        let request = with_json(reqwest::Client::new().post("http://127.0.0.1:9/"), &None, &map).build();
        assert!(request.is_err(), "reqwest reports the encoding error");
        let encoded = JsonBodies::default().encode(&json!({"a": 1}));
        let request = with_json(reqwest::Client::new().post("http://127.0.0.1:9/"), &encoded, &()).build().unwrap();
        assert_eq!(request.headers()[reqwest::header::CONTENT_TYPE], "application/json");
        assert_eq!(request.body().and_then(reqwest::Body::as_bytes), Some(&br#"{"a":1}"#[..]));
    }
}
