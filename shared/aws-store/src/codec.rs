//! Conversions between DynamoDB attribute values and the session's Rust and JSON types.

use std::collections::HashMap;

use agent_ports::store::StoreError;
use aws_sdk_dynamodb::types::AttributeValue;

pub(crate) type Item = HashMap<String, AttributeValue>;

/// A JSON value as a native DynamoDB value, so operators can query inside it.
pub(crate) fn json_to_attr(value: &serde_json::Value) -> AttributeValue {
    match value {
        serde_json::Value::Null => AttributeValue::Null(true),
        serde_json::Value::Bool(b) => AttributeValue::Bool(*b),
        serde_json::Value::Number(n) => AttributeValue::N(n.to_string()),
        serde_json::Value::String(s) => AttributeValue::S(s.clone()),
        serde_json::Value::Array(items) => AttributeValue::L(items.iter().map(json_to_attr).collect()),
        serde_json::Value::Object(map) => {
            AttributeValue::M(map.iter().map(|(k, v)| (k.clone(), json_to_attr(v))).collect())
        }
    }
}

/// The inverse of [`json_to_attr`]. Sets and binaries are never written by this crate,
/// so meeting one means the item was written by something else.
pub(crate) fn attr_to_json(value: &AttributeValue) -> Result<serde_json::Value, StoreError> {
    Ok(match value {
        AttributeValue::Null(_) => serde_json::Value::Null,
        AttributeValue::Bool(b) => serde_json::Value::Bool(*b),
        AttributeValue::N(n) => serde_json::Value::Number(parse_json_number(n)?),
        AttributeValue::S(s) => serde_json::Value::String(s.clone()),
        AttributeValue::L(items) => serde_json::Value::Array(items.iter().map(attr_to_json).collect::<Result<_, _>>()?),
        AttributeValue::M(map) => serde_json::Value::Object(
            map.iter().map(|(k, v)| Ok((k.clone(), attr_to_json(v)?))).collect::<Result<_, StoreError>>()?,
        ),
        other => return Err(StoreError::Corrupt(format!("unexpected attribute type in JSON data: {other:?}"))),
    })
}

/// Integers come back as integers so that a plan round-trips to an equal `Value`.
fn parse_json_number(n: &str) -> Result<serde_json::Number, StoreError> {
    if let Ok(u) = n.parse::<u64>() {
        return Ok(u.into());
    }
    if let Ok(i) = n.parse::<i64>() {
        return Ok(i.into());
    }
    n.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .ok_or_else(|| StoreError::Corrupt(format!("number {n:?} does not fit a JSON number")))
}

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn corrupt(context: &str, name: &str, problem: &str) -> StoreError {
    StoreError::Corrupt(format!("{context}: attribute {name:?} {problem}"))
}

/// Typed reads of an item's attributes; `context` names the item in error messages.
pub(crate) struct Reader<'a> {
    pub item: &'a Item,
    pub context: &'a str,
}

impl<'a> Reader<'a> {
    pub fn get(&self, name: &str) -> Result<&'a AttributeValue, StoreError> {
        self.item.get(name).ok_or_else(|| corrupt(self.context, name, "is missing"))
    }

    pub fn opt(&self, name: &str) -> Option<&'a AttributeValue> {
        self.item.get(name)
    }

    pub fn string(&self, name: &str) -> Result<&'a str, StoreError> {
        self.get(name)?.as_s().map(String::as_str).map_err(|_| corrupt(self.context, name, "is not a string"))
    }

    pub fn int<T: std::str::FromStr>(&self, name: &str) -> Result<T, StoreError> {
        self.get(name)?
            .as_n()
            .ok()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| corrupt(self.context, name, "is not an integer in range"))
    }

    /// A string that may be stored as NULL (or be absent) when there is no value.
    pub fn nullable_string(&self, name: &str) -> Result<Option<&'a str>, StoreError> {
        match self.opt(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(s)) => Ok(Some(s)),
            Some(_) => Err(corrupt(self.context, name, "is neither a string nor NULL")),
        }
    }

    pub fn list(&self, name: &str) -> Result<&'a [AttributeValue], StoreError> {
        self.get(name)?.as_l().map(Vec::as_slice).map_err(|_| corrupt(self.context, name, "is not a list"))
    }

    pub fn map(&self, name: &str) -> Result<&'a Item, StoreError> {
        self.get(name)?.as_m().map_err(|_| corrupt(self.context, name, "is not a map"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_through_native_attributes() {
        let value = serde_json::json!({
            "goal": "draft a deed",
            "steps": [{"done": true, "n": 1}, {"done": false, "n": -2, "weight": 0.5}],
            "note": null,
            "empty": {},
            "big": u64::MAX,
        });
        let attr = json_to_attr(&value);
        assert!(matches!(&attr, AttributeValue::M(m) if matches!(m.get("steps"), Some(AttributeValue::L(_)))));
        assert_eq!(attr_to_json(&attr).unwrap(), value);
    }

    #[test]
    fn foreign_types_are_corrupt() {
        let attr = AttributeValue::Ss(vec!["a".into()]);
        assert!(matches!(attr_to_json(&attr), Err(StoreError::Corrupt(_))));
        assert!(matches!(attr_to_json(&AttributeValue::N("1e400".into())), Err(StoreError::Corrupt(_))));
    }
}
