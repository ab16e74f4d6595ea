//! The process-wide cache of experts' `tools/list` and `prompts/list`, kept as long as the server
//! allows (2026-07-28's `ttlMs`, capped at [`MAX_TTL`]) and shared only as far as it allows.
//!
//! Tenants are walls. A list is filed under what the server sees of the request (the URL and every
//! resolved header, hashed, so two configurations with different credentials never meet) and, unless
//! it may be shared, under the tenant (the verified user id) too. It may be shared across tenants
//! only when the server said `cacheScope: "public"` for every page and the expert is the
//! deployment's: a tenant's own expert, or any private (or unscoped) list, is reused by that tenant
//! alone. A list without a ttl (every 2025 server) or with ttl 0 is never kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::client::{Listed, McpPrompt, McpTool, Scope};
use crate::config::{Expert, Origin};

/// The longest a list is kept, whatever the server says: a changed expert is seen within this.
pub const MAX_TTL: Duration = Duration::from_secs(3600);

/// Lists kept per kind; past it, expired lists go first, then those that expire soonest.
pub const LIST_CACHE_CAPACITY: usize = 512;

/// Who asks for an expert's list: the expert as its server sees it, and the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asker {
    server: [u8; 32],
    deployment_expert: bool,
    tenant: String,
}

impl Asker {
    pub fn new(expert: &Expert, tenant: &str) -> Self {
        let mut hash = Sha256::new();
        hash.update(expert.url.as_str().as_bytes());
        let mut headers: Vec<_> = expert.headers().iter().map(|(n, v)| (n.as_str(), v.as_bytes())).collect();
        headers.sort();
        for (name, value) in headers {
            // Lengths first, so no two header lists hash alike by shifting bytes between fields.
            hash.update((name.len() as u64).to_be_bytes());
            hash.update(name.as_bytes());
            hash.update((value.len() as u64).to_be_bytes());
            hash.update(value);
        }
        Asker {
            server: hash.finalize().into(),
            deployment_expert: expert.origin == Origin::Deployment,
            tenant: tenant.to_owned(),
        }
    }

    fn key(&self, shared: bool) -> Key {
        Key { server: self.server, tenant: (!shared).then(|| self.tenant.clone()) }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    server: [u8; 32],
    /// `None`: shared by every tenant.
    tenant: Option<String>,
}

struct Entry<T> {
    items: Arc<Vec<T>>,
    expires: Instant,
}

/// One kind of list, bounded.
pub struct ListCache<T> {
    entries: Mutex<HashMap<Key, Entry<T>>>,
    capacity: usize,
}

impl<T> ListCache<T> {
    pub fn new(capacity: usize) -> Self {
        Self { entries: Mutex::new(HashMap::new()), capacity: capacity.max(1) }
    }

    /// A fresh list this asker may reuse: the shared one (deployment experts only), else its own.
    pub fn get(&self, asker: &Asker) -> Option<Arc<Vec<T>>> {
        let entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        let fresh = |key: &Key| entries.get(key).filter(|entry| entry.expires > now).map(|entry| entry.items.clone());
        asker.deployment_expert.then(|| fresh(&asker.key(true))).flatten().or_else(|| fresh(&asker.key(false)))
    }

    /// Keeps a listed result as its hint allows, and hands its items back.
    pub fn put(&self, asker: &Asker, listed: Listed<T>) -> Arc<Vec<T>> {
        let items = Arc::new(listed.items);
        let Some(ttl) = listed.cache.ttl.filter(|ttl| !ttl.is_zero()) else {
            return items;
        };
        let shared = asker.deployment_expert && listed.cache.scope == Scope::Public;
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = asker.key(shared);
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, entry| entry.expires > now);
            if entries.len() >= self.capacity {
                let soonest = entries.iter().min_by_key(|(_, entry)| entry.expires).map(|(key, _)| key.clone());
                if let Some(soonest) = soonest {
                    entries.remove(&soonest);
                }
            }
        }
        entries.insert(key, Entry { items: items.clone(), expires: now + ttl.min(MAX_TTL) });
        items
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The tool and prompt lists of every expert, for the process.
pub struct ExpertLists {
    pub tools: ListCache<McpTool>,
    pub prompts: ListCache<McpPrompt>,
}

impl Default for ExpertLists {
    fn default() -> Self {
        Self { tools: ListCache::new(LIST_CACHE_CAPACITY), prompts: ListCache::new(LIST_CACHE_CAPACITY) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::CacheHint;

    fn listed(items: &[&str], ttl_ms: Option<u64>, scope: Scope) -> Listed<String> {
        Listed {
            items: items.iter().map(|s| s.to_string()).collect(),
            cache: CacheHint { ttl: ttl_ms.map(Duration::from_millis), scope },
        }
    }

    fn expert(url: &str) -> Expert {
        Expert::new("e", url).unwrap()
    }

    #[test]
    fn a_private_list_serves_its_tenant_only() {
        let cache = ListCache::new(8);
        let (ana, bo) =
            (Asker::new(&expert("https://e.test/mcp"), "ana"), Asker::new(&expert("https://e.test/mcp"), "bo"));
        cache.put(&ana, listed(&["add"], Some(60_000), Scope::Private));
        assert_eq!(cache.get(&ana).as_deref(), Some(&vec!["add".to_owned()]));
        assert_eq!(cache.get(&bo), None, "another tenant never gets a private list");
    }

    #[test]
    fn a_public_list_of_a_deployment_expert_is_shared_but_a_tenants_is_not() {
        let cache = ListCache::new(8);
        let deployment = expert("https://e.test/mcp");
        cache.put(&Asker::new(&deployment, "ana"), listed(&["add"], Some(60_000), Scope::Public));
        assert!(cache.get(&Asker::new(&deployment, "bo")).is_some(), "public and the deployment's: shared");

        let mut tenants = expert("https://t.test/mcp");
        tenants.origin = Origin::Tenant;
        cache.put(&Asker::new(&tenants, "ana"), listed(&["mine"], Some(60_000), Scope::Public));
        assert!(cache.get(&Asker::new(&tenants, "ana")).is_some());
        assert_eq!(cache.get(&Asker::new(&tenants, "bo")), None, "a tenant's expert serves that tenant alone");
    }

    #[test]
    fn other_credentials_are_another_server_view() {
        let cache = ListCache::new(8);
        let plain = expert("https://e.test/mcp");
        let keyed = expert("https://e.test/mcp").with_header("Authorization", "Bearer one").unwrap();
        let other = expert("https://e.test/mcp").with_header("Authorization", "Bearer two").unwrap();
        cache.put(&Asker::new(&keyed, "ana"), listed(&["secret"], Some(60_000), Scope::Public));
        assert!(cache.get(&Asker::new(&keyed, "bo")).is_some());
        assert_eq!(cache.get(&Asker::new(&plain, "ana")), None);
        assert_eq!(cache.get(&Asker::new(&other, "ana")), None);
    }

    #[test]
    fn no_ttl_or_zero_is_not_kept_and_the_cache_is_bounded() {
        let cache = ListCache::new(2);
        let ana = Asker::new(&expert("https://e.test/mcp"), "ana");
        cache.put(&ana, listed(&["a"], None, Scope::Public));
        cache.put(&ana, listed(&["a"], Some(0), Scope::Public));
        assert!(cache.is_empty());
        for tenant in ["a", "b", "c", "d"] {
            cache.put(&Asker::new(&expert("https://e.test/mcp"), tenant), listed(&["x"], Some(60_000), Scope::Private));
        }
        assert_eq!(cache.len(), 2, "never more than the capacity");
        cache.put(&Asker::new(&expert("https://f.test/mcp"), "z"), listed(&["y"], Some(1), Scope::Private));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(cache.get(&Asker::new(&expert("https://f.test/mcp"), "z")), None, "expired");
    }
}
