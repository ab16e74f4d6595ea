//! The runtime's signature on the bundles it builds: an HMAC-SHA256 with the deployment's key over a
//! fixed domain string, the tenant's id and the bundle's SHA-256, of which the first 128 bits travel
//! as hex in the bundle's name (`.bundle/{sha256}.{mac}.tar`), so the file listing the catalog keeps
//! already carries it. A bundle is named to a sandbox, read or installed only when its signature
//! checks out for the call's tenant: bytes a tenant places under `.bundle/` itself (a direct S3
//! write, an upload) are never installed, nor is another tenant's bundle copied across.

use agent_ports::bundle::{bundle_file, is_mac, MAC_HEX_LEN};
use agent_ports::ids::UserId;
use hmac::{Hmac, KeyInit, Mac};

type BundleMac = Hmac<sha2_hmac::Sha256>;

/// A shorter key is refused: it could be guessed.
pub const MIN_KEY_BYTES: usize = 32;
/// A longer one is a misconfigured secret, not a key.
pub const MAX_KEY_BYTES: usize = 4096;
/// Keeps this MAC apart from anything else the same key might ever sign.
const DOMAIN: &[u8] = b"agent-runtime skill bundle v1";

/// The deployment's bundle signing key; `Debug` never shows it.
#[derive(Clone)]
pub struct BundleKey {
    key: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for BundleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BundleKey(redacted)")
    }
}

impl BundleKey {
    /// The key of `bytes`, which must be [`MIN_KEY_BYTES`] to [`MAX_KEY_BYTES`] long.
    pub fn new(bytes: &[u8]) -> Result<Self, String> {
        if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&bytes.len()) {
            return Err(format!("a bundle signing key holds {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes"));
        }
        Ok(Self { key: bytes.into() })
    }

    fn hmac(&self, tenant: &UserId, sha256: &str) -> BundleMac {
        let mut mac = BundleMac::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        // NUL never occurs in a tenant id or a hash, so the parts cannot run into each other.
        for part in [DOMAIN, tenant.as_str().as_bytes(), sha256.as_bytes()] {
            mac.update(part);
            mac.update(b"\0");
        }
        mac
    }

    /// The signature of bundle `sha256` for `tenant`, as its name carries it.
    pub fn mac(&self, tenant: &UserId, sha256: &str) -> String {
        let tag = self.hmac(tenant, sha256).finalize().into_bytes();
        hex::encode(&tag[..MAC_HEX_LEN / 2])
    }

    /// Whether `mac` is this key's signature of bundle `sha256` for `tenant` (compared in constant time).
    pub fn verify(&self, tenant: &UserId, sha256: &str, mac: &str) -> bool {
        let Some(tag) = is_mac(mac).then(|| hex::decode(mac).ok()).flatten() else { return false };
        self.hmac(tenant, sha256).verify_truncated_left(&tag).is_ok()
    }

    /// The signed bundle's path inside its skill: `.bundle/{sha256}.{mac}.tar`.
    pub fn file(&self, tenant: &UserId, sha256: &str) -> String {
        bundle_file(sha256, &self.mac(tenant, sha256))
    }
}

#[cfg(test)]
mod tests {
    use agent_ports::bundle::parse_bundle_file;

    use super::*;

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn key(text: &str) -> BundleKey {
        BundleKey::new(text.as_bytes()).unwrap()
    }

    #[test]
    fn the_mac_is_hmac_sha256_over_the_domain_the_tenant_and_the_hash_cut_to_128_bits() {
        let (key, ana) = (key("a key of at least thirty-two bytes!"), UserId::parse("ana").unwrap());
        let mut direct = BundleMac::new_from_slice(b"a key of at least thirty-two bytes!").unwrap();
        direct.update(format!("agent-runtime skill bundle v1\0ana\0{HASH}\0").as_bytes());
        let full = hex::encode(direct.finalize().into_bytes());
        assert_eq!(key.mac(&ana, HASH), full[..32]);
        assert!(key.verify(&ana, HASH, &full[..32]));
        assert_eq!(parse_bundle_file(&key.file(&ana, HASH)), Some((HASH.to_owned(), Some(full[..32].to_owned()))));
    }

    #[test]
    fn another_tenant_hash_key_or_a_malformed_mac_does_not_verify() {
        let (one, ana) = (key("a key of at least thirty-two bytes!"), UserId::parse("ana").unwrap());
        let mac = one.mac(&ana, HASH);
        assert!(!one.verify(&UserId::parse("bob").unwrap(), HASH, &mac), "another tenant's");
        assert!(!one.verify(&ana, &"f".repeat(64), &mac), "another bundle's");
        assert!(!key("another key of thirty-two bytes!!").verify(&ana, HASH, &mac), "another key's");
        let mut flipped = mac.clone().into_bytes();
        flipped[31] = if flipped[31] == b'0' { b'1' } else { b'0' };
        for bad in [String::from_utf8(flipped).unwrap(), mac.to_uppercase(), mac[..30].to_owned(), String::new()] {
            assert!(!one.verify(&ana, HASH, &bad), "{bad}");
        }
        // The tenant and the hash are kept apart: no shift of text between them gives the same MAC.
        let shifted = UserId::parse("ana0").unwrap();
        assert_ne!(one.mac(&shifted, &HASH[1..]), one.mac(&ana, HASH));
    }

    #[test]
    fn short_or_huge_keys_are_refused_and_never_shown() {
        assert!(BundleKey::new(&[7; MIN_KEY_BYTES - 1]).is_err());
        assert!(BundleKey::new(&[7; MAX_KEY_BYTES + 1]).is_err());
        let key = key("a key of at least thirty-two bytes!");
        assert!(!format!("{key:?}").contains("thirty"));
    }
}
