//! A renderer of `template.yaml` for given parameters, the way CloudFormation resolves it
//! (conditions, `!If`, `!Sub`, `!Join`, `!Select`, `!Split`, pseudo parameters), and queries of
//! what it grants.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Map, Value};

pub(super) const REGION: &str = "eu-west-1";
pub(super) const ACCOUNT: &str = "123456789012";

/// The template as JSON, its short-form tags (`!Sub x`) turned into the long form (`{"Fn::Sub": x}`).
fn template() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    let text = std::fs::read_to_string(&path).expect("read template.yaml");
    long_form(serde_norway::from_str(&text).expect("parse template.yaml"))
}

fn long_form(value: serde_norway::Value) -> Value {
    use serde_norway::Value as Yaml;
    match value {
        Yaml::Null => Value::Null,
        Yaml::Bool(flag) => Value::Bool(flag),
        Yaml::Number(number) => serde_json::to_value(number).expect("a number"),
        Yaml::String(text) => Value::String(text),
        Yaml::Sequence(items) => Value::Array(items.into_iter().map(long_form).collect()),
        Yaml::Mapping(entries) => Value::Object(
            entries
                .into_iter()
                .map(|(key, value)| (key.as_str().expect("a string key").to_owned(), long_form(value)))
                .collect(),
        ),
        Yaml::Tagged(tagged) => {
            let name = tagged.tag.to_string().trim_start_matches('!').to_owned();
            let mut inner = long_form(tagged.value);
            let key = match name.as_str() {
                "Ref" | "Condition" => name,
                "GetAtt" => {
                    if let Value::String(text) = &inner {
                        inner = json!(text.splitn(2, '.').collect::<Vec<_>>());
                    }
                    "Fn::GetAtt".to_owned()
                }
                _ => format!("Fn::{name}"),
            };
            json!({ key: inner })
        }
    }
}

/// A stack of the template with some parameters set (the others at their defaults).
pub(crate) struct Rendered {
    pub(super) template: Value,
    parameters: HashMap<String, String>,
}

impl Rendered {
    pub(crate) fn new(parameters: &[(&str, &str)]) -> Rendered {
        let template = template();
        let mut values: HashMap<String, String> = template["Parameters"]
            .as_object()
            .expect("Parameters")
            .iter()
            .filter_map(|(name, spec)| Some((name.clone(), scalar(spec.get("Default")?))))
            .collect();
        for (name, value) in parameters {
            assert!(template["Parameters"].get(*name).is_some(), "no parameter {name}");
            values.insert(name.to_string(), value.to_string());
        }
        Rendered { template, parameters: values }
    }

    fn reference(&self, name: &str) -> Option<Value> {
        let value = match name {
            "AWS::NoValue" => return None,
            "AWS::Partition" => "aws".to_owned(),
            "AWS::Region" => REGION.to_owned(),
            "AWS::AccountId" => ACCOUNT.to_owned(),
            "AWS::StackId" => {
                format!("arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/agent/0a1b2c3d-1111-2222-3333-444455556666")
            }
            _ => match self.parameters.get(name) {
                Some(value) => value.clone(),
                // A resource: its physical id, which the checks here do not depend on.
                None => format!("{{{name}}}"),
            },
        };
        Some(Value::String(value))
    }

    fn condition(&self, name: &str) -> bool {
        let condition = self.template["Conditions"].get(name).unwrap_or_else(|| panic!("no condition {name}"));
        self.truth(condition)
    }

    fn truth(&self, expression: &Value) -> bool {
        let (function, arguments) = function(expression).expect("a condition function");
        let arguments = arguments.as_array();
        match function {
            "Condition" => self.condition(expression["Condition"].as_str().unwrap()),
            "Fn::Equals" => {
                let arguments = arguments.expect("Fn::Equals arguments");
                self.eval(&arguments[0]) == self.eval(&arguments[1])
            }
            "Fn::Not" => !self.truth(&arguments.expect("Fn::Not argument")[0]),
            "Fn::And" => arguments.expect("Fn::And arguments").iter().all(|a| self.truth(a)),
            "Fn::Or" => arguments.expect("Fn::Or arguments").iter().any(|a| self.truth(a)),
            other => panic!("{other} is not a condition function"),
        }
    }

    /// The value CloudFormation gives `value`; `None` for `AWS::NoValue`.
    fn eval(&self, value: &Value) -> Option<Value> {
        if let Some((name, argument)) = function(value) {
            return match name {
                "Ref" => self.reference(argument.as_str().expect("Ref name")),
                "Fn::If" => {
                    let [condition, then, otherwise] = argument.as_array().expect("Fn::If arguments").as_slice() else {
                        panic!("Fn::If takes three arguments")
                    };
                    let chosen = if self.condition(condition.as_str().unwrap()) { then } else { otherwise };
                    self.eval(chosen)
                }
                "Fn::Sub" => Some(Value::String(self.sub(argument))),
                "Fn::Select" => {
                    let arguments = argument.as_array().expect("Fn::Select arguments");
                    let index: usize = scalar(&self.eval(&arguments[0])?).parse().expect("an index");
                    let list = self.eval(&arguments[1])?;
                    Some(list.as_array().expect("a list")[index].clone())
                }
                "Fn::Split" => {
                    let arguments = argument.as_array().expect("Fn::Split arguments");
                    let separator = arguments[0].as_str().expect("a separator");
                    let text = scalar(&self.eval(&arguments[1])?);
                    Some(json!(text.split(separator).collect::<Vec<_>>()))
                }
                "Fn::Join" => {
                    let arguments = argument.as_array().expect("Fn::Join arguments");
                    let separator = arguments[0].as_str().expect("a separator");
                    let list = self.eval(&arguments[1])?;
                    // A list parameter left unset renders as its name, one item.
                    let parts: Vec<String> = match &list {
                        Value::Array(items) => items.iter().map(scalar).collect(),
                        one => vec![scalar(one)],
                    };
                    Some(Value::String(parts.join(separator)))
                }
                "Fn::GetAtt" => Some(Value::String(format!("{{{}}}", argument[0].as_str().unwrap_or("?")))),
                "Fn::Equals" | "Fn::Not" | "Fn::And" | "Fn::Or" | "Condition" => Some(Value::Bool(self.truth(value))),
                other => panic!("the renderer does not know {other}"),
            };
        }
        Some(match value {
            Value::Array(items) => Value::Array(items.iter().filter_map(|item| self.eval(item)).collect()),
            Value::Object(entries) => Value::Object(
                entries.iter().filter_map(|(key, value)| Some((key.clone(), self.eval(value)?))).collect::<Map<_, _>>(),
            ),
            scalar => scalar.clone(),
        })
    }

    fn sub(&self, argument: &Value) -> String {
        let (text, variables) = match argument {
            Value::String(text) => (text.as_str(), HashMap::new()),
            Value::Array(parts) => {
                let variables = parts[1]
                    .as_object()
                    .expect("Fn::Sub variables")
                    .iter()
                    .map(|(name, value)| (name.clone(), scalar(&self.eval(value).expect("a variable"))))
                    .collect();
                (parts[0].as_str().expect("Fn::Sub text"), variables)
            }
            other => panic!("Fn::Sub of {other}"),
        };
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}').expect("a closed ${…}") + start;
            let name = &rest[start + 2..end];
            let value = match variables.get(name) {
                Some(value) => value.clone(),
                None => scalar(&self.reference(name).expect("a value")),
            };
            out.push_str(&value);
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// The rendered properties of a resource, or `None` when its condition leaves it out.
    pub(crate) fn resource(&self, name: &str) -> Option<Value> {
        let resource = &self.template["Resources"][name];
        assert!(resource.is_object(), "no resource {name}");
        if let Some(condition) = resource["Condition"].as_str() {
            if !self.condition(condition) {
                return None;
            }
        }
        self.eval(&resource["Properties"])
    }

    /// The statements of a managed policy resource.
    pub(super) fn policy_statements(&self, name: &str) -> Vec<Value> {
        let properties = self.resource(name).unwrap_or_else(|| panic!("{name} is not created"));
        properties["PolicyDocument"]["Statement"].as_array().expect("statements").clone()
    }

    /// The statements of a function's inline policies (`Policies` entries with a `Statement`).
    pub(crate) fn function_statements(&self, name: &str) -> Vec<Value> {
        let properties = self.resource(name).unwrap_or_else(|| panic!("{name} is not created"));
        let policies = properties["Policies"].as_array().cloned().unwrap_or_default();
        policies.iter().filter_map(|policy| policy["Statement"].as_array().cloned()).flatten().collect()
    }
}

fn function(value: &Value) -> Option<(&str, &Value)> {
    let object = value.as_object()?;
    if object.len() != 1 {
        return None;
    }
    let (key, argument) = object.iter().next()?;
    (key == "Ref" || key == "Condition" || key.starts_with("Fn::")).then_some((key.as_str(), argument))
}

pub(crate) fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The resources of a statement, as a list.
pub(crate) fn resources(statement: &Value) -> Vec<String> {
    match &statement["Resource"] {
        Value::Array(items) => items.iter().map(scalar).collect(),
        one => vec![scalar(one)],
    }
}

/// Whether an IAM resource pattern (`*` any run of characters, `?` one) matches `arn`.
pub(crate) fn iam_matches(pattern: &str, arn: &str) -> bool {
    fn matches(pattern: &[u8], text: &[u8]) -> bool {
        match (pattern.first(), text.first()) {
            (None, None) => true,
            (Some(b'*'), _) => matches(&pattern[1..], text) || (!text.is_empty() && matches(pattern, &text[1..])),
            (Some(b'?'), Some(_)) => matches(&pattern[1..], &text[1..]),
            (Some(p), Some(t)) if p == t => matches(&pattern[1..], &text[1..]),
            _ => false,
        }
    }
    matches(pattern.as_bytes(), arn.as_bytes())
}

/// The Secrets Manager resources a function's own statements grant.
pub(super) fn secret_grants(stack: &Rendered, function: &str) -> Vec<String> {
    stack
        .function_statements(function)
        .iter()
        .filter(|statement| scalar(&statement["Action"]) == "secretsmanager:GetSecretValue")
        .flat_map(resources)
        .collect()
}
