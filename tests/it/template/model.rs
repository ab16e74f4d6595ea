//! The model's grants: the Bedrock policy for a model id and for an inference profile ARN, and the
//! model key's secret apart from the tenants' expert secrets.

use super::render::{iam_matches, resources, scalar, secret_grants, Rendered, ACCOUNT, REGION};

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
