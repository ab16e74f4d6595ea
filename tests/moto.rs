//! Placeholder: moto_server on loopback.
