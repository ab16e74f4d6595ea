//! The storage ports on AWS: skills, tickets and workspace blobs in S3, sessions in DynamoDB.
//!
//! Clients are built once per process (per Lambda cold start) by [`AwsStores::from_env`]
//! and shared by every invocation. A [`CallCounter`] can be attached to count requests.

mod codec;
mod counter;
mod dynamo;
mod s3;

use std::sync::Arc;

use aws_config::SdkConfig;
use thiserror::Error;

pub use counter::{CallCounter, CallCounts, CountingInterceptor, Service};
pub use dynamo::{
    idempotency_sort_key, partition_key, turn_sort_key, usage_day_sort_key, usage_partition_key, DynamoSessionStore,
    BUDGET_SORT_KEY, IDEMPOTENCY_SORT_KEY_PREFIX, IDEMPOTENCY_TTL_SECS, LEGACY_META_SORT_KEY, META_SORT_KEY,
    OWNER_ATTRIBUTE, SESSIONS_BY_USER_INDEX, SPILL_THRESHOLD_BYTES, TITLE_ATTRIBUTE, TURN_SORT_KEY_PREFIX,
    USAGE_DAY_PREFIX, USAGE_PARTITION_SUFFIX, USAGE_RETENTION_DAYS,
};
pub use s3::{S3ObjectStore, STAGED_UPLOAD_TAG};

/// Sessions idle for longer than this are gone, unless `SESSION_TTL_DAYS` says otherwise.
pub const DEFAULT_SESSION_TTL_DAYS: u32 = 30;

/// A configuration problem found at start-up; the message names the variable to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("{0} is required but not set")]
    Missing(&'static str),
    #[error("{name} is invalid ({value:?}): {reason}")]
    Invalid { name: &'static str, value: String, reason: &'static str },
}

/// What the stores need besides the AWS clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSettings {
    pub sessions_table: String,
    pub skills_bucket: String,
    pub session_ttl_days: u32,
    /// Path-style S3 addressing, needed by local endpoints such as moto or MinIO.
    pub s3_force_path_style: bool,
}

impl StoreSettings {
    /// Reads the settings from the process environment (see [`StoreSettings::from_lookup`]).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads `SESSIONS_TABLE`, `SKILLS_BUCKET` (both required), `SESSION_TTL_DAYS` (default 30)
    /// and whether S3 needs path-style addressing: when `S3_FORCE_PATH_STYLE=true` or a custom
    /// endpoint is set through `AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_S3`. Empty values count
    /// as unset, because deployment tools often define variables with empty values.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let sessions_table = get("SESSIONS_TABLE").ok_or(ConfigError::Missing("SESSIONS_TABLE"))?;
        let skills_bucket = get("SKILLS_BUCKET").ok_or(ConfigError::Missing("SKILLS_BUCKET"))?;
        let session_ttl_days = match get("SESSION_TTL_DAYS") {
            None => DEFAULT_SESSION_TTL_DAYS,
            Some(raw) => match raw.parse::<u32>() {
                Ok(days) if days > 0 => days,
                _ => {
                    return Err(ConfigError::Invalid {
                        name: "SESSION_TTL_DAYS",
                        value: raw,
                        reason: "must be a whole number of days, at least 1",
                    })
                }
            },
        };
        let s3_force_path_style = s3_path_style(&get);
        Ok(Self { sessions_table, skills_bucket, session_ttl_days, s3_force_path_style })
    }
}

/// Path-style S3 addressing: for a custom endpoint (a local stand-in has no per-bucket host names),
/// or when `S3_FORCE_PATH_STYLE=true`.
pub(crate) fn s3_path_style(get: &impl Fn(&str) -> Option<String>) -> bool {
    get("AWS_ENDPOINT_URL").is_some()
        || get("AWS_ENDPOINT_URL_S3").is_some()
        || get("S3_FORCE_PATH_STYLE").is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The two stores, sharing one S3 client (the session store spills large turns there).
#[derive(Debug, Clone)]
pub struct AwsStores {
    pub objects: Arc<S3ObjectStore>,
    pub sessions: Arc<DynamoSessionStore>,
}

impl AwsStores {
    /// Builds the clients from the default AWS configuration chain, which honours
    /// `AWS_ENDPOINT_URL` and its per-service variants such as `AWS_ENDPOINT_URL_DYNAMODB`.
    /// The settings are checked first so that a missing variable fails fast and clearly.
    pub async fn from_env(counter: Option<CallCounter>) -> Result<Self, ConfigError> {
        let settings = StoreSettings::from_env()?;
        let config = aws_http::load_config().await;
        Ok(Self::from_sdk_config(&config, &settings, counter))
    }

    /// Builds the clients from an explicit SDK configuration (tests point it at moto).
    pub fn from_sdk_config(config: &SdkConfig, settings: &StoreSettings, counter: Option<CallCounter>) -> Self {
        let mut s3 = aws_sdk_s3::config::Builder::from(config).force_path_style(settings.s3_force_path_style);
        let mut dynamodb = aws_sdk_dynamodb::config::Builder::from(config);
        if let Some(counter) = &counter {
            s3 = s3.interceptor(counter.interceptor(Service::S3));
            dynamodb = dynamodb.interceptor(counter.interceptor(Service::DynamoDb));
        }
        Self::from_clients(
            aws_sdk_s3::Client::from_conf(s3.build()),
            aws_sdk_dynamodb::Client::from_conf(dynamodb.build()),
            settings,
        )
    }

    /// Wraps ready-made clients; counting, if wanted, must already be attached to them.
    pub fn from_clients(s3: aws_sdk_s3::Client, dynamodb: aws_sdk_dynamodb::Client, settings: &StoreSettings) -> Self {
        let objects = Arc::new(S3ObjectStore::new(s3, settings.skills_bucket.clone()));
        let sessions = Arc::new(DynamoSessionStore::new(
            dynamodb,
            settings.sessions_table.clone(),
            objects.clone(),
            settings.session_ttl_days,
        ));
        Self { objects, sessions }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn settings_need_table_and_bucket() {
        let err = StoreSettings::from_lookup(lookup(&[("SKILLS_BUCKET", "b")])).unwrap_err();
        assert_eq!(err, ConfigError::Missing("SESSIONS_TABLE"));
        let err = StoreSettings::from_lookup(lookup(&[("SESSIONS_TABLE", "t"), ("SKILLS_BUCKET", " ")])).unwrap_err();
        assert!(err.to_string().contains("SKILLS_BUCKET"), "{err}");
    }

    #[test]
    fn settings_defaults_and_overrides() {
        let settings = StoreSettings::from_lookup(lookup(&[("SESSIONS_TABLE", "t"), ("SKILLS_BUCKET", "b")])).unwrap();
        assert_eq!(
            settings,
            StoreSettings {
                sessions_table: "t".into(),
                skills_bucket: "b".into(),
                session_ttl_days: 30,
                s3_force_path_style: false
            }
        );
        for vars in [
            &[("SESSIONS_TABLE", "t"), ("SKILLS_BUCKET", "b"), ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")][..],
            &[("SESSIONS_TABLE", "t"), ("SKILLS_BUCKET", "b"), ("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:5000")],
            &[("SESSIONS_TABLE", "t"), ("SKILLS_BUCKET", "b"), ("S3_FORCE_PATH_STYLE", "TRUE")],
        ] {
            let vars: &'static [(&str, &str)] = vars;
            assert!(StoreSettings::from_lookup(lookup(vars)).unwrap().s3_force_path_style, "{vars:?}");
        }
        let settings = StoreSettings::from_lookup(lookup(&[
            ("SESSIONS_TABLE", "t"),
            ("SKILLS_BUCKET", "b"),
            ("SESSION_TTL_DAYS", "7"),
        ]))
        .unwrap();
        assert_eq!(settings.session_ttl_days, 7);
        for bad in ["0", "-1", "week"] {
            let vars: Vec<(&'static str, String)> =
                vec![("SESSIONS_TABLE", "t".into()), ("SKILLS_BUCKET", "b".into()), ("SESSION_TTL_DAYS", bad.into())];
            let err = StoreSettings::from_lookup(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone()))
                .unwrap_err();
            assert!(err.to_string().contains("SESSION_TTL_DAYS"), "{err}");
        }
    }
}
