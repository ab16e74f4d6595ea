//! The S3 and DynamoDB adapters against moto: pagination, conditional commits,
//! spilling, expiry and tenant isolation, checked through the traits and the raw items.

mod commits;
mod lifecycle;
mod reads;
mod s3;

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use agent_core::store::{SessionState, SessionStore, StoreError, TurnCommit};
use agent_core::{Message, SessionId, SkillPath, UserId};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_store::{AwsStores, CallCounter, StoreSettings};
use local_stack::moto;

type Item = HashMap<String, AttributeValue>;

const TTL_DAYS: u32 = 30;

/// A bucket and a sessions table of this test's own in the shared moto_server.
struct World {
    stores: AwsStores,
    counter: CallCounter,
    table: String,
}

async fn world() -> World {
    world_at(&moto::moto().endpoint).await
}

async fn world_at(endpoint: &str) -> World {
    let config = moto::sdk_config(endpoint).await;
    let settings = StoreSettings {
        sessions_table: moto::unique_name("sessions"),
        skills_bucket: moto::unique_name("skills"),
        session_ttl_days: TTL_DAYS,
        s3_force_path_style: true,
    };
    let counter = CallCounter::new();
    let stores = AwsStores::from_sdk_config(&config, &settings, Some(counter.clone()));
    moto::create_bucket(stores.objects.client(), &settings.skills_bucket).await;
    moto::create_sessions_table(stores.sessions.client(), &settings.sessions_table).await;
    counter.reset();
    World { stores, counter, table: settings.sessions_table }
}

impl World {
    fn dynamodb(&self) -> &aws_sdk_dynamodb::Client {
        self.stores.sessions.client()
    }

    /// Every item of a session's partition, in sort-key order, as an operator would see them.
    async fn raw_items(&self, user: &str, session: &str) -> Vec<Item> {
        let mut items = self
            .dynamodb()
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", AttributeValue::S(format!("{user}#{session}")))
            .consistent_read(true)
            .send()
            .await
            .expect("query")
            .items
            .unwrap_or_default();
        items.sort_by_key(|item| item["sk"].as_s().unwrap().clone());
        items
    }

    async fn raw_item(&self, user: &str, session: &str, sk: &str) -> Option<Item> {
        self.dynamodb()
            .get_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S(format!("{user}#{session}")))
            .key("sk", AttributeValue::S(sk.to_string()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }

    async fn put_raw(&self, item: Item) {
        self.dynamodb().put_item().table_name(&self.table).set_item(Some(item)).send().await.expect("put item");
    }

    async fn commit(
        &self,
        user: &UserId,
        session: &SessionId,
        expected_version: u64,
        new_messages: Vec<Message>,
        state: SessionState,
        now: i64,
    ) -> Result<(), StoreError> {
        let history_len = 2 * expected_version as usize;
        let commit_token = format!("test-{expected_version}-{now}");
        let commit = TurnCommit {
            expected_version,
            new_messages,
            history_len,
            state,
            now,
            commit_token,
            idempotency: None,
            usage: None,
            skill_versions: Default::default(),
        };
        self.stores.sessions.commit(user, session, &commit).await
    }
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn ids(user: &str, session: &str) -> (UserId, SessionId) {
    (UserId::parse(user).unwrap(), SessionId::parse(session).unwrap())
}

fn turn(question: &str, answer: &str) -> Vec<Message> {
    vec![Message::user(question), Message::assistant(answer)]
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_string())
}

fn n(value: i64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn skill(path: &str) -> SkillPath {
    SkillPath::parse(path).unwrap()
}
