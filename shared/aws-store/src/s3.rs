//! `ObjectStore` on S3.

use std::time::Duration;

use agent_ports::store::{Fetched, Object, ObjectMeta, ObjectStore, StoreError, UploadLink, WriteCondition};
use async_trait::async_trait;
use aws_sdk_s3::config::RequestChecksumCalculation;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use aws_smithy_types::error::display::DisplayErrorContext;

/// The tag every object put through a presigned upload carries (`x-amz-tagging`, signed): the
/// bucket's lifecycle rule expires objects with it after a day, so an upload no turn attached does
/// not stay. A turn that attaches it copies its bytes elsewhere, untagged.
pub const STAGED_UPLOAD_TAG: (&str, &str) = ("agent-upload", "staged");

/// Objects in one S3 bucket, keyed exactly as `agent_ports::keys` builds them.
#[derive(Debug, Clone)]
pub struct S3ObjectStore {
    client: Client,
    bucket: String,
}

impl S3ObjectStore {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self { client, bucket: bucket.into() }
    }

    /// The skills bucket alone, for functions that need no session store: `SKILLS_BUCKET`, with
    /// path-style addressing when a custom endpoint is set (as [`crate::StoreSettings`] decides).
    pub async fn from_env(counter: Option<crate::CallCounter>) -> Result<Self, crate::ConfigError> {
        let get = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let bucket = get("SKILLS_BUCKET").ok_or(crate::ConfigError::Missing("SKILLS_BUCKET"))?;
        let path_style = crate::s3_path_style(&get);
        let config = aws_http::load_config().await;
        let mut s3 = aws_sdk_s3::config::Builder::from(&config).force_path_style(path_style);
        if let Some(counter) = &counter {
            s3 = s3.interceptor(counter.interceptor(crate::Service::S3));
        }
        Ok(Self::new(Client::from_conf(s3.build()), bucket))
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn backend<E, R>(&self, operation: &str, key: &str, err: SdkError<E, R>) -> StoreError
    where
        E: std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        // DisplayErrorContext prints the whole source chain (service code, HTTP status, I/O cause);
        // requests are signed, so no credential ever appears in it.
        let message = format!("S3 {operation} s3://{}/{key}: {}", self.bucket, DisplayErrorContext(&err));
        tracing::warn!(operation, bucket = %self.bucket, key, error = %message, "S3 request failed");
        StoreError::Backend(message)
    }
}

/// S3 returns ETags quoted (`"abc"`); callers compare them as plain strings.
fn strip_quotes(etag: &str) -> String {
    etag.trim_matches('"').to_string()
}

#[async_trait]
impl ObjectStore for S3ObjectStore {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let mut objects = Vec::new();
        let mut continuation: Option<String> = None;
        loop {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(continuation.take())
                .send()
                .await
                .map_err(|err| self.backend("ListObjectsV2", prefix, err))?;
            for object in page.contents() {
                let Some(key) = object.key() else { continue };
                objects.push(ObjectMeta {
                    key: key.to_string(),
                    etag: object.e_tag().map(strip_quotes).unwrap_or_default(),
                    size: object.size().and_then(|size| u64::try_from(size).ok()).unwrap_or(0),
                    last_modified: object.last_modified().map(|time| time.secs()),
                });
            }
            // A truncated page without a token would loop forever; treat it as the last page.
            match (page.is_truncated(), page.next_continuation_token()) {
                (Some(true), Some(token)) => continuation = Some(token.to_string()),
                _ => break,
            }
        }
        // S3 already lists in UTF-8 binary order; sorting keeps the contract for S3-compatible stores.
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(objects)
    }

    async fn get(&self, key: &str) -> Result<Option<Object>, StoreError> {
        match self.get_if_changed(key, None).await? {
            Fetched::Changed(object) => Ok(Some(object)),
            Fetched::Missing => Ok(None),
            // Without an ETag to compare there is no 304; treat one as the object being gone.
            Fetched::NotModified => Ok(None),
        }
    }

    async fn get_if_changed(&self, key: &str, etag: Option<&str>) -> Result<Fetched, StoreError> {
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .set_if_none_match(etag.map(|etag| format!("\"{etag}\"")));
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                let status = err.raw_response().map(|r| r.status().as_u16());
                if status == Some(304) {
                    return Ok(Fetched::NotModified);
                }
                if err.as_service_error().is_some_and(|e| e.is_no_such_key()) || status == Some(404) {
                    return Ok(Fetched::Missing);
                }
                return Err(self.backend("GetObject", key, err));
            }
        };
        let etag = response.e_tag().map(strip_quotes).unwrap_or_default();
        let bytes = response.body.collect().await.map_err(|err| {
            StoreError::Backend(format!(
                "S3 GetObject s3://{}/{key}: reading the body failed: {}",
                self.bucket,
                DisplayErrorContext(&err)
            ))
        })?;
        // `Vec::from` takes the aggregated buffer over without a copy when it holds the only
        // reference: a 2 MB catalog index is then in memory once, not twice.
        Ok(Fetched::Changed(Object { bytes: Vec::from(bytes.into_bytes()), etag }))
    }

    async fn put_if(&self, key: &str, bytes: Vec<u8>, condition: WriteCondition) -> Result<String, StoreError> {
        let request = self.client.put_object().bucket(&self.bucket).key(key).body(ByteStream::from(bytes));
        let request = match &condition {
            WriteCondition::Absent => request.if_none_match("*"),
            WriteCondition::Matches(etag) => request.if_match(format!("\"{etag}\"")),
        };
        match request.send().await {
            Ok(response) => Ok(response.e_tag().map(strip_quotes).unwrap_or_default()),
            Err(err) => {
                // 412: the precondition failed; 409: a concurrent conditional write is in flight;
                // 404: the object an `If-Match` named is gone. All three mean another writer won.
                let status = err.raw_response().map(|r| r.status().as_u16());
                if matches!(status, Some(412 | 409 | 404)) {
                    tracing::info!(key, ?condition, status, "conditional put lost to a concurrent writer");
                    return Err(StoreError::Conflict);
                }
                Err(self.backend("PutObject", key, err))
            }
        }
    }

    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|err| self.backend("PutObject", key, err))?;
        Ok(())
    }

    async fn put_staged(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        let (tag, value) = STAGED_UPLOAD_TAG;
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .tagging(format!("{tag}={value}"))
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|err| self.backend("PutObject", key, err))?;
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|err| self.backend("DeleteObject", key, err))?;
        Ok(())
    }

    /// A SigV4 presigned `GetObject` URL for the client's endpoint and addressing style. Signing is
    /// local: no request is sent, and the link lasts at most as long as the credentials that sign it.
    async fn presign_get(
        &self,
        key: &str,
        expires_in: Duration,
        headers: &agent_ports::store::LinkHeaders,
    ) -> Result<Option<String>, StoreError> {
        let config = PresigningConfig::expires_in(expires_in).map_err(|err| {
            StoreError::Backend(format!(
                "S3 presign GetObject s3://{}/{key}: {}",
                self.bucket,
                DisplayErrorContext(&err)
            ))
        })?;
        let presigned = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .set_response_content_type(headers.content_type.clone())
            .set_response_content_disposition(headers.content_disposition.clone())
            .presigned(config)
            .await
            .map_err(|err| self.backend("presign GetObject", key, err))?;
        Ok(Some(presigned.uri().to_owned()))
    }

    /// A SigV4 presigned `PutObject` whose signature covers `content-length`, the SHA-256 checksum
    /// (`x-amz-checksum-sha256`) and the staged tag: S3 refuses another length, other bytes, or a
    /// request without these headers. No CRC32 is added: the SDK computes checksums only when an
    /// operation requires one, so the declared SHA-256 is the only checksum signed.
    async fn presign_put(
        &self,
        key: &str,
        size: u64,
        sha256: &str,
        expires_in: Duration,
    ) -> Result<Option<UploadLink>, StoreError> {
        let fail =
            |reason: String| StoreError::Backend(format!("S3 presign PutObject s3://{}/{key}: {reason}", self.bucket));
        let digest = hex::decode(sha256).ok().filter(|digest| digest.len() == 32);
        let digest = digest.ok_or_else(|| fail(format!("`{sha256}` is not a hex SHA-256")))?;
        let length = i64::try_from(size).map_err(|_| fail(format!("{size} bytes is too large")))?;
        let config =
            PresigningConfig::expires_in(expires_in).map_err(|err| fail(DisplayErrorContext(&err).to_string()))?;
        let (tag, value) = STAGED_UPLOAD_TAG;
        let presigned = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_length(length)
            .checksum_sha256(aws_smithy_types::base64::encode(digest))
            .tagging(format!("{tag}={value}"))
            .customize()
            .config_override(
                aws_sdk_s3::config::Builder::default()
                    .request_checksum_calculation(RequestChecksumCalculation::WhenRequired),
            )
            .presigned(config)
            .await
            .map_err(|err| self.backend("presign PutObject", key, err))?;
        let headers = presigned.headers().map(|(name, value)| (name.to_ascii_lowercase(), value.to_owned())).collect();
        Ok(Some(UploadLink { url: presigned.uri().to_owned(), headers }))
    }
}

#[cfg(test)]
mod tests {
    use super::strip_quotes;

    #[test]
    fn etags_lose_their_quotes() {
        assert_eq!(strip_quotes("\"d41d8cd98f00b204e9800998ecf8427e\""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(strip_quotes("abc-2"), "abc-2");
    }
}
