//! A tenant's usage read back by day and model, for `GET /usage`.

use std::collections::BTreeMap;

use agent_ports::store::{ModelUsage, UsageCounts, UsageDay};
use agent_ports::{StoreError, UserId};
use aws_sdk_dynamodb::types::AttributeValue;

use super::{optional_count, usage_day_sort_key, usage_partition_key};
use crate::codec::{s, Item, Reader};
use crate::dynamo::DynamoSessionStore;

impl DynamoSessionStore {
    /// The tenant's usage by day and model, from `from` to `to` (both included): one Query (more
    /// pages only past 1 MB, which a year of days does not reach).
    pub(in crate::dynamo) async fn usage_days(
        &self,
        user: &UserId,
        from: &str,
        to: &str,
    ) -> Result<Vec<UsageDay>, StoreError> {
        let pk = usage_partition_key(user);
        let mut days: BTreeMap<String, UsageDay> = BTreeMap::new();
        let mut start: Option<Item> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND sk BETWEEN :from AND :to")
                .expression_attribute_values(":pk", s(&pk))
                .expression_attribute_values(":from", s(usage_day_sort_key(from)))
                // `~` sorts after `#`: the last day's model items are included.
                .expression_attribute_values(":to", s(format!("{}~", usage_day_sort_key(to))))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|err| self.backend("Query", &pk, err))?;
            for item in page.items() {
                let sk = Reader { item, context: &pk }.string("sk")?.to_owned();
                let context = format!("usage {pk} {sk}");
                let reader = Reader { item, context: &context };
                let day = reader.string("day")?.to_owned();
                let entry = days.entry(day.clone()).or_insert_with(|| UsageDay { day, ..UsageDay::default() });
                match reader.opt("model") {
                    Some(AttributeValue::S(model)) => {
                        entry.models.entry(model.clone()).or_default().add(&model_usage(&reader)?);
                    }
                    _ => entry.totals.add(&counts(&reader)?),
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        Ok(days.into_values().collect())
    }
}

fn counts(reader: &Reader<'_>) -> Result<UsageCounts, StoreError> {
    Ok(UsageCounts {
        input_tokens: optional_count(reader, "input_tokens")?,
        output_tokens: optional_count(reader, "output_tokens")?,
        cache_read_tokens: optional_count(reader, "cache_read_tokens")?,
        cache_write_tokens: optional_count(reader, "cache_write_tokens")?,
        model_calls: optional_count(reader, "model_calls")?,
        cost_nanos: optional_count(reader, "cost_nanos")?,
        unpriced_calls: optional_count(reader, "unpriced_calls")?,
        executions: optional_count(reader, "executions")?,
        sandbox_ms: optional_count(reader, "sandbox_ms")?,
        turns: optional_count(reader, "turns")?,
        failed_turns: optional_count(reader, "failed_turns")?,
    })
}

fn model_usage(reader: &Reader<'_>) -> Result<ModelUsage, StoreError> {
    Ok(ModelUsage {
        input_tokens: optional_count(reader, "input_tokens")?,
        output_tokens: optional_count(reader, "output_tokens")?,
        cache_read_tokens: optional_count(reader, "cache_read_tokens")?,
        cache_write_tokens: optional_count(reader, "cache_write_tokens")?,
        model_calls: optional_count(reader, "model_calls")?,
        cost_nanos: optional_count(reader, "cost_nanos")?,
        unpriced_calls: optional_count(reader, "unpriced_calls")?,
    })
}
