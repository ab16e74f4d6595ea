//! What the functions are given: the sessions index http-turn alone queries, the cursor and bundle
//! signing keys and who reads them, the approval policy.

use serde_json::{json, Value};

use super::alarms::{alarms, watched};
use super::render::{iam_matches, resources, scalar, secret_grants, Rendered};

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
