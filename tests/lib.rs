//! Support for the integration tests: real protocol peers started on loopback.

pub mod moto;
