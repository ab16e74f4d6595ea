//! One delivery attempt and the schedule of the next. An attempt resolves the host, checks every
//! address it got (the SSRF guard) and connects only to those, pinned, so a second resolution cannot
//! swap them; it follows no redirect, uses no proxy, is bounded in time and never reads the answer's
//! body. 2xx is delivered; 410, 3xx and other 4xx stop (but 408 and 429); 5xx and network failures
//! are retried with exponential backoff and jitter.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use url::{Host, Url};

use super::allow::Policy;
use super::event::TurnEvent;
use super::sign::TenantKey;

/// How long a connection may take to open (and the host to resolve).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a whole attempt may take, the answer's headers included.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts made inline, right after the turn, before the webhook queue takes over.
pub const INLINE_ATTEMPTS: u32 = 3;
/// Attempts in all, inline and queued; then the delivery is given up.
pub const MAX_ATTEMPTS: u32 = 20;
/// The longest delay SQS takes for one message.
pub const MAX_QUEUE_DELAY_SECS: u32 = 900;
/// The first inline pause; each next one doubles.
const INLINE_PAUSE: Duration = Duration::from_millis(500);
/// The `User-Agent` of every delivery.
const USER_AGENT: &str = concat!("agent-runtime-webhooks/", env!("CARGO_PKG_VERSION"));

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The receiver answered 2xx.
    Delivered(u16),
    /// No attempt will succeed: the receiver refused or is gone, or the URL is not allowed.
    Stop(String),
    /// This attempt failed; a later one may not.
    Retry(String),
}

/// What the status `status` means for the delivery.
pub fn classify(status: u16) -> Attempt {
    match status {
        200..=299 => Attempt::Delivered(status),
        408 | 429 => Attempt::Retry(format!("the receiver answered {status}")),
        410 => Attempt::Stop("the receiver answered 410 Gone".to_owned()),
        300..=399 => Attempt::Stop(format!("the receiver answered {status}; redirects are not followed")),
        400..=499 => Attempt::Stop(format!("the receiver refused the delivery with {status}")),
        _ => Attempt::Retry(format!("the receiver answered {status}")),
    }
}

/// The delay in seconds before queued attempt `attempt` (numbered from 1 over all attempts):
/// `first` doubled per queued attempt, at most 900, then between half and all of it by `jitter`
/// (0 to 1), so deliveries that failed together do not come back together.
pub fn queue_delay(attempt: u32, first: u32, jitter: f64) -> u32 {
    let queued = attempt.saturating_sub(INLINE_ATTEMPTS + 1);
    let full = u64::from(first).saturating_mul(1u64 << queued.min(20)).min(u64::from(MAX_QUEUE_DELAY_SECS));
    let half = full as f64 / 2.0;
    (half + half * jitter.clamp(0.0, 1.0)).round() as u32
}

/// The pause after inline attempt `attempt` (from 1): 0.5 s doubled each time, with the same jitter.
pub fn inline_pause(attempt: u32, jitter: f64) -> Duration {
    let full = INLINE_PAUSE * 2u32.pow(attempt.saturating_sub(1).min(8));
    full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// Makes one attempt: `event` signed with `key` now, POSTed to `url` if every address of its host
/// may be connected to under `policy`.
pub async fn attempt(policy: &Policy, key: &TenantKey, url: &Url, event: &TurnEvent) -> Attempt {
    let pinned = match checked_addresses(policy, url).await {
        Ok(pinned) => pinned,
        Err(stop_or_retry) => return stop_or_retry,
    };
    let mut client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(ATTEMPT_TIMEOUT)
        .user_agent(USER_AGENT);
    if let Some((domain, addresses)) = &pinned {
        client = client.resolve_to_addrs(domain, addresses);
    }
    let client = match client.build() {
        Ok(client) => client,
        Err(err) => return Attempt::Retry(format!("no HTTP client: {err}")),
    };
    let body = event.body();
    let timestamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let sent = client
        .post(url.clone())
        .header("content-type", "application/json")
        .header("webhook-id", &event.webhook_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", key.sign(&event.webhook_id, timestamp, &body))
        .body(body)
        .send()
        .await;
    // The answer's body is never read: its status says all a delivery needs.
    match sent {
        Ok(response) => classify(response.status().as_u16()),
        Err(err) if err.is_timeout() => Attempt::Retry("the receiver did not answer in time".to_owned()),
        Err(err) if err.is_connect() => Attempt::Retry("could not connect to the receiver".to_owned()),
        Err(_) => Attempt::Retry("the request to the receiver failed".to_owned()),
    }
}

/// For a host name, the addresses it resolves to, each allowed by `policy` (else a stop); for an
/// address, none (it is checked here and connected to as it is).
async fn checked_addresses(policy: &Policy, url: &Url) -> Result<Option<(String, Vec<SocketAddr>)>, Attempt> {
    let port = url.port_or_known_default().ok_or_else(|| Attempt::Stop("the URL has no port".to_owned()))?;
    let refuse = |ip: IpAddr| Attempt::Stop(format!("{ip} is an internal address outside the opened ranges"));
    match url.host() {
        Some(Host::Ipv4(ip)) if !policy.may_connect(IpAddr::V4(ip)) => Err(refuse(IpAddr::V4(ip))),
        Some(Host::Ipv6(ip)) if !policy.may_connect(IpAddr::V6(ip)) => Err(refuse(IpAddr::V6(ip))),
        Some(Host::Ipv4(_) | Host::Ipv6(_)) => Ok(None),
        Some(Host::Domain(domain)) => {
            let resolved = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((domain, port))).await;
            let addresses: Vec<SocketAddr> = match resolved {
                Ok(Ok(addresses)) => addresses.collect(),
                Ok(Err(_)) | Err(_) => return Err(Attempt::Retry(format!("could not resolve {domain}"))),
            };
            if addresses.is_empty() {
                return Err(Attempt::Retry(format!("{domain} has no address")));
            }
            // One internal address among public ones is how a rebinding attack looks: all or nothing.
            if let Some(internal) = addresses.iter().find(|address| !policy.may_connect(address.ip())) {
                return Err(Attempt::Stop(format!(
                    "{domain} resolves to {}, an internal address outside the opened ranges",
                    internal.ip()
                )));
            }
            Ok(Some((domain.to_owned(), addresses)))
        }
        None => Err(Attempt::Stop("the URL has no host".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_deliver_stop_or_retry() {
        assert_eq!(classify(200), Attempt::Delivered(200));
        assert_eq!(classify(204), Attempt::Delivered(204));
        for stop in [301, 302, 400, 401, 404, 410, 413, 422] {
            assert!(matches!(classify(stop), Attempt::Stop(_)), "{stop}");
        }
        for retry in [408, 429, 500, 502, 503, 504] {
            assert!(matches!(classify(retry), Attempt::Retry(_)), "{retry}");
        }
    }

    #[test]
    fn queued_delays_double_from_the_first_up_to_900_seconds_with_jitter() {
        let full: Vec<u32> = (4..=MAX_ATTEMPTS).map(|attempt| queue_delay(attempt, 30, 1.0)).collect();
        assert_eq!(&full[..7], &[30, 60, 120, 240, 480, 900, 900]);
        assert!(full.iter().all(|delay| *delay <= MAX_QUEUE_DELAY_SECS));
        assert_eq!(queue_delay(5, 30, 0.0), 30, "half at the least jitter");
        assert_eq!(queue_delay(5, 30, 7.0), 60, "jitter is clamped");
        assert_eq!(queue_delay(MAX_ATTEMPTS, 0, 1.0), 0, "a zero first delay stays zero");
        assert_eq!(queue_delay(u32::MAX, u32::MAX, 1.0), MAX_QUEUE_DELAY_SECS);
        // Some hours in all, but bounded: from about 1.6 to 3.3 hours of queued delays.
        let (least, most): (u32, u32) = (
            (INLINE_ATTEMPTS + 1..=MAX_ATTEMPTS).map(|a| queue_delay(a, 30, 0.0)).sum(),
            (INLINE_ATTEMPTS + 1..=MAX_ATTEMPTS).map(|a| queue_delay(a, 30, 1.0)).sum(),
        );
        assert_eq!((least, most), (5865, 11_730));
        assert_eq!(inline_pause(1, 1.0), Duration::from_millis(500));
        assert_eq!(inline_pause(2, 1.0), Duration::from_secs(1));
        assert_eq!(inline_pause(2, 0.0), Duration::from_millis(500));
    }

    #[tokio::test]
    async fn internal_literal_addresses_are_never_connected_to() {
        let policy = Policy::default();
        for url in ["http://169.254.169.254/latest/", "http://127.0.0.1:1/", "http://[::1]:1/", "http://10.0.0.1/"] {
            let url = Url::parse(url).unwrap();
            assert!(matches!(checked_addresses(&policy, &url).await, Err(Attempt::Stop(_))), "{url}");
        }
        let public = Url::parse("http://93.184.216.34/").unwrap();
        assert_eq!(checked_addresses(&policy, &public).await, Ok(None));
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_an_internal_address_is_refused() {
        // `localhost` resolves to loopback here, with no network: the guard sees the address, not the name.
        let url = Url::parse("http://localhost:9/").unwrap();
        let refused = checked_addresses(&Policy::default(), &url).await.unwrap_err();
        assert!(matches!(&refused, Attempt::Stop(reason) if reason.contains("internal")), "{refused:?}");
    }
}
