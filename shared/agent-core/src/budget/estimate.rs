//! Token estimation, the figure every budget of the crate counts in. A leaf: the skill listing and
//! the compaction count with it without reaching the budget's trimming.

/// Bytes counted as one token: about three, which over-counts English and holds for Spanish and
/// code, so a request that fits here fits at the provider.
pub const BYTES_PER_TOKEN: usize = 3;

/// A deliberately pessimistic estimate of the tokens of `text`, at [`BYTES_PER_TOKEN`].
pub fn estimate_text(text: &str) -> usize {
    text.len().div_ceil(BYTES_PER_TOKEN)
}

/// [`estimate_text`] of `value` as compact JSON, counted as it is written rather than built as a
/// string: a turn estimates every tool call's arguments before each model call.
pub fn estimate_json(value: &serde_json::Value) -> usize {
    json_len(value).div_ceil(BYTES_PER_TOKEN)
}

/// The length in bytes of `value` as compact JSON (`value.to_string().len()`), without the string.
pub fn json_len(value: &serde_json::Value) -> usize {
    let mut length = JsonLength(0);
    // Writing to a counter cannot fail, and a `Value` always serialises.
    let _ = serde_json::to_writer(&mut length, value);
    length.0
}

/// Counts the bytes written to it.
struct JsonLength(usize);

impl std::io::Write for JsonLength {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
