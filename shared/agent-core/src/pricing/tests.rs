//! The shipped table, model matching, exact costs and the deployment's overrides.

use super::*;

fn usage(input: u64, output: u64, write: u64, read: u64) -> Usage {
    Usage { input_tokens: input, output_tokens: output, cache_read_tokens: read, cache_write_tokens: write }
}

#[test]
fn the_shipped_table_has_its_date_sources_and_the_main_models() {
    let table = PriceTable::shipped();
    assert_eq!((table.date(), table.currency()), ("2026-11-29", "USD"));
    assert!(table.source().iter().any(|source| source.contains("https://platform.claude.com")));
    assert!(table.source().iter().any(|source| source.contains("https://openai.com/api/pricing")));
    assert!(table.source().iter().any(|source| source.contains("https://aws.amazon.com/bedrock/pricing")));
    let sonnet = Price { input: 3_000_000, output: 15_000_000, cache_write: 3_750_000, cache_read: 300_000 };
    for model in [
        "claude-sonnet-4-5-20250929",
        "anthropic/claude-sonnet-4",
        "us.anthropic.claude-sonnet-4-20250514-v1:0",
        "arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-3-7-sonnet-latest",
        "CLAUDE-SONNET-4",
    ] {
        assert_eq!(table.price(model), Some(sonnet), "{model}");
    }
    let opus = |model| table.price(model).map(|price| (price.input, price.output));
    assert_eq!(opus("claude-opus-4-1-20250805"), Some((15_000_000, 75_000_000)));
    assert_eq!(opus("claude-opus-4-20250514"), Some((15_000_000, 75_000_000)));
    assert_eq!(opus("claude-opus-4-5-20251101"), Some((5_000_000, 25_000_000)), "the longest prefix wins");
    assert_eq!(table.price("claude-haiku-4-5").unwrap().cache_read, 100_000);
    assert_eq!(table.price("anthropic.claude-3-5-haiku-20241022-v1:0").unwrap().input, 800_000);
    assert_eq!(table.price("gpt-4o-mini-2024-07-18").unwrap().cache_read, 75_000);
    assert_eq!(table.price("gpt-4o").unwrap().cache_write, 2_500_000);
    assert_eq!(table.price("openai/gpt-4.1-mini").unwrap().output, 1_600_000);
    assert_eq!(table.price("gpt-5-2025-08-07").unwrap().cache_read, 125_000);
    assert_eq!(table.price("gpt-5-mini").unwrap().cache_read, 25_000);
    assert_eq!(table.price("us.amazon.nova-micro-v1:0").unwrap().cache_read, 8_750);
    assert_eq!(table.price("amazon.nova-lite-v1:0").unwrap().output, 240_000);
    assert_eq!(table.price("amazon.nova-pro-v1:0").unwrap().cache_read, 200_000);
    for unpriced in ["gpt-5.4", "gpt-4o2", "llama3", "", "mistral.mistral-large", "default"] {
        assert_eq!(table.price(unpriced), None, "{unpriced}");
    }
}

#[test]
fn a_call_costs_each_kind_of_token_at_its_price_exactly() {
    let sonnet = PriceTable::shipped().price("claude-sonnet-4").unwrap();
    // 1,000 uncached × $3 + 2,000 written × $3.75 + 10,000 read × $0.30 + 500 out × $15, per million.
    assert_eq!(sonnet.cost_nanos(&usage(13_000, 500, 2_000, 10_000)), 21_000_000);
    assert_eq!(sonnet.cost_nanos(&usage(0, 0, 0, 0)), 0);
    // A read of Nova Micro is 8.75 billionths of a dollar: rounded to the nearest.
    let micro = PriceTable::shipped().price("amazon.nova-micro-v1:0").unwrap();
    assert_eq!(micro.cost_nanos(&usage(1, 0, 0, 1)), 9);
    assert_eq!(micro.cost_nanos(&usage(4, 0, 0, 4)), 35);
    // The most a call may cost prices its input as cache writes when those are dearer.
    assert_eq!(sonnet.most_nanos(1_000, 100), 3_750_000 + 1_500_000);
    let gpt = PriceTable::shipped().price("gpt-4o").unwrap();
    assert_eq!(gpt.most_nanos(1_000_000, 0), 2_500_000_000);
}

#[test]
fn the_deployments_prices_replace_an_entry_and_a_bad_one_is_named() {
    let shipped = PriceTable::shipped();
    let table = shipped
        .with_overrides(
            r#"{"date": "2027-01-01", "models": {"gpt-4o": {"input": 2, "output": 8, "cache_read": 1},
                "my-model": {"input": 0.5, "output": 1}}}"#,
        )
        .unwrap();
    assert_eq!(table.date(), "2027-01-01");
    assert_eq!(table.source()[0], "MODEL_PRICES");
    assert_eq!(
        table.price("gpt-4o-2024-08-06"),
        Some(Price { input: 2_000_000, output: 8_000_000, cache_write: 2_000_000, cache_read: 1_000_000 })
    );
    assert_eq!(table.price("gpt-4o-mini").unwrap().input, 150_000, "other entries stay");
    assert_eq!(table.price("my-model").unwrap().cache_read, 500_000, "a cache price left out is the input's");
    assert_eq!(table.len(), shipped.len() + 1);
    for (bad, named) in [
        (r#"{"models": {"gpt-4o": {"input": -1, "output": 8}}}"#, "gpt-4o"),
        (r#"{"models": {"x": {"input": 1, "output": 1e300}}}"#, "`x`"),
        (r#"{"models": {"x": {"input": 1}}}"#, "output"),
        (r#"{"models": {"x": {"input": 1, "output": 2, "cached": 1}}}"#, "cached"),
        (r#"{"models": {"x": {"input": 1, "output": 2}}, "currency": "EUR"}"#, "EUR"),
        ("not json", "price table"),
    ] {
        let err = shipped.with_overrides(bad).unwrap_err();
        assert!(err.contains(named), "{bad}: {err}");
    }
}

#[test]
fn a_model_name_loses_its_path_and_bedrock_prefixes() {
    assert_eq!(model_name("us.anthropic.claude-3-7-sonnet-20250219-v1:0"), "claude-3-7-sonnet-20250219-v1:0");
    assert_eq!(model_name("anthropic/claude-sonnet-4"), "claude-sonnet-4");
    assert_eq!(model_name(" gpt-4o "), "gpt-4o");
    assert_eq!(model_name("gpt-4.1"), "gpt-4.1", "a dot of the name itself stays");
    assert_eq!(model_name("us."), "us.");
}
