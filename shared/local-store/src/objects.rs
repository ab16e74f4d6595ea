//! The object store: objects in memory with content-derived ETags like S3's, conditional reads and
//! writes, and (when made `recording`) every call kept in order for the core's tests.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use agent_ports::store::{Fetched, WriteCondition};
use agent_ports::{Object, ObjectMeta, ObjectStore, StoreError};
use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::support::{bump, lock, CallCounts};

/// One object: its bytes, its ETag and when it was written (unix seconds), as S3 keeps them.
#[derive(Debug)]
struct Stored {
    bytes: Vec<u8>,
    etag: String,
    modified: i64,
}

impl Stored {
    fn new(bytes: Vec<u8>, etag: String) -> Self {
        let modified =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        Self { bytes, etag, modified }
    }
}

/// Objects in memory, with content-derived ETags like S3's.
#[derive(Debug, Default)]
pub struct MemoryObjectStore {
    objects: Mutex<BTreeMap<String, Stored>>,
    pub calls: CallCounts,
    /// Every call in order, kept only by a store made with [`MemoryObjectStore::recording`]: tests
    /// assert which keys a piece of the core asked for, the benchmark keeps nothing.
    log: Option<Mutex<Vec<String>>>,
}

impl MemoryObjectStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// A store that also keeps every call of the runtime, in order, for [`Self::recorded`].
    pub fn recording() -> Self {
        Self { log: Some(Mutex::new(Vec::new())), ..Self::default() }
    }

    /// The calls so far, in order: `list {prefix}`, `get {key}`, `put {key}`, `delete {key}`
    /// (conditional reads and writes as `get` and `put`); empty unless made [`Self::recording`].
    pub fn recorded(&self) -> Vec<String> {
        self.log.as_ref().map(|log| lock(log).clone()).unwrap_or_default()
    }

    fn record(&self, call: &str, key: &str) {
        if let Some(log) = &self.log {
            lock(log).push(format!("{call} {key}"));
        }
    }

    /// An object's bytes, for assertions; not counted as a call.
    pub fn bytes(&self, key: &str) -> Option<Vec<u8>> {
        lock(&self.objects).get(key).map(|stored| stored.bytes.clone())
    }

    /// Copies every file under `dir` to `{prefix}{relative path}`; used to seed example skills.
    pub fn upload_dir(&self, dir: &Path, prefix: &str) -> std::io::Result<usize> {
        let mut count = 0;
        let mut pending = vec![dir.to_path_buf()];
        while let Some(current) = pending.pop() {
            for entry in std::fs::read_dir(&current)? {
                let path = entry?.path();
                if path.is_dir() {
                    pending.push(path);
                    continue;
                }
                let relative = path.strip_prefix(dir).expect("walked from dir");
                let key = format!("{prefix}{}", relative.to_string_lossy().replace('\\', "/"));
                self.insert(&key, std::fs::read(&path)?);
                count += 1;
            }
        }
        Ok(count)
    }

    /// Writes an object without counting it as a call of the runtime; returns its ETag.
    pub fn insert(&self, key: &str, bytes: impl Into<Vec<u8>>) -> String {
        let bytes = bytes.into();
        let etag = hex::encode(&Sha256::digest(&bytes)[..16]);
        lock(&self.objects).insert(key.to_owned(), Stored::new(bytes, etag.clone()));
        etag
    }

    /// Removes an object without counting it as a call of the runtime.
    pub fn remove(&self, key: &str) {
        lock(&self.objects).remove(key);
    }

    /// Every key, for assertions.
    pub fn keys(&self) -> Vec<String> {
        lock(&self.objects).keys().cloned().collect()
    }
}

#[async_trait]
impl ObjectStore for MemoryObjectStore {
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        bump(&self.calls.object_lists);
        self.record("list", prefix);
        let objects = lock(&self.objects);
        Ok(objects
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, stored)| ObjectMeta {
                key: key.clone(),
                etag: stored.etag.clone(),
                size: stored.bytes.len() as u64,
                last_modified: Some(stored.modified),
            })
            .collect())
    }

    async fn get(&self, key: &str) -> Result<Option<Object>, StoreError> {
        bump(&self.calls.object_gets);
        self.record("get", key);
        Ok(lock(&self.objects).get(key).map(|stored| Object { bytes: stored.bytes.clone(), etag: stored.etag.clone() }))
    }

    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        bump(&self.calls.object_puts);
        self.record("put", key);
        self.insert(key, bytes);
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        bump(&self.calls.object_puts);
        self.record("delete", key);
        lock(&self.objects).remove(key);
        Ok(())
    }

    async fn get_if_changed(&self, key: &str, etag: Option<&str>) -> Result<Fetched, StoreError> {
        bump(&self.calls.object_gets);
        self.record("get", key);
        Ok(match lock(&self.objects).get(key) {
            None => Fetched::Missing,
            Some(stored) if Some(stored.etag.as_str()) == etag => Fetched::NotModified,
            Some(stored) => Fetched::Changed(Object { bytes: stored.bytes.clone(), etag: stored.etag.clone() }),
        })
    }

    async fn put_if(&self, key: &str, bytes: Vec<u8>, condition: WriteCondition) -> Result<String, StoreError> {
        bump(&self.calls.object_puts);
        self.record("put", key);
        // One lock for the check and the write: the same atomicity as S3's conditional PUT.
        let mut objects = lock(&self.objects);
        let holds = match (&condition, objects.get(key)) {
            (WriteCondition::Absent, existing) => existing.is_none(),
            (WriteCondition::Matches(etag), Some(stored)) => stored.etag == *etag,
            (WriteCondition::Matches(_), None) => false,
        };
        if !holds {
            return Err(StoreError::Conflict);
        }
        let etag = hex::encode(&Sha256::digest(&bytes)[..16]);
        objects.insert(key.to_owned(), Stored::new(bytes, etag.clone()));
        Ok(etag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lists_only_the_prefix() {
        let store = MemoryObjectStore::new();
        store.insert("u1/skills/a/b/SKILL.md", b"x".to_vec());
        store.insert("u1/skillsX/a", b"y".to_vec());
        store.insert("u10/skills/a/b/SKILL.md", b"z".to_vec());
        let listed = store.list("u1/skills/").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].key, "u1/skills/a/b/SKILL.md");
    }
}
