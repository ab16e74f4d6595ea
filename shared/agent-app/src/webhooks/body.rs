//! What a request says of its webhook: part of the turn's HTTP body (and of its queue record), kept
//! apart from the rest of the webhooks so that the body's parser needs nothing else of them.

use serde::{Deserialize, Serialize};

/// The longest callback URL (and allow-list entry) taken.
pub const MAX_URL_BYTES: usize = 2048;

/// A turn's `webhook` as a request (and its queue record) names it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct WebhookBody {
    pub url: String,
}
