//! Where a tenant's webhooks may go: the deployment's allow-list of URL prefixes per tenant
//! (`WEBHOOK_ALLOWED_URLS`) and the internal ranges an operator opened (`WEBHOOK_ALLOW_PRIVATE_CIDRS`).
//! A callback URL is checked when its turn is queued and again before every delivery; what its host
//! resolves to is checked at delivery (`deliver`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use agent_core::net::{self, Cidr};
use agent_core::UserId;
use url::{Host, Url};

use super::body::MAX_URL_BYTES;
use crate::api::ApiError;
use crate::config::ConfigError;

/// The allow-list: JSON `{"<tenant id>": ["https://hooks.example.com/agent/"], "*": [...]}`.
pub const ALLOWED_URLS_ENV: &str = "WEBHOOK_ALLOWED_URLS";
/// Internal ranges opened to webhooks, comma-separated CIDRs (`127.0.0.1/32` for a local receiver).
pub const PRIVATE_CIDRS_ENV: &str = "WEBHOOK_ALLOW_PRIVATE_CIDRS";
/// The most entries the allow-list may hold, all tenants together.
const MAX_ENTRIES: usize = 1000;
/// The most ranges an operator may open.
const MAX_CIDRS: usize = 64;
/// The allow-list key that applies to every tenant.
const EVERY_TENANT: &str = "*";

/// Why a callback URL is refused; each maps to a 400 the client can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not a URL this API takes at all.
    #[error("`webhook.url` {0}")]
    Malformed(String),
    /// A well-formed URL this deployment does not send to.
    #[error("`webhook.url` {0}")]
    NotAllowed(String),
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Malformed(_) => ApiError::bad_request(refused.to_string()),
            Refused::NotAllowed(_) => ApiError::new(400, "webhook_not_allowed", refused.to_string()),
        }
    }
}

/// One allowed prefix: scheme, host and port equal, path at a segment boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Prefix {
    scheme: String,
    host: String,
    port: u16,
    path: String,
}

impl Prefix {
    fn parse(text: &str) -> Result<Prefix, String> {
        if text.len() > MAX_URL_BYTES {
            return Err(format!("an entry is longer than {MAX_URL_BYTES} bytes"));
        }
        let url = Url::parse(text).map_err(|err| format!("{text:?} is not a URL ({err})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{text:?}: only http and https URLs are allowed"));
        }
        if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
            return Err(format!("{text:?}: an entry has no credentials, query or fragment"));
        }
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(format!("{text:?} names no host"));
        };
        Ok(Prefix { scheme: url.scheme().to_owned(), host: host.to_owned(), port, path: url.path().to_owned() })
    }

    fn allows(&self, url: &Url) -> bool {
        let path = url.path();
        let under = match self.path.ends_with('/') {
            true => path.starts_with(&self.path),
            false => path == self.path || path.strip_prefix(&self.path).is_some_and(|rest| rest.starts_with('/')),
        };
        url.scheme() == self.scheme
            && url.host_str() == Some(self.host.as_str())
            && url.port_or_known_default() == Some(self.port)
            && under
    }
}

/// The deployment's webhook policy: the allow-list and the opened ranges.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    allowed: BTreeMap<String, Vec<Prefix>>,
    opened: Vec<Cidr>,
}

impl Policy {
    /// Reads `WEBHOOK_ALLOWED_URLS` and `WEBHOOK_ALLOW_PRIVATE_CIDRS` through `lookup`; both unset
    /// is a deployment that sends no webhooks.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Policy, ConfigError> {
        let set = |name: &str| lookup(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
        let allowed = match set(ALLOWED_URLS_ENV) {
            None => BTreeMap::new(),
            Some(json) => {
                parse_allowed(&json).map_err(|reason| ConfigError::Invalid { name: ALLOWED_URLS_ENV, reason })?
            }
        };
        let opened = match set(PRIVATE_CIDRS_ENV) {
            None => Vec::new(),
            Some(list) => {
                parse_opened(&list).map_err(|reason| ConfigError::Invalid { name: PRIVATE_CIDRS_ENV, reason })?
            }
        };
        Ok(Policy { allowed, opened })
    }

    /// Whether a delivery may connect to `ip`: a public address, or one in a range the operator
    /// opened (never link-local).
    pub fn may_connect(&self, ip: IpAddr) -> bool {
        match net::internal(ip) {
            None => true,
            Some(_) => !net::never_openable(ip) && self.opened.iter().any(|range| range.contains(ip)),
        }
    }

    /// `url`, parsed, when `user` may name it: a bounded http(s) URL without credentials or
    /// fragment, whose host is not internal (unless in an opened range), under one of the
    /// allow-list's prefixes for `user` or for every tenant.
    pub fn check(&self, user: &UserId, url: &str) -> Result<Url, Refused> {
        if url.len() > MAX_URL_BYTES {
            return Err(Refused::Malformed(format!("is longer than {MAX_URL_BYTES} bytes")));
        }
        let parsed = Url::parse(url).map_err(|err| Refused::Malformed(format!("is not a URL ({err})")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Refused::Malformed("must be an http or https URL".to_owned()));
        }
        if parsed.fragment().is_some() {
            return Err(Refused::Malformed("must not have a fragment".to_owned()));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(Refused::NotAllowed("must not carry credentials; the signature authenticates".to_owned()));
        }
        let host = parsed.host().ok_or_else(|| Refused::Malformed("names no host".to_owned()))?;
        let internal = match host {
            Host::Domain(domain) => net::is_internal_name(domain).then(|| format!("{domain} is an internal host name")),
            Host::Ipv4(ip) => self.internal_reason(IpAddr::V4(ip)),
            Host::Ipv6(ip) => self.internal_reason(IpAddr::V6(ip)),
        };
        if let Some(reason) = internal {
            return Err(Refused::NotAllowed(format!("is refused: {reason}")));
        }
        let prefixes = [user.as_str(), EVERY_TENANT].into_iter().filter_map(|key| self.allowed.get(key)).flatten();
        if !prefixes.clone().any(|prefix| prefix.allows(&parsed)) {
            let reason = match self.allowed.is_empty() {
                true => "is refused: this deployment allows no webhook URLs".to_owned(),
                false => "is not on this deployment's webhook allow-list for you".to_owned(),
            };
            return Err(Refused::NotAllowed(reason));
        }
        Ok(parsed)
    }

    fn internal_reason(&self, ip: IpAddr) -> Option<String> {
        let kind = net::internal(ip)?;
        (!self.may_connect(ip)).then(|| format!("{ip} is {kind}"))
    }
}

fn parse_allowed(json: &str) -> Result<BTreeMap<String, Vec<Prefix>>, String> {
    let lists: BTreeMap<String, Vec<String>> = serde_json::from_str(json)
        .map_err(|err| format!("expected {{\"<tenant id>\": [\"https://...\"], \"*\": [...]}}: {err}"))?;
    let entries: usize = lists.values().map(Vec::len).sum();
    if entries > MAX_ENTRIES {
        return Err(format!("at most {MAX_ENTRIES} URLs, not {entries}"));
    }
    lists
        .into_iter()
        .map(|(tenant, urls)| {
            if tenant != EVERY_TENANT {
                UserId::parse(&tenant).map_err(|err| format!("tenant {tenant:?}: {err}"))?;
            }
            let prefixes = urls.iter().map(|url| Prefix::parse(url)).collect::<Result<Vec<_>, _>>()?;
            Ok((tenant, prefixes))
        })
        .collect()
}

fn parse_opened(list: &str) -> Result<Vec<Cidr>, String> {
    let ranges: Vec<Cidr> =
        list.split(',').filter(|part| !part.trim().is_empty()).map(Cidr::parse).collect::<Result<_, _>>()?;
    if ranges.len() > MAX_CIDRS {
        return Err(format!("at most {MAX_CIDRS} ranges, not {}", ranges.len()));
    }
    if let Some(range) = ranges.iter().find(|range| net::link_local_ranges().iter().any(|link| range.overlaps(link))) {
        return Err(format!(
            "{range} overlaps link-local addresses (the instance metadata service), which stay closed"
        ));
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allowed: &str, opened: &str) -> Policy {
        let (allowed, opened) = (allowed.to_owned(), opened.to_owned());
        Policy::from_lookup(move |name| match name {
            ALLOWED_URLS_ENV => Some(allowed.clone()),
            PRIVATE_CIDRS_ENV => Some(opened.clone()),
            _ => None,
        })
        .unwrap()
    }

    fn ana() -> UserId {
        UserId::parse("ana").unwrap()
    }

    #[test]
    fn a_url_is_allowed_under_an_entry_at_a_segment_boundary_with_the_same_origin() {
        let policy = policy(
            r#"{"ana": ["https://hooks.example.com/agent/", "https://api.example.com/cb"], "*": ["https://all.example.com:8443/"]}"#,
            "",
        );
        for allowed in [
            "https://hooks.example.com/agent/turns?x=1",
            "https://HOOKS.example.com:443/agent/",
            "https://api.example.com/cb",
            "https://api.example.com/cb/more",
            "https://all.example.com:8443/anything",
        ] {
            assert!(policy.check(&ana(), allowed).is_ok(), "{allowed}");
        }
        for refused in [
            "http://hooks.example.com/agent/x",
            "https://hooks.example.com:8443/agent/x",
            "https://hooks.example.com/agent",
            "https://hooks.example.com/agents/x",
            "https://hooks.example.com/agent/../admin",
            "https://hooks.example.com/agent/%2e%2e/admin",
            "https://api.example.com/cbx",
            "https://evil.hooks.example.com/agent/x",
            "https://all.example.com/anything",
        ] {
            assert!(matches!(policy.check(&ana(), refused), Err(Refused::NotAllowed(_))), "{refused}");
        }
        // Another tenant gets only the entries for every tenant.
        let bob = UserId::parse("bob").unwrap();
        assert!(policy.check(&bob, "https://hooks.example.com/agent/x").is_err());
        assert!(policy.check(&bob, "https://all.example.com:8443/x").is_ok());
    }

    #[test]
    fn malformed_urls_credentials_and_internal_hosts_are_refused_with_a_reason() {
        let policy = policy(
            r#"{"*": ["http://127.0.0.1:9000/", "http://127.0.0.2:9000/", "http://10.0.0.1/", "http://169.254.169.254/", "http://localhost:9000/", "http://[::1]:9000/"]}"#,
            "127.0.0.1/32",
        );
        assert!(policy.check(&ana(), "http://127.0.0.1:9000/hook").is_ok(), "the opened range");
        for (url, says) in [
            ("http://169.254.169.254/latest/meta-data/", "link-local"),
            ("http://127.0.0.2:9000/hook", "loopback"),
            ("http://[::1]:9000/hook", "loopback"),
            ("http://[::ffff:127.0.0.2]:9000/hook", "loopback"),
            ("http://10.0.0.1/hook", "private"),
            ("http://localhost:9000/hook", "internal host name"),
            ("http://user:pw@127.0.0.1:9000/hook", "credentials"),
        ] {
            let refused = policy.check(&ana(), url).unwrap_err();
            assert!(
                matches!(refused, Refused::NotAllowed(_)) && refused.to_string().contains(says),
                "{url}: {refused}"
            );
        }
        let long = format!("https://a.example.com/{}", "x".repeat(MAX_URL_BYTES));
        for url in ["not a url", "ftp://127.0.0.1:9000/", "http://127.0.0.1:9000/#frag", "data:text/plain,x", &long] {
            assert!(matches!(policy.check(&ana(), url), Err(Refused::Malformed(_))), "{url}");
        }
        let nothing = Policy::default().check(&ana(), "https://hooks.example.com/").unwrap_err();
        assert!(nothing.to_string().contains("allows no webhook URLs"), "{nothing}");
        assert_eq!(ApiError::from(nothing).code, "webhook_not_allowed");
    }

    #[test]
    fn only_opened_ranges_may_be_connected_to_and_link_local_never_opens() {
        let policy = policy("{}", "127.0.0.1/32, 10.1.0.0/16");
        let may = |ip: &str| policy.may_connect(ip.parse().unwrap());
        assert!(may("93.184.216.34") && may("127.0.0.1") && may("10.1.2.3") && may("::ffff:127.0.0.1"));
        assert!(!may("127.0.0.2") && !may("10.2.0.1") && !may("169.254.169.254") && !may("::1"));
        let err = |allowed: &str, opened: &str| {
            let (allowed, opened) = (allowed.to_owned(), opened.to_owned());
            Policy::from_lookup(move |name| match name {
                ALLOWED_URLS_ENV => Some(allowed.clone()),
                PRIVATE_CIDRS_ENV => Some(opened.clone()),
                _ => None,
            })
            .unwrap_err()
            .to_string()
        };
        assert!(err("{}", "169.254.0.0/16").contains("link-local"));
        assert!(err("{}", "0.0.0.0/0").contains("link-local"));
        assert!(err("{}", "10.0.0.0/40").contains(PRIVATE_CIDRS_ENV));
        assert!(err("[]", "").contains(ALLOWED_URLS_ENV));
        assert!(err(r#"{"../x": ["https://a.example.com/"]}"#, "").contains("tenant"));
        assert!(err(r#"{"*": ["https://u:p@a.example.com/"]}"#, "").contains("credentials"));
        assert!(err(r#"{"*": ["ftp://a.example.com/"]}"#, "").contains("http"));
    }
}
