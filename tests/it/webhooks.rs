//! Webhooks of background turns, received on loopback.
