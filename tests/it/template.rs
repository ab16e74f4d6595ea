//! The permissions `template.yaml` gives the turn functions, rendered for given parameters the way
//! CloudFormation resolves them (conditions, `!If`, `!Sub`, `!Join`, `!Select`, `!Split`, pseudo parameters):
//! the Bedrock policy for a model id and for an inference profile ARN, and the model key's grant
//! apart from the tenants' expert secrets; the skills index fed every file under a tenant's skills/; the
//! index of a user's sessions, queried by http-turn alone; the bundle signing key, read by the turn
//! functions and the bundle maker only.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{json, Map, Value};

const REGION: &str = "eu-west-1";
const ACCOUNT: &str = "123456789012";

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
    template: Value,
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
    fn policy_statements(&self, name: &str) -> Vec<Value> {
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

/// A well-formed Bedrock ARN: `arn:aws:bedrock:{region}:{account}:{type}/{id}`, one of each.
fn is_bedrock_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [prefix, partition, service, _region, account, rest] = parts.as_slice() else { return false };
    let Some((kind, id)) = rest.split_once('/') else { return false };
    *prefix == "arn"
        && *partition == "aws"
        && *service == "bedrock"
        && (account.is_empty() || account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()))
        && ["foundation-model", "inference-profile", "application-inference-profile"].contains(&kind)
        && !id.is_empty()
        && !id.contains("arn:")
        && !id.contains('/')
}

const MODEL_ID: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
const PROFILE_ID: &str = "eu.anthropic.claude-sonnet-4-20250514-v1:0";

/// The Bedrock policy's two statements: the model or profile itself, and the foundation models
/// reached through the profile (with its condition).
fn bedrock_policy(model: &str) -> (Vec<String>, Vec<String>, String) {
    let stack = Rendered::new(&[("LlmProvider", "bedrock"), ("LlmModel", model)]);
    let statements = stack.policy_statements("BedrockInvokePolicy");
    assert_eq!(statements.len(), 2, "{statements:?}");
    let through = statements[1]["Condition"]["StringEquals"]["bedrock:InferenceProfileArn"].clone();
    (resources(&statements[0]), resources(&statements[1]), scalar(&through))
}

#[test]
fn bedrock_is_granted_the_model_of_an_id() {
    for model in [MODEL_ID, PROFILE_ID] {
        let (direct, routed, through) = bedrock_policy(model);
        let profile = format!("arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{model}");
        assert_eq!(direct, [format!("arn:aws:bedrock:{REGION}::foundation-model/{model}"), profile.clone()]);
        assert_eq!(routed, ["arn:aws:bedrock:*::foundation-model/*"]);
        assert_eq!(through, profile);
    }
    // Without Bedrock there is no Bedrock policy.
    assert!(Rendered::new(&[("LlmModel", "gpt-4o")]).resource("BedrockInvokePolicy").is_none());
}

#[test]
fn bedrock_is_granted_the_inference_profile_of_an_arn() {
    for profile in [
        format!("arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{PROFILE_ID}"),
        format!("arn:aws:bedrock:us-east-1:{ACCOUNT}:application-inference-profile/a1b2c3d4e5f6"),
        format!("arn:aws:bedrock:{REGION}::foundation-model/{MODEL_ID}"),
    ] {
        let (direct, routed, through) = bedrock_policy(&profile);
        for arn in direct.iter().chain([&through]) {
            assert!(is_bedrock_arn(arn), "{arn} is not a Bedrock ARN (LlmModel {profile})");
        }
        assert_eq!(direct, std::slice::from_ref(&profile), "the profile itself");
        assert_eq!(routed, ["arn:aws:bedrock:*::foundation-model/*"]);
        assert_eq!(through, profile, "the foundation models only through this profile");
    }
}

/// The Secrets Manager resources a function's own statements grant.
fn secret_grants(stack: &Rendered, function: &str) -> Vec<String> {
    stack
        .function_statements(function)
        .iter()
        .filter(|statement| scalar(&statement["Action"]) == "secretsmanager:GetSecretValue")
        .flat_map(resources)
        .collect()
}

#[test]
fn the_model_key_and_the_tenants_expert_secrets_are_granted_apart() {
    let name = "agent-runtime/llm-api-key";
    let stack = Rendered::new(&[("LlmApiKeySecretName", name)]);
    let key_arn = format!("arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-AbCdEf");
    let tenant_arn = format!("arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:agent/user-1/github-token-AbCdEf");
    let key_grant = resources(&stack.policy_statements("ModelApiKeyReadPolicy")[0]);
    assert_eq!(key_grant, [format!("arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-??????")]);
    assert!(iam_matches(&key_grant[0], &key_arn));
    assert!(!iam_matches(&key_grant[0], &tenant_arn));
    for function in ["HttpTurnFunction", "StreamTurnFunction", "QueueTurnFunction"] {
        let experts = secret_grants(&stack, function);
        assert!(!experts.is_empty(), "{function} reads the tenants' expert secrets");
        assert!(experts.iter().any(|grant| iam_matches(grant, &tenant_arn)), "{function}: {experts:?}");
        assert!(
            !experts.iter().any(|grant| iam_matches(grant, &key_arn)),
            "{function} reaches the model key: {experts:?}"
        );
    }
    // The parameter refuses a key inside the tenants' namespace, as the functions do at start.
    let pattern = stack.template["Parameters"]["LlmApiKeySecretName"]["AllowedPattern"].as_str().unwrap().to_owned();
    for (value, allowed) in
        [("", true), (name, true), ("prod/llm-key", true), ("agent/llm-api-key", false), ("agent/user-1/key", false)]
    {
        assert_eq!(allowed_by(&pattern, value), allowed, "LlmApiKeySecretName={value:?} against {pattern}");
    }
}

/// Whether a parameter's `AllowedPattern` (a Java regular expression, matched whole) allows
/// `value`, checked with Python's `re` (the project's `.venv`), whose syntax agrees for lookaheads.
fn allowed_by(pattern: &str, value: &str) -> bool {
    let check = "import re, sys; sys.exit(0 if re.fullmatch(sys.argv[1], sys.argv[2]) else 1)";
    let status = std::process::Command::new("python3").args(["-c", check, pattern, value]).status().expect("python3");
    match status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("python3 failed on {pattern}: {other:?}"),
    }
}

#[test]
fn every_file_under_a_tenants_skills_and_its_agents_reach_the_skills_index_and_nothing_else_does() {
    let stack = Rendered::new(&[]);
    let bucket = stack.resource("SkillsBucket").expect("the bucket");
    assert_eq!(bucket["NotificationConfiguration"], json!({"EventBridgeConfiguration": {"EventBridgeEnabled": true}}));
    let rule = stack.resource("SkillsIndexRule").expect("the rule");
    let pattern = &rule["EventPattern"];
    assert_eq!(pattern["source"], json!(["aws.s3"]));
    assert_eq!(pattern["detail-type"], json!(["Object Created", "Object Deleted"]));
    assert_eq!(pattern["detail"]["bucket"]["name"], json!([bucket["BucketName"]]), "the rule watches the bucket");
    assert_eq!(rule["Targets"][0]["Arn"], json!("{SkillsIndexFunction}"));
    let wildcards: Vec<&str> = pattern["detail"]["object"]["key"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|key| key["wildcard"].as_str())
        .collect();
    // An EventBridge wildcard's `*` matches any run of characters, `/` included.
    let matched = |key: &str| wildcards.iter().any(|wildcard| iam_matches(wildcard, key));
    for key in [
        "user-1/skills/pdf/SKILL.md",
        "user-1/skills/pdf/forms/guide.md",
        "user-1/skills/docs/memo/examples/one.md",
        "user-1/skills/BASE_PROMPT.md",
        "user-1/agents/code-reviewer.md",
        "user-1/agents/team/nested.md",
    ] {
        assert!(matched(key), "{key} reaches the index");
    }
    for key in [
        "user-1/catalog/index.json",
        "user-1/workspaces/s1/blobs/SKILL.md",
        "user-1/sessions/s1/turn-3.json",
        "user-1/agents/notes.txt",
    ] {
        assert!(!matched(key), "{key} does not");
    }
    let permission = stack.resource("SkillsIndexInvokePermission").expect("the permission");
    assert_eq!(permission["Principal"], json!("events.amazonaws.com"));
    assert_eq!(permission["SourceArn"], json!("{SkillsIndexRule}"));
    let without_sandbox = Rendered::new(&[("Sandbox", "none")]);
    assert!(without_sandbox.resource("SkillsBundleFunction").is_none(), "no bundles without the sandbox image");
}

#[test]
fn with_the_sandbox_image_a_skills_requirements_reach_skills_index_in_that_image_which_writes_only_bundles() {
    let stack =
        Rendered::new(&[("Sandbox", "lambda"), ("SandboxImageUri", "123.dkr.ecr.eu-west-1.amazonaws.com/sandbox:1")]);
    let function = stack.resource("SkillsBundleFunction").expect("the bundle function");
    assert_eq!(function["ImageUri"], json!("123.dkr.ecr.eu-west-1.amazonaws.com/sandbox:1"), "the sandbox's own image");
    assert_eq!(function["ImageConfig"]["EntryPoint"], json!(["/var/runtime/skills-index"]));
    assert_eq!(function["Environment"]["Variables"]["SKILLS_INDEX"], json!("skip"));
    let rule = stack.resource("SkillsBundleRule").expect("the rule");
    assert_eq!(rule["Targets"][0]["Arn"], json!("{SkillsBundleFunction}"));
    let wildcards: Vec<String> = rule["EventPattern"]["detail"]["object"]["key"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|key| key["wildcard"].as_str().map(str::to_owned))
        .collect();
    let matched = |key: &str| wildcards.iter().any(|wildcard| iam_matches(wildcard, key));
    assert!(matched("u1/skills/fechas/requirements.txt") && matched("u1/skills/docs/fechas/scripts/requirements.txt"));
    assert!(!matched("u1/skills/fechas/SKILL.md") && !matched("u1/workspaces/s/requirements.txt"));
    let writes: Vec<String> = stack
        .function_statements("SkillsBundleFunction")
        .iter()
        .filter(|statement| statement["Action"].to_string().contains("s3:PutObject"))
        .flat_map(resources)
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(writes[0].ends_with("/*/skills/*/.bundle/*"), "only bundle folders are written: {writes:?}");
    let permission = stack.resource("SkillsBundleInvokePermission").expect("the permission");
    assert_eq!(permission["SourceArn"], json!("{SkillsBundleRule}"));
}

/// Every alarm of the template, by resource name.
fn alarms(stack: &Rendered) -> Vec<(String, Value)> {
    let resources = stack.template["Resources"].as_object().expect("Resources");
    resources
        .iter()
        .filter(|(_, resource)| resource["Type"] == "AWS::CloudWatch::Alarm")
        .filter_map(|(name, _)| Some((name.clone(), stack.resource(name)?)))
        .collect()
}

/// The metrics an alarm watches: (namespace, name, dimensions) of its metric or of each `MetricStat`.
fn watched(alarm: &Value) -> Vec<(String, String, Map<String, Value>)> {
    let dimensions = |list: &Value| -> Map<String, Value> {
        list.as_array()
            .map(|list| list.iter().map(|d| (scalar(&d["Name"]), d["Value"].clone())).collect())
            .unwrap_or_default()
    };
    if let Some(name) = alarm["MetricName"].as_str() {
        return vec![(scalar(&alarm["Namespace"]), name.to_owned(), dimensions(&alarm["Dimensions"]))];
    }
    alarm["Metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|query| {
            let metric = query["MetricStat"].get("Metric")?;
            Some((scalar(&metric["Namespace"]), scalar(&metric["MetricName"]), dimensions(&metric["Dimensions"])))
        })
        .collect()
}

/// The 5xx statuses the HTTP and streaming functions answer a turn with, read from their source
/// and from the error mapping they share (agent-app's `api`).
fn server_error_statuses() -> std::collections::BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut statuses = std::collections::BTreeSet::new();
    for dir in ["functions/http-turn/src", "functions/stream-turn/src", "shared/agent-app/src"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("the function's source") {
            let text = std::fs::read_to_string(entry.expect("an entry").path()).unwrap_or_default();
            for (index, _) in text.match_indices("ApiError::new(5") {
                statuses.insert(text[index + "ApiError::new(".len()..][..3].to_owned());
            }
        }
    }
    statuses
}

#[test]
fn alarms_watch_the_failure_queues_the_functions_the_5xx_rate_and_turn_duration() {
    let quiet = Rendered::new(&[]);
    let alarms = alarms(&quiet);
    let named = |name: &str| &alarms.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name}")).1;
    for (alarm, queue) in
        [("TurnDeadLetterAlarm", "{TurnDeadLetterQueue}"), ("SkillsIndexFailuresAlarm", "{SkillsIndexFailures}")]
    {
        let metrics = watched(named(alarm));
        assert_eq!(metrics.len(), 1);
        assert_eq!((metrics[0].0.as_str(), metrics[0].1.as_str()), ("AWS/SQS", "ApproximateNumberOfMessagesVisible"));
        assert_eq!(metrics[0].2["QueueName"], json!(queue), "{alarm}");
        assert_eq!(
            (named(alarm)["Threshold"].as_f64(), named(alarm)["ComparisonOperator"].as_str()),
            (Some(0.0), Some("GreaterThanThreshold"))
        );
    }
    for (alarm, metric) in [("FunctionErrorsAlarm", "Errors"), ("FunctionThrottlesAlarm", "Throttles")] {
        let functions: Vec<Value> = watched(named(alarm))
            .into_iter()
            .filter(|(namespace, name, _)| namespace == "AWS/Lambda" && name == metric)
            .map(|(_, _, dimensions)| dimensions["FunctionName"].clone())
            .collect();
        for function in ["HttpTurnFunction", "StreamTurnFunction", "QueueTurnFunction", "SkillsIndexFunction"] {
            assert!(functions.contains(&json!(format!("{{{function}}}"))), "{alarm} watches {function}");
        }
    }

    // The 5xx rate: every 5xx status the functions answer, of both synchronous functions, over all their turns.
    let statuses = server_error_statuses();
    assert!(statuses.contains("502") && statuses.contains("503"), "{statuses:?}");
    let rate = watched(named("ServerErrorRateAlarm"));
    for function in ["{HttpTurnFunction}", "{StreamTurnFunction}"] {
        let of_function: Vec<&Map<String, Value>> = rate
            .iter()
            .filter(|(namespace, name, dims)| {
                namespace == "AgentRuntime" && name == "Turns" && dims["Function"] == function
            })
            .map(|(_, _, dims)| dims)
            .collect();
        assert!(of_function.iter().any(|dims| dims.len() == 1), "all of {function}'s turns");
        let watched: std::collections::BTreeSet<String> =
            of_function.iter().filter_map(|dims| dims.get("Status").map(scalar)).collect();
        let mut expected = statuses.clone();
        expected.insert("500".to_owned());
        assert_eq!(watched, expected, "{function}'s 5xx statuses");
    }
    for metric in rate.iter().filter(|(namespace, _, _)| namespace == "AgentRuntime") {
        assert!(crate::metrics::METRICS.iter().any(|(name, _)| *name == metric.1), "{} is emitted", metric.1);
    }

    // p95 turn duration at 80% of each turn function's timeout.
    for (alarm, function) in [
        ("HttpTurnDurationAlarm", "HttpTurnFunction"),
        ("StreamTurnDurationAlarm", "StreamTurnFunction"),
        ("QueueTurnDurationAlarm", "QueueTurnFunction"),
    ] {
        let alarm = named(alarm);
        let timeout = quiet.resource(function).expect("the function")["Timeout"].as_f64().expect("a timeout");
        assert_eq!(alarm["Threshold"].as_f64(), Some(timeout * 800.0), "{function}");
        assert_eq!(
            (alarm["ExtendedStatistic"].as_str(), alarm["MetricName"].as_str()),
            (Some("p95"), Some("TurnDuration"))
        );
        assert_eq!(alarm["Dimensions"], json!([{"Name": "Function", "Value": format!("{{{function}}}")}]));
    }

    // Actions only with a topic, and then on every alarm, on alarm and on recovery.
    assert!(alarms.iter().all(|(_, alarm)| alarm.get("AlarmActions").is_none() && alarm.get("OKActions").is_none()));
    let topic = "arn:aws:sns:eu-west-1:123456789012:ops";
    let notified = Rendered::new(&[("AlarmTopicArn", topic)]);
    let notified = self::alarms(&notified);
    assert_eq!(notified.len(), alarms.len());
    for (name, alarm) in &notified {
        assert_eq!((&alarm["AlarmActions"], &alarm["OKActions"]), (&json!([topic]), &json!([topic])), "{name}");
    }
}

#[test]
fn the_dashboard_shows_turns_errors_latency_tokens_and_throttles_from_emitted_metrics() {
    let stack = Rendered::new(&[]);
    let dashboard = stack.resource("OperationsDashboard").expect("the dashboard");
    let body: Value = serde_json::from_str(dashboard["DashboardBody"].as_str().expect("a body")).expect("JSON");
    let widgets = body["widgets"].as_array().expect("widgets");
    let titles: Vec<&str> = widgets.iter().filter_map(|w| w["properties"]["title"].as_str()).collect();
    for wanted in ["Turns by status", "Errors by code", "Turn duration p50 / p95", "Tokens by model", "throttles"] {
        assert!(titles.iter().any(|title| title.contains(wanted)), "a widget for {wanted}: {titles:?}");
    }
    // Every AgentRuntime metric it names, in a row or a SEARCH, is one the functions write.
    let mut named = std::collections::BTreeSet::new();
    for widget in widgets {
        for row in widget["properties"]["metrics"].as_array().into_iter().flatten() {
            let row = row.as_array().expect("a metric row");
            if row.first() == Some(&json!("AgentRuntime")) {
                named.insert(scalar(&row[1]));
            }
            if let Some(expression) = row.first().and_then(|first| first["expression"].as_str()) {
                assert!(expression.contains("{AgentRuntime,Function"), "{expression}");
                let name = expression.split("MetricName=\"").nth(1).and_then(|rest| rest.split('"').next());
                named.insert(name.expect("a MetricName").to_owned());
            }
        }
    }
    for name in &named {
        assert!(crate::metrics::METRICS.iter().any(|(metric, _)| metric == name), "{name} is not emitted");
    }
    for wanted in ["Turns", "TurnDuration", "InputTokens", "OutputTokens", "ModelLatency", "ToolCalls"] {
        assert!(named.contains(wanted), "the dashboard shows {wanted}: {named:?}");
    }
    let percentiles: Vec<&str> = widgets
        .iter()
        .flat_map(|w| w["properties"]["metrics"].as_array().into_iter().flatten())
        .filter_map(|row| row.as_array()?.last()?["stat"].as_str())
        .collect();
    assert!(percentiles.contains(&"p50") && percentiles.contains(&"p95"));
    // The alarm widget lists every alarm.
    let listed =
        widgets.iter().find(|w| w["type"] == "alarm").expect("an alarm widget")["properties"]["alarms"].clone();
    for (name, _) in alarms(&stack).iter().filter(|(name, _)| name != "SandboxErrorsAlarm") {
        assert!(listed.as_array().unwrap().contains(&json!(format!("{{{name}.Arn}}"))), "{name} is on the dashboard");
    }
}

/// `GET /sessions` queries the index the code names: the sessions table declares it with the keys
/// the code writes, and only `http-turn` may query it.
#[test]
fn the_sessions_index_is_declared_with_the_codes_keys_and_only_http_turn_queries_it() {
    let stack = Rendered::new(&[]);
    let table = stack.resource("SessionsTable").expect("the sessions table");
    let index = table["GlobalSecondaryIndexes"]
        .as_array()
        .expect("GlobalSecondaryIndexes")
        .iter()
        .find(|index| index["IndexName"] == aws_store::SESSIONS_BY_USER_INDEX)
        .unwrap_or_else(|| panic!("no index {}", aws_store::SESSIONS_BY_USER_INDEX))
        .clone();
    let keys: Vec<(&str, &str)> = index["KeySchema"]
        .as_array()
        .expect("KeySchema")
        .iter()
        .map(|key| (key["AttributeName"].as_str().unwrap(), key["KeyType"].as_str().unwrap()))
        .collect();
    assert_eq!(keys, [(aws_store::OWNER_ATTRIBUTE, "HASH"), ("updated_at", "RANGE")]);
    let projected: Vec<&str> = index["Projection"]["NonKeyAttributes"]
        .as_array()
        .expect("an INCLUDE projection")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for attribute in ["session_id", "created_at", "version", "expires_at", aws_store::TITLE_ATTRIBUTE] {
        assert!(projected.contains(&attribute), "{attribute} is read from the index: {projected:?}");
    }
    let index_arn = format!("{{SessionsTable.Arn}}/index/{}", aws_store::SESSIONS_BY_USER_INDEX);
    let queries_index = |function: &str| {
        stack.function_statements(function).iter().any(|statement| {
            let actions = match &statement["Action"] {
                Value::Array(actions) => actions.iter().map(scalar).collect(),
                one => vec![scalar(one)],
            };
            actions.iter().any(|action| action == "dynamodb:Query")
                && resources(statement).iter().any(|resource| iam_matches(resource, &index_arn))
        })
    };
    assert!(queries_index("HttpTurnFunction"), "http-turn may query {index_arn}");
    // And API Gateway sends `GET /sessions` to it.
    let function = stack.resource("HttpTurnFunction").expect("http-turn");
    let routes: Vec<(String, String)> = function["Events"]
        .as_object()
        .expect("Events")
        .values()
        .map(|event| (scalar(&event["Properties"]["Method"]), scalar(&event["Properties"]["Path"])))
        .collect();
    assert!(routes.contains(&("GET".to_owned(), "/sessions".to_owned())), "{routes:?}");
    for function in ["StreamTurnFunction", "QueueTurnFunction"] {
        assert!(!queries_index(function), "{function} needs no listing of sessions");
    }
}

#[test]
fn the_cursor_key_is_a_generated_secret_only_http_turn_reads_and_bad_budget_items_raise_an_alarm() {
    let stack = Rendered::new(&[]);
    let secret = stack.resource("CursorSigningKeySecret").expect("the cursor key's secret");
    assert!(secret["GenerateSecretString"]["PasswordLength"].as_u64().unwrap() >= 32, "{secret}");
    let http = stack.resource("HttpTurnFunction").expect("http-turn");
    assert_eq!(http["Environment"]["Variables"]["CURSOR_SIGNING_KEY_SECRET"], json!("{CursorSigningKeySecret}"));
    assert!(secret_grants(&stack, "HttpTurnFunction").contains(&"{CursorSigningKeySecret}".to_owned()));
    for function in ["StreamTurnFunction", "QueueTurnFunction", "SkillsIndexFunction"] {
        assert!(
            !secret_grants(&stack, function).iter().any(|grant| grant.contains("CursorSigningKeySecret")),
            "{function} does not read the cursor key"
        );
    }

    let alarms = alarms(&stack);
    let alarm = &alarms.iter().find(|(name, _)| name == "BudgetConfigErrorsAlarm").expect("the alarm").1;
    let watched = watched(alarm);
    for function in ["HttpTurnFunction", "StreamTurnFunction", "QueueTurnFunction"] {
        assert!(
            watched.iter().any(|(namespace, name, dims)| namespace == "AgentRuntime"
                && name == "BudgetConfigErrors"
                && dims["Function"] == json!(format!("{{{function}}}"))),
            "{function}: {watched:?}"
        );
    }
    assert!(crate::metrics::METRICS.contains(&("BudgetConfigErrors", "Count")));
}

#[test]
fn the_bundle_key_is_a_generated_secret_the_turn_functions_and_the_bundle_maker_read_with_the_lambda_sandbox() {
    let stack =
        Rendered::new(&[("Sandbox", "lambda"), ("SandboxImageUri", "123.dkr.ecr.eu-west-1.amazonaws.com/sandbox:1")]);
    let secret = stack.resource("BundleSigningKeySecret").expect("the bundle key's secret");
    assert!(secret["GenerateSecretString"]["PasswordLength"].as_u64().unwrap() >= 32, "{secret}");
    let variable = |stack: &Rendered, function: &str| {
        stack.resource(function).expect(function)["Environment"]["Variables"].get("BUNDLE_SIGNING_KEY_SECRET").cloned()
    };
    let reads_key = |stack: &Rendered, function: &str| {
        secret_grants(stack, function).iter().any(|grant| grant.contains("BundleSigningKeySecret"))
    };
    // The turn functions check bundles with it, the bundle maker signs them.
    for function in ["HttpTurnFunction", "StreamTurnFunction", "QueueTurnFunction", "SkillsBundleFunction"] {
        assert_eq!(variable(&stack, function), Some(json!("{BundleSigningKeySecret}")), "{function}");
        assert!(secret_grants(&stack, function).contains(&"{BundleSigningKeySecret}".to_owned()), "{function}");
    }
    assert_eq!(variable(&stack, "SkillsIndexFunction"), None, "the index makes no bundle");
    assert!(!reads_key(&stack, "SkillsIndexFunction"));
    // Without the Lambda sandbox nothing installs a bundle: no key, no grant.
    let without = Rendered::new(&[("Sandbox", "none")]);
    assert!(without.resource("BundleSigningKeySecret").is_none());
    for function in ["HttpTurnFunction", "StreamTurnFunction", "QueueTurnFunction"] {
        assert_eq!(variable(&without, function), None, "{function}");
        assert!(!reads_key(&without, function), "{function}");
        assert!(!secret_grants(&without, function).is_empty(), "{function} keeps its other grants");
    }
}

#[test]
fn the_approval_policy_reaches_every_turn_function_from_its_parameters() {
    let stack = Rendered::new(&[("ApprovalRequired", "Bash, Write"), ("ApprovalAllow", "Bash(python3:*)")]);
    for function in ["HttpTurnFunction", "StreamTurnFunction", "QueueTurnFunction"] {
        let variables = &stack.resource(function).expect(function)["Environment"]["Variables"];
        assert_eq!(variables["APPROVAL_REQUIRED"], json!("Bash, Write"), "{function}");
        assert_eq!(variables["APPROVAL_ALLOW"], json!("Bash(python3:*)"), "{function}");
    }
    // Without them nothing waits: the variables are empty, which the functions read as no policy.
    let plain = Rendered::new(&[]);
    let variables = &plain.resource("HttpTurnFunction").unwrap()["Environment"]["Variables"];
    assert_eq!((variables["APPROVAL_REQUIRED"].as_str(), variables["APPROVAL_ALLOW"].as_str()), (Some(""), Some("")));
}
