//! Token estimation, the figure every budget of the crate counts in. A leaf: the skill listing and
//! the compaction count with it without reaching the budget's trimming.

/// Bytes counted as one token: about three, which over-counts English and holds for Spanish and
/// code, so a request that fits here fits at the provider.
pub const BYTES_PER_TOKEN: usize = 3;

/// A deliberately pessimistic estimate of the tokens of `text`, at [`BYTES_PER_TOKEN`].
pub fn estimate_text(text: &str) -> usize {
    text.len().div_ceil(BYTES_PER_TOKEN)
}
