//! What `template.yaml` gives uploads: the routes, the lifecycle rule that expires a staged upload
//! by the tag its presigned PUT carries, and the permissions to tag it and to delete it.

use aws_store::STAGED_UPLOAD_TAG;
use serde_json::{json, Value};

use crate::template::{iam_matches, resources, scalar, Rendered};

/// Whether `function`'s own statements allow `action` on `arn`.
fn allows(stack: &Rendered, function: &str, action: &str, arn: &str) -> bool {
    stack.function_statements(function).iter().any(|statement| {
        let actions = match &statement["Action"] {
            Value::Array(actions) => actions.iter().map(scalar).collect(),
            one => vec![scalar(one)],
        };
        actions.iter().any(|granted| granted == action)
            && resources(statement).iter().any(|resource| iam_matches(resource, arn))
    })
}

#[test]
fn the_template_routes_uploads_expires_staged_ones_and_lets_turns_tag_and_delete_them() {
    let stack = Rendered::new(&[]);
    let function = stack.resource("HttpTurnFunction").expect("http-turn");
    let routes: Vec<(String, String)> = function["Events"]
        .as_object()
        .expect("Events")
        .values()
        .map(|event| (scalar(&event["Properties"]["Method"]), scalar(&event["Properties"]["Path"])))
        .collect();
    for route in [
        ("PUT", "/sessions/{session_id}/uploads/{proxy+}"),
        ("POST", "/sessions/{session_id}/uploads"),
        ("GET", "/sessions/{session_id}/shown/{sha256}"),
    ] {
        assert!(routes.contains(&(route.0.to_owned(), route.1.to_owned())), "{route:?} in {routes:?}");
    }

    let bucket = stack.resource("SkillsBucket").expect("the bucket");
    let (tag, value) = STAGED_UPLOAD_TAG;
    let rules = bucket["LifecycleConfiguration"]["Rules"].as_array().expect("lifecycle rules");
    let staged = rules.iter().find(|rule| rule["TagFilters"] == json!([{"Key": tag, "Value": value}]));
    let staged = staged.expect("a rule selects staged uploads by the tag aws-store signs in");
    assert_eq!(
        (scalar(&staged["Status"]), scalar(&staged["ExpirationInDays"])),
        ("Enabled".to_owned(), "1".to_owned())
    );
    assert!(staged.get("Prefix").is_none(), "the rule is the tag's alone: {staged}");

    let name = scalar(&bucket["BucketName"]);
    let upload = format!("arn:aws:s3:::{name}/user-a/uploads/s1/{}", "a".repeat(64));
    let blob = format!("arn:aws:s3:::{name}/user-a/workspaces/s1/blobs/{}", "a".repeat(64));
    for function in ["HttpTurnFunction", "StreamTurnFunction", "QueueTurnFunction"] {
        assert!(allows(&stack, function, "s3:DeleteObject", &upload), "{function} deletes what it attached");
        assert!(!allows(&stack, function, "s3:DeleteObject", &blob), "{function} never deletes a workspace's file");
    }
    assert!(allows(&stack, "HttpTurnFunction", "s3:PutObjectTagging", &upload), "the signer may tag uploads");
    assert!(!allows(&stack, "HttpTurnFunction", "s3:PutObjectTagging", &blob));
}
