//! The alarms (failure queues, function errors, the 5xx rate, turn duration) and the dashboard,
//! checked against the metrics the functions emit.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::render::{scalar, Rendered};

/// Every alarm of the template, by resource name.
pub(super) fn alarms(stack: &Rendered) -> Vec<(String, Value)> {
    let resources = stack.template["Resources"].as_object().expect("Resources");
    resources
        .iter()
        .filter(|(_, resource)| resource["Type"] == "AWS::CloudWatch::Alarm")
        .filter_map(|(name, _)| Some((name.clone(), stack.resource(name)?)))
        .collect()
}

/// The metrics an alarm watches: (namespace, name, dimensions) of its metric or of each `MetricStat`.
pub(super) fn watched(alarm: &Value) -> Vec<(String, String, Map<String, Value>)> {
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
