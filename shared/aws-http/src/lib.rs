//! The AWS SDK clients' configuration and HTTP transport: every function loads its SDK configuration
//! here, so every client (S3, DynamoDB, SQS, Lambda, Secrets Manager, Bedrock, and the credential
//! chain's own STS and SSO clients) sends through reqwest on rustls with the Mozilla roots compiled
//! in, as the model providers' calls do.
//!
//! The SDK's default client reads and parses the system's whole certificate store once per process,
//! about a fifth of a function's cold start (docs/performance-process.md); the compiled-in roots
//! cost nothing to load.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use aws_config::{BehaviorVersion, ConfigLoader, SdkConfig};
use aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;

/// The default configuration chain (environment, shared profile, the Lambda role; endpoints from
/// `AWS_ENDPOINT_URL` and its per-service variants), sending through [`http_client`].
pub fn config_loader() -> ConfigLoader {
    aws_config::defaults(BehaviorVersion::latest()).http_client(http_client())
}

/// [`config_loader`]'s configuration, loaded.
pub async fn load_config() -> SdkConfig {
    config_loader().load().await
}

/// The process's one HTTP client for the AWS SDK; its connection pools are shared by every SDK
/// client built from it.
pub fn http_client() -> SharedHttpClient {
    static CLIENT: LazyLock<SharedHttpClient> = LazyLock::new(|| SharedHttpClient::new(ReqwestHttpClient::default()));
    CLIENT.clone()
}

/// The SDK asks for a connector per timeout setting (a client or an operation may set its own);
/// each gets a reqwest client of its own, made once.
#[derive(Debug, Default)]
struct ReqwestHttpClient {
    connectors: Mutex<HashMap<Timeouts, SharedHttpConnector>>,
}

/// A connector's connect and read timeouts.
type Timeouts = (Option<Duration>, Option<Duration>);

impl HttpClient for ReqwestHttpClient {
    fn http_connector(&self, settings: &HttpConnectorSettings, _components: &RuntimeComponents) -> SharedHttpConnector {
        let timeouts = (settings.connect_timeout(), settings.read_timeout());
        let mut connectors = self.connectors.lock().unwrap_or_else(PoisonError::into_inner);
        connectors.entry(timeouts).or_insert_with(|| SharedHttpConnector::new(ReqwestConnector::new(timeouts))).clone()
    }

    fn connector_metadata(&self) -> Option<ConnectorMetadata> {
        Some(ConnectorMetadata::new("reqwest", Some(Cow::Borrowed("0.12"))))
    }
}

/// One reqwest client, or why it could not be built (every call then fails with that reason).
#[derive(Debug)]
struct ReqwestConnector {
    client: Result<reqwest::Client, Arc<str>>,
}

impl ReqwestConnector {
    fn new((connect_timeout, read_timeout): Timeouts) -> Self {
        // The SDK reads every response itself: a redirect (S3's 301 for another region) and a
        // compressed body are the service's answer to it, not something to follow or undo here.
        // HTTP/1.1, as the SDK's own client speaks to these services.
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_gzip()
            .no_brotli()
            .no_deflate()
            .no_zstd()
            .http1_only()
            .tcp_nodelay(true);
        if let Some(timeout) = connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if let Some(timeout) = read_timeout {
            builder = builder.read_timeout(timeout);
        }
        let client = builder.build().map_err(|error| Arc::from(format!("the AWS SDK's HTTP client: {error}")));
        Self { client }
    }
}

impl HttpConnector for ReqwestConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let client = match &self.client {
            Ok(client) => client.clone(),
            Err(reason) => {
                return HttpConnectorFuture::ready(Err(ConnectorError::other(reason.to_string().into(), None)))
            }
        };
        let request = match request.try_into_http1x() {
            Ok(request) => request.map(reqwest::Body::wrap),
            Err(error) => return HttpConnectorFuture::ready(Err(ConnectorError::user(error.into()))),
        };
        let request = match reqwest::Request::try_from(request) {
            Ok(request) => request,
            Err(error) => return HttpConnectorFuture::ready(Err(ConnectorError::user(error.into()))),
        };
        HttpConnectorFuture::new(async move {
            let response = client.execute(request).await.map_err(connector_error)?;
            let response = http::Response::<reqwest::Body>::from(response).map(SdkBody::from_body_1_x);
            HttpResponse::try_from(response).map_err(|error| ConnectorError::other(error.into(), None))
        })
    }
}

/// How the SDK's retries see a failed exchange: a timeout or a broken connection is transient and
/// tried again (as the SDK's own client classifies them), a request that cannot be built is not.
fn connector_error(error: reqwest::Error) -> ConnectorError {
    if error.is_timeout() {
        ConnectorError::timeout(error.into())
    } else if error.is_builder() {
        ConnectorError::user(error.into())
    } else if error.is_connect() || error.is_request() || error.is_body() {
        ConnectorError::io(error.into())
    } else {
        ConnectorError::other(error.into(), None)
    }
}

#[cfg(test)]
mod tests;
