//! Which experts a turn may use: the deployment's `EXPERTS_CONFIG` merged with the tenant's `experts.json`.
//!
//! Both use the common `{"mcpServers": {"<name>": {"url": ..., "description": ..., "headers": {...}}}}`
//! form. Merging is by name and the tenant wins: a tenant entry replaces the deployment entry of the same
//! name as a whole (headers are not merged), and a tenant entry of `null` removes it. Validation runs on
//! the merged set, so a broken tenant entry removes the expert rather than silently falling back to the
//! deployment's. Nothing here fails a turn: bad documents, entries and secrets are logged and left out.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use agent_ports::{net, ObjectStore, UserId};
use futures::future::join_all;
use http::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;
use url::{Host, Url};

use crate::secrets::{SecretError, SecretRef, SecretResolver, SecretScope};

/// The environment variable holding the deployment-wide configuration.
pub const EXPERTS_CONFIG_ENV: &str = "EXPERTS_CONFIG";

/// Longest expert name; it also bounds the namespaced tool names offered to the model.
pub const MAX_EXPERT_NAME: usize = 64;

/// Headers the MCP transport owns; a configuration setting them would break the protocol.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
    "transfer-encoding",
];

/// The object-store key of a tenant's expert configuration.
pub fn experts_key(user: &UserId) -> String {
    format!("{user}/experts.json")
}

/// Whose configuration an entry comes from; tenant entries are held to stricter rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Deployment,
    Tenant,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Deployment => "deployment",
            Origin::Tenant => "tenant",
        })
    }
}

/// Why a document or an entry was rejected. Messages never carry header values.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("the configuration is not valid JSON: {0}")]
    Json(String),
    #[error("the configuration has no \"mcpServers\" object")]
    NoServers,
    #[error("the name must be 1 to 64 characters from [A-Za-z0-9_-]")]
    InvalidName,
    #[error("the entry is malformed: {0}")]
    Malformed(String),
    #[error("only Streamable HTTP servers are supported, not {0}")]
    UnsupportedTransport(String),
    #[error("invalid url: {0}")]
    InvalidUrl(String),
    #[error("tenant experts may not point at local or private addresses ({0})")]
    ForbiddenHost(String),
    #[error("invalid header {name:?}: {reason}")]
    InvalidHeader { name: String, reason: &'static str },
    #[error("header {header:?} could not be resolved: {source}")]
    Secret {
        header: String,
        #[source]
        source: SecretError,
    },
}

/// A header value as configured: plain text or a reference to a secret.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum HeaderSource {
    Plain(String),
    Secret(SecretRef),
}

/// One validated entry, before its secrets are resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub url: Url,
    pub description: Option<String>,
    pub headers: BTreeMap<String, HeaderSource>,
    pub origin: Origin,
}

/// The entry's wire form. Unknown keys are tolerated because the same file often serves desktop
/// clients too; the ones that mean "not Streamable HTTP" are checked explicitly.
#[derive(Deserialize)]
struct RawServer {
    url: Option<String>,
    description: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, HeaderSource>,
    #[serde(rename = "type")]
    transport: Option<String>,
    command: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    origin: Origin,
    raw: Value,
}

/// A parsed configuration whose entries are kept raw until [`ExpertsConfig::servers`], so one bad
/// entry cannot spoil the document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpertsConfig {
    entries: BTreeMap<String, Entry>,
}

impl ExpertsConfig {
    /// Parses a whole document; fails only when it is not JSON or has no `mcpServers` object.
    pub fn parse(json: &str, origin: Origin) -> Result<Self, ConfigError> {
        let document: Value = serde_json::from_str(json).map_err(|e| ConfigError::Json(e.to_string()))?;
        let Some(Value::Object(servers)) = document.get("mcpServers") else {
            return Err(ConfigError::NoServers);
        };
        let entries = servers.iter().map(|(name, raw)| (name.clone(), Entry { origin, raw: raw.clone() })).collect();
        Ok(Self { entries })
    }

    /// The deployment's entries overridden by the tenant's; see the module documentation.
    pub fn merge(deployment: ExpertsConfig, tenant: ExpertsConfig) -> ExpertsConfig {
        let mut entries = deployment.entries;
        for (name, entry) in tenant.entries {
            if entry.raw.is_null() {
                entries.remove(&name);
            } else {
                entries.insert(name, entry);
            }
        }
        Self { entries }
    }

    /// Names of the configured entries, valid or not.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The valid entries; each invalid one is logged with its name and skipped.
    pub fn servers(&self) -> Vec<ServerConfig> {
        let mut servers = Vec::new();
        for (name, entry) in &self.entries {
            if entry.raw.is_null() {
                continue; // a removal marker that had nothing to remove
            }
            match validate_entry(name, entry) {
                Ok(server) => servers.push(server),
                Err(error) => tracing::warn!(expert = %name, origin = %entry.origin, %error, "skipping expert"),
            }
        }
        servers
    }
}

fn validate_entry(name: &str, entry: &Entry) -> Result<ServerConfig, ConfigError> {
    check_name(name)?;
    let raw: RawServer =
        serde_json::from_value(entry.raw.clone()).map_err(|e| ConfigError::Malformed(e.to_string()))?;
    if raw.command.is_some() {
        return Err(ConfigError::UnsupportedTransport("stdio (a Lambda cannot keep a child process)".into()));
    }
    if let Some(transport) = raw.transport.as_deref() {
        if !matches!(transport, "http" | "streamable-http" | "streamableHttp" | "streamable_http") {
            return Err(ConfigError::UnsupportedTransport(transport.to_owned()));
        }
    }
    let url = raw.url.ok_or_else(|| ConfigError::Malformed("missing \"url\"".into()))?;
    let url = check_url(&url, entry.origin)?;
    for (header, source) in &raw.headers {
        check_header_name(header)?;
        if let HeaderSource::Plain(value) = source {
            header_value(header, value)?;
        }
    }
    let description = raw.description.map(|d| d.trim().to_owned()).filter(|d| !d.is_empty());
    Ok(ServerConfig { name: name.to_owned(), url, description, headers: raw.headers, origin: entry.origin })
}

fn check_name(name: &str) -> Result<(), ConfigError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > MAX_EXPERT_NAME || !name.chars().all(allowed) {
        return Err(ConfigError::InvalidName);
    }
    Ok(())
}

fn check_url(url: &str, origin: Origin) -> Result<Url, ConfigError> {
    let parsed = Url::parse(url).map_err(|e| ConfigError::InvalidUrl(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ConfigError::InvalidUrl(format!("scheme {:?} is not http or https", parsed.scheme())));
    }
    // Credentials in a URL end up in logs; headers are the place for them.
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ConfigError::InvalidUrl("credentials belong in headers, not in the url".into()));
    }
    let host = parsed.host().ok_or_else(|| ConfigError::InvalidUrl("no host".into()))?;
    // A tenant must not make the function call its own runtime API or anything else inside the network.
    // Names that resolve to such addresses (DNS rebinding) are not caught here; egress rules must.
    if origin == Origin::Tenant && is_internal_host(&host) {
        return Err(ConfigError::ForbiddenHost(host.to_string()));
    }
    Ok(parsed)
}

/// Whether `host` names an internal address or host, by the rules every outbound call a tenant can
/// aim shares ([`agent_ports::net`]).
fn is_internal_host(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(domain) => net::is_internal_name(domain),
        Host::Ipv4(ip) => net::internal(IpAddr::V4(*ip)).is_some(),
        Host::Ipv6(ip) => net::internal(IpAddr::V6(*ip)).is_some(),
    }
}

fn check_header_name(name: &str) -> Result<HeaderName, ConfigError> {
    let parsed = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ConfigError::InvalidHeader { name: name.to_owned(), reason: "not a valid header name" })?;
    if RESERVED_HEADERS.contains(&parsed.as_str()) {
        return Err(ConfigError::InvalidHeader { name: name.to_owned(), reason: "set by the MCP transport" });
    }
    Ok(parsed)
}

fn header_value(name: &str, value: &str) -> Result<HeaderValue, ConfigError> {
    let mut parsed = HeaderValue::from_str(value).map_err(|_| ConfigError::InvalidHeader {
        name: name.to_owned(),
        reason: "the value is not valid header text",
    })?;
    // Keeps the value out of HTTP/2 header compression tables and `Debug` output.
    parsed.set_sensitive(true);
    Ok(parsed)
}

/// An expert ready to connect to: validated, with its secrets resolved.
#[derive(Clone)]
pub struct Expert {
    pub name: String,
    pub url: Url,
    pub description: Option<String>,
    pub origin: Origin,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Expert {
    /// An expert built in code (tests, tools); held to the deployment's rules.
    pub fn new(name: &str, url: &str) -> Result<Self, ConfigError> {
        check_name(name)?;
        let url = check_url(url, Origin::Deployment)?;
        Ok(Self { name: name.to_owned(), url, description: None, origin: Origin::Deployment, headers: Vec::new() })
    }

    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Result<Self, ConfigError> {
        let parsed = check_header_name(name)?;
        self.headers.push((parsed, header_value(name, value)?));
        Ok(self)
    }

    /// The headers sent on every request, secrets included.
    pub fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    /// Resolves a validated entry's secrets; the first one that fails leaves the expert out.
    pub async fn resolve(
        server: ServerConfig,
        user: &UserId,
        resolver: &dyn SecretResolver,
    ) -> Result<Expert, ConfigError> {
        let scope = match server.origin {
            Origin::Deployment => SecretScope::Deployment,
            Origin::Tenant => SecretScope::Tenant(user),
        };
        let mut headers = Vec::with_capacity(server.headers.len());
        for (name, source) in &server.headers {
            let value = match source {
                HeaderSource::Plain(value) => value.clone(),
                HeaderSource::Secret(reference) => resolver
                    .resolve(reference, scope)
                    .await
                    .map_err(|source| ConfigError::Secret { header: name.clone(), source })?,
            };
            headers.push((check_header_name(name)?, header_value(name, &value)?));
        }
        Ok(Expert {
            name: server.name,
            url: server.url,
            description: server.description,
            origin: server.origin,
            headers,
        })
    }
}

/// Header values are secrets: only their names are shown.
impl fmt::Debug for Expert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expert")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .field("description", &self.description)
            .field("origin", &self.origin)
            .field("headers", &self.headers.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>())
            .finish()
    }
}

/// The experts a turn of `user` may consult: `deployment_json` (the `EXPERTS_CONFIG` value) merged
/// with `{user}/experts.json`, validated and resolved. Every failure is logged and only shrinks the set.
pub async fn load_experts(
    deployment_json: Option<&str>,
    objects: &dyn ObjectStore,
    user: &UserId,
    resolver: &dyn SecretResolver,
) -> Vec<Expert> {
    let deployment = match deployment_json.map(str::trim).filter(|json| !json.is_empty()) {
        None => ExpertsConfig::default(),
        Some(json) => ExpertsConfig::parse(json, Origin::Deployment).unwrap_or_else(|error| {
            tracing::warn!(%error, "ignoring {EXPERTS_CONFIG_ENV}");
            ExpertsConfig::default()
        }),
    };
    let tenant = load_tenant_config(objects, user).await;
    let servers = ExpertsConfig::merge(deployment, tenant).servers();
    let resolved = join_all(servers.into_iter().map(|server| async move {
        let name = server.name.clone();
        (name, Expert::resolve(server, user, resolver).await)
    }))
    .await;
    resolved
        .into_iter()
        .filter_map(|(name, expert)| {
            expert.map_err(|error| tracing::warn!(expert = %name, %error, "skipping expert")).ok()
        })
        .collect()
}

/// The tenant's configuration; missing is normal, unreadable or corrupt is logged and treated as empty.
async fn load_tenant_config(objects: &dyn ObjectStore, user: &UserId) -> ExpertsConfig {
    let key = experts_key(user);
    let object = match objects.get(&key).await {
        Ok(Some(object)) => object,
        Ok(None) => return ExpertsConfig::default(),
        Err(error) => {
            tracing::warn!(%key, %error, "could not read the tenant's experts; using the deployment's only");
            return ExpertsConfig::default();
        }
    };
    let parsed = std::str::from_utf8(&object.bytes)
        .map_err(|e| ConfigError::Json(e.to_string()))
        .and_then(|json| ExpertsConfig::parse(json, Origin::Tenant));
    parsed.unwrap_or_else(|error| {
        tracing::warn!(%key, %error, "ignoring the tenant's experts; using the deployment's only");
        ExpertsConfig::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(servers: &[ServerConfig]) -> Vec<&str> {
        servers.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn validates_names_urls_transports_and_headers() {
        let json = r#"{"mcpServers": {
            "ok": {"url": "https://a.example/mcp", "description": " Contracts ", "headers": {"X-Key": "v"}},
            "bad name": {"url": "https://a.example/mcp"},
            "ftp": {"url": "ftp://a.example/mcp"},
            "nourl": {"description": "x"},
            "stdio": {"command": "npx", "args": ["x"]},
            "sse": {"type": "sse", "url": "https://a.example/sse"},
            "typed": {"type": "http", "url": "https://a.example/mcp"},
            "reserved": {"url": "https://a.example/mcp", "headers": {"Mcp-Session-Id": "x"}},
            "crlf": {"url": "https://a.example/mcp", "headers": {"X-Key": "a\r\nb"}},
            "creds": {"url": "https://u:p@a.example/mcp"},
            "badref": {"url": "https://a.example/mcp", "headers": {"X-Key": {"vault": "x"}}},
            "notobj": 3
        }}"#;
        let servers = ExpertsConfig::parse(json, Origin::Deployment).unwrap().servers();
        assert_eq!(names(&servers), ["ok", "typed"]);
        assert_eq!(servers[0].description.as_deref(), Some("Contracts"));
        let long = "x".repeat(65);
        assert!(check_name(&long).is_err());
        assert!(check_name(&"x".repeat(64)).is_ok());
    }

    #[test]
    fn rejects_documents_without_servers() {
        assert!(matches!(ExpertsConfig::parse("nope", Origin::Tenant), Err(ConfigError::Json(_))));
        assert!(matches!(ExpertsConfig::parse("{}", Origin::Tenant), Err(ConfigError::NoServers)));
        assert!(matches!(ExpertsConfig::parse(r#"{"mcpServers": []}"#, Origin::Tenant), Err(ConfigError::NoServers)));
    }

    #[test]
    fn tenants_cannot_reach_internal_hosts() {
        for url in [
            "http://127.0.0.1:9001/2018-06-01/runtime",
            "http://localhost/mcp",
            "http://169.254.169.254/latest",
            "http://10.0.0.1/mcp",
            "http://[::1]/mcp",
            "http://[::ffff:127.0.0.1]/mcp",
            "http://[fd00::1]/mcp",
            "http://100.64.0.1/mcp",
            "http://0.0.0.0/mcp",
        ] {
            assert!(matches!(check_url(url, Origin::Tenant), Err(ConfigError::ForbiddenHost(_))), "{url}");
            assert!(check_url(url, Origin::Deployment).is_ok(), "{url}");
        }
        assert!(check_url("https://experts.example.com/mcp", Origin::Tenant).is_ok());
    }

    #[test]
    fn tenant_entries_replace_or_remove_deployment_entries() {
        let deployment = ExpertsConfig::parse(
            r#"{"mcpServers": {"a": {"url": "https://d.example/a"}, "b": {"url": "https://d.example/b"},
                               "c": {"url": "https://d.example/c"}}}"#,
            Origin::Deployment,
        )
        .unwrap();
        let tenant = ExpertsConfig::parse(
            r#"{"mcpServers": {"a": {"url": "https://t.example/a"}, "b": null, "c": {"url": "nope"},
                               "d": {"url": "https://t.example/d"}}}"#,
            Origin::Tenant,
        )
        .unwrap();
        let merged = ExpertsConfig::merge(deployment, tenant);
        assert_eq!(merged.names().collect::<Vec<_>>(), ["a", "c", "d"]);
        let servers = merged.servers();
        // "c" was broken by the tenant: it is dropped, not restored from the deployment.
        assert_eq!(names(&servers), ["a", "d"]);
        assert_eq!(servers[0].url.as_str(), "https://t.example/a");
        assert_eq!(servers[0].origin, Origin::Tenant);
    }

    #[test]
    fn debug_hides_header_values() {
        let expert = Expert::new("e", "https://a.example/mcp").unwrap().with_header("Authorization", "Bearer s3cr3t");
        let shown = format!("{:?}", expert.unwrap());
        assert!(shown.contains("authorization") && !shown.contains("s3cr3t"), "{shown}");
    }
}
