//! What the tests, benchmarks and local commands make in moto: an SDK configuration for it, unique
//! names, a FIFO queue and the records waiting in it, a bucket, and the sessions table exactly as `template.yaml` declares it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_config::SdkConfig;
use aws_sdk_dynamodb::config::{Credentials, Region};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
    ScalarAttributeType, TimeToLiveSpecification,
};
use serde_norway::Value;

/// An SDK configuration for moto: static test credentials, us-east-1, the given endpoint.
pub async fn sdk_config(endpoint: &str) -> SdkConfig {
    aws_http::config_loader()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto-tests"))
        .endpoint_url(endpoint)
        .load()
        .await
}

/// A name no other test (or test process) uses, for buckets and tables in the shared moto.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Creates a FIFO queue with a unique name, as the template's turn queue is, and returns its URL.
pub async fn create_fifo_queue(client: &aws_sdk_sqs::Client) -> String {
    client
        .create_queue()
        .queue_name(format!("{}.fifo", unique_name("turns")))
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("queue url")
}

/// Takes up to ten messages waiting in `queue_url` (deleted as they are taken), as the records of
/// an SQS event delivered to a queue function for the first time.
pub async fn take_queue_records(client: &aws_sdk_sqs::Client, queue_url: &str) -> Vec<serde_json::Value> {
    use aws_sdk_sqs::types::MessageSystemAttributeName;
    let received = client
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("receive");
    let mut records = Vec::new();
    for message in received.messages() {
        let group = message.attributes().and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId));
        let group = group.expect("a FIFO message has a group");
        let (id, body) = (message.message_id().expect("an id"), message.body().expect("a body"));
        records.push(crate::stack::sqs_record(id, group, body));
        let handle = message.receipt_handle().expect("a receipt handle");
        client.delete_message().queue_url(queue_url).receipt_handle(handle).send().await.expect("delete");
    }
    records
}

pub async fn create_bucket(client: &aws_sdk_s3::Client, name: &str) {
    client.create_bucket().bucket(name).send().await.unwrap_or_else(|err| panic!("create bucket {name}: {err:?}"));
}

/// The `SessionsTable` resource's properties in `template.yaml`. CloudFormation tags such as
/// `!Ref` parse as tagged values, which the properties read here do not use.
fn sessions_table_properties(template: &Path) -> Value {
    let text = std::fs::read_to_string(template).unwrap_or_else(|err| panic!("read {}: {err}", template.display()));
    let document: Value =
        serde_norway::from_str(&text).unwrap_or_else(|err| panic!("parse {}: {err}", template.display()));
    let resource = &document["Resources"]["SessionsTable"];
    assert_eq!(resource["Type"].as_str(), Some("AWS::DynamoDB::Table"), "SessionsTable in {}", template.display());
    resource["Properties"].clone()
}

fn string_at<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or_else(|| panic!("template.yaml: SessionsTable field {field} is not a string"))
}

/// A `KeySchema` list of the template as SDK key elements.
fn key_schema(value: &Value, what: &str) -> Vec<KeySchemaElement> {
    value
        .as_sequence()
        .unwrap_or_else(|| panic!("template.yaml: {what} is not a list"))
        .iter()
        .map(|element| {
            KeySchemaElement::builder()
                .attribute_name(string_at(element, "AttributeName"))
                .key_type(KeyType::from(string_at(element, "KeyType")))
                .build()
                .expect("key schema element")
        })
        .collect()
}

/// One entry of the template's `GlobalSecondaryIndexes` as the SDK's index.
fn global_index(index: &Value) -> GlobalSecondaryIndex {
    let name = string_at(index, "IndexName");
    let projection = &index["Projection"];
    let non_key = projection["NonKeyAttributes"]
        .as_sequence()
        .map(|names| names.iter().map(|name| name.as_str().expect("a NonKeyAttributes name").to_owned()).collect());
    GlobalSecondaryIndex::builder()
        .index_name(name)
        .set_key_schema(Some(key_schema(&index["KeySchema"], &format!("index {name} KeySchema"))))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::from(string_at(projection, "ProjectionType")))
                .set_non_key_attributes(non_key)
                .build(),
        )
        .build()
        .expect("global secondary index")
}

/// Creates a sessions table shaped exactly as `template.yaml` declares it, so the tests
/// exercise the deployed key schema rather than a copy of it.
pub async fn create_sessions_table(client: &aws_sdk_dynamodb::Client, table_name: &str) {
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../template.yaml");
    let properties = sessions_table_properties(&template);

    let definitions = properties["AttributeDefinitions"]
        .as_sequence()
        .expect("SessionsTable.AttributeDefinitions")
        .iter()
        .map(|definition| {
            AttributeDefinition::builder()
                .attribute_name(string_at(definition, "AttributeName"))
                .attribute_type(ScalarAttributeType::from(string_at(definition, "AttributeType")))
                .build()
                .expect("attribute definition")
        })
        .collect::<Vec<_>>();
    let key_schema = key_schema(&properties["KeySchema"], "SessionsTable.KeySchema");
    // Every global secondary index the template declares, with its keys and projection.
    let indexes = properties["GlobalSecondaryIndexes"]
        .as_sequence()
        .map(|indexes| indexes.iter().map(global_index).collect::<Vec<_>>())
        .filter(|indexes| !indexes.is_empty());
    let billing_mode = BillingMode::from(string_at(&properties, "BillingMode"));

    client
        .create_table()
        .table_name(table_name)
        .set_attribute_definitions(Some(definitions))
        .set_key_schema(Some(key_schema))
        .set_global_secondary_indexes(indexes)
        .billing_mode(billing_mode)
        .send()
        .await
        .unwrap_or_else(|err| panic!("create table {table_name}: {err:?}"));

    let ttl = &properties["TimeToLiveSpecification"];
    if ttl["Enabled"].as_bool() == Some(true) {
        client
            .update_time_to_live()
            .table_name(table_name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(string_at(ttl, "AttributeName"))
                    .enabled(true)
                    .build()
                    .expect("ttl specification"),
            )
            .send()
            .await
            .unwrap_or_else(|err| panic!("enable TTL on {table_name}: {err:?}"));
    }
}
