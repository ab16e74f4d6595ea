//! The `lambda` backend: each command is one synchronous invocation of the `sandbox` function
//! (`functions/sandbox`), which runs this crate's handler in a Lambda execution environment. The
//! invocation carries the tenant's id as Lambda's tenant id, so with the function's
//! `TenantIsolationMode: PER_TENANT` an execution environment never serves two tenants.
//!
//! The client ([`LambdaSandbox`]) needs the `lambda-client` feature; the bounds and the tenant id's
//! mapping are here for both sides, since the function checks the tenant id it is invoked with.

use std::time::Duration;

#[cfg(feature = "lambda-client")]
mod client;

#[cfg(feature = "lambda-client")]
pub use client::LambdaSandbox;

/// The environment variable naming the sandbox function (its name or ARN).
pub const SANDBOX_FUNCTION_ENV: &str = "SANDBOX_FUNCTION";
/// Lambda's bound on a synchronous invocation's request body, in bytes.
pub const MAX_INVOKE_PAYLOAD_BYTES: usize = 6_291_456;
/// How much longer than its command's timeout an invocation may take: a cold start of the image,
/// writing and collecting the files, and the payloads' transfer.
pub const INVOKE_MARGIN: Duration = Duration::from_secs(15);

/// Lambda's tenant id for a user id. Lambda takes 1 to 256 of `A-Z a-z 0-9 . _ : / = + - @` and
/// space; a user id may also hold `|` (`auth0|123`), which becomes `/`, a character no user id
/// has, so that two users never share a tenant id.
pub fn tenant_id(user: &str) -> String {
    user.replace('|', "/")
}

#[cfg(test)]
mod tests {
    use agent_ports::UserId;

    use super::*;

    #[test]
    fn tenant_ids_are_user_ids_in_lambdas_alphabet() {
        assert_eq!(tenant_id("user-1@example.com"), "user-1@example.com");
        assert_eq!(tenant_id("auth0|123"), "auth0/123");
        // `/` is not a user id's character, so the mapping cannot merge two users.
        assert!(UserId::parse("auth0/123").is_err());
        let lambda_alphabet = |c: char| c.is_ascii_alphanumeric() || "._:/=+-@ ".contains(c);
        for user in ["a", "auth0|x", "google-oauth2|1", "x.y:z+w=v_u-t@s"] {
            let id = tenant_id(UserId::parse(user).expect("valid").as_str());
            assert!(id.chars().all(lambda_alphabet) && (1..=256).contains(&id.len()), "{id:?}");
        }
    }
}
