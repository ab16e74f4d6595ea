//! What model calls cost: the price table (input, output, cache write and cache read per million
//! tokens for each model), shipped as data in `prices.json` with its date and sources, and merged
//! with the deployment's own prices (`MODEL_PRICES`). Costs are counted in billionths of a US dollar.
//!
//! Prices are held as millionths of a dollar per million tokens (so picodollars per token), which
//! every published price fits exactly; a call's cost is summed in those units and rounded once.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};

use crate::message::Usage;

/// The shipped table, as data.
const SHIPPED: &str = include_str!("prices.json");

/// The most a price may be, in dollars per million tokens: far above any model's, so a typo of a
/// few orders of magnitude is caught, and small enough that no sum overflows.
const MAX_PRICE_USD: f64 = 1_000_000.0;

/// One model's prices, in millionths of a dollar per million tokens (picodollars per token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub input: u64,
    pub output: u64,
    pub cache_write: u64,
    pub cache_read: u64,
}

impl Price {
    /// What a call that used `usage` cost, in billionths of a dollar, rounded to the nearest.
    pub fn cost_nanos(&self, usage: &Usage) -> u64 {
        let picos = u128::from(usage.uncached_input_tokens()) * u128::from(self.input)
            + u128::from(usage.cache_write_tokens) * u128::from(self.cache_write)
            + u128::from(usage.cache_read_tokens) * u128::from(self.cache_read)
            + u128::from(usage.output_tokens) * u128::from(self.output);
        picos_to_nanos(picos)
    }

    /// The most a call of `input` tokens answering with at most `output` tokens may cost, in
    /// billionths of a dollar: every input token at the dearer of an uncached input and a cache
    /// write, and every output token.
    pub fn most_nanos(&self, input: u64, output: u64) -> u64 {
        let picos = u128::from(input) * u128::from(self.input.max(self.cache_write))
            + u128::from(output) * u128::from(self.output);
        picos_to_nanos(picos)
    }
}

fn picos_to_nanos(picos: u128) -> u64 {
    u64::try_from(picos.saturating_add(500) / 1000).unwrap_or(u64::MAX)
}

/// The prices of the models a deployment calls, with where they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    date: String,
    currency: String,
    source: Vec<String>,
    /// By lower-case model-id prefix.
    models: BTreeMap<String, Price>,
}

/// The file's shape, and `MODEL_PRICES`'.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    source: Option<Sources>,
    models: BTreeMap<String, PriceFile>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Sources {
    One(String),
    Many(Vec<String>),
}

/// Dollars per million tokens; a cache price left out is the input price.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    input: f64,
    output: f64,
    #[serde(default)]
    cache_write: Option<f64>,
    #[serde(default)]
    cache_read: Option<f64>,
}

static SHIPPED_TABLE: LazyLock<Arc<PriceTable>> =
    LazyLock::new(|| Arc::new(PriceTable::parse_shipped().expect("the shipped price table is valid")));

impl Default for PriceTable {
    fn default() -> Self {
        Self::shipped().as_ref().clone()
    }
}

impl PriceTable {
    /// The table shipped with the runtime (`prices.json`).
    pub fn shipped() -> Arc<PriceTable> {
        Arc::clone(&SHIPPED_TABLE)
    }

    fn parse_shipped() -> Result<Self, String> {
        let file: TableFile = serde_json::from_str(SHIPPED).map_err(|err| format!("prices.json: {err}"))?;
        Ok(Self {
            date: file.date.unwrap_or_default(),
            currency: file.currency.unwrap_or_else(|| "USD".to_owned()),
            source: file.source.map(Sources::into_vec).unwrap_or_default(),
            models: prices(file.models)?,
        })
    }

    /// The shipped table with the deployment's prices (`MODEL_PRICES`: `{"models": {prefix:
    /// {input, output, cache_write, cache_read}}}` in dollars per million tokens, optionally with
    /// its own `date` and `source`) over it: an entry replaces the shipped one for its prefix. The
    /// error names what is wrong (the entry, for a bad price).
    pub fn with_overrides(&self, json: &str) -> Result<Self, String> {
        let file: TableFile = serde_json::from_str(json).map_err(|err| format!("not a price table: {err}"))?;
        if let Some(currency) = file.currency.as_deref().filter(|currency| !currency.eq_ignore_ascii_case("USD")) {
            return Err(format!("prices must be in USD, not {currency}"));
        }
        let mut table = self.clone();
        table.models.extend(prices(file.models)?);
        if let Some(date) = file.date.filter(|date| !date.trim().is_empty()) {
            table.date = date;
        }
        let own = file.source.map(Sources::into_vec).unwrap_or_else(|| vec!["MODEL_PRICES".to_owned()]);
        table.source = own.into_iter().chain(table.source).collect();
        Ok(table)
    }

    /// The price of `model`: the entry with the longest prefix of its name (see [`model_name`])
    /// that ends where a word of the name does, so `gpt-5` prices `gpt-5-2025-08-07` but not
    /// `gpt-5.4`. `None` when no entry matches.
    pub fn price(&self, model: &str) -> Option<Price> {
        let name = model_name(model).to_ascii_lowercase();
        self.models
            .iter()
            .filter(|(prefix, _)| {
                name.strip_prefix(prefix.as_str()).is_some_and(|rest| {
                    rest.chars().next().is_none_or(|next| !next.is_ascii_alphanumeric() && next != '.')
                })
            })
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, price)| *price)
    }

    /// When the prices were read from their sources (`YYYY-MM-DD`).
    pub fn date(&self) -> &str {
        &self.date
    }

    pub fn currency(&self) -> &str {
        &self.currency
    }

    /// Where the prices come from: each provider's published pricing page, and the deployment's
    /// override first when there is one.
    pub fn source(&self) -> &[String] {
        &self.source
    }

    /// The number of priced model prefixes.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }
}

impl Sources {
    fn into_vec(self) -> Vec<String> {
        match self {
            Sources::One(one) => vec![one],
            Sources::Many(many) => many,
        }
    }
}

/// The file's prices in table units; a negative, non-finite or absurd price is an error naming
/// its entry.
fn prices(models: BTreeMap<String, PriceFile>) -> Result<BTreeMap<String, Price>, String> {
    models
        .into_iter()
        .map(|(prefix, price)| {
            let key = prefix.trim().to_ascii_lowercase();
            if key.is_empty() {
                return Err("a price entry has an empty model prefix".to_owned());
            }
            let unit = |field: &str, usd: f64| -> Result<u64, String> {
                if !usd.is_finite() || !(0.0..=MAX_PRICE_USD).contains(&usd) {
                    return Err(format!(
                        "the price entry `{prefix}` has {field} = {usd}: expected dollars per million tokens from 0 \
                         to {MAX_PRICE_USD}"
                    ));
                }
                // Dollars per million tokens to millionths of a dollar per million tokens.
                Ok((usd * 1_000_000.0).round() as u64)
            };
            let price = Price {
                input: unit("input", price.input)?,
                output: unit("output", price.output)?,
                cache_write: unit("cache_write", price.cache_write.unwrap_or(price.input))?,
                cache_read: unit("cache_read", price.cache_read.unwrap_or(price.input))?,
            };
            Ok((key, price))
        })
        .collect()
}

pub use crate::model::model_name;

#[cfg(test)]
mod tests;
