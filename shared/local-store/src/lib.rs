//! An embedded, in-process implementation of the storage ports, with the same semantics as the
//! S3/DynamoDB adapters (atomic versioned commits, ETags, usage counted with the commit), and
//! counters of every call.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use agent_ports::message::session_title;
use agent_ports::store::{BudgetOverride, BudgetState, Fetched, Reservation, TurnUsage, UsageDay, WriteCondition};
use agent_ports::store::{SessionCursor, SessionList, SessionSummary, MAX_SESSIONS_PAGE};
use agent_ports::store::{MAX_LOADED_HISTORY_BYTES, MAX_LOADED_TURNS};
use agent_ports::{
    Accepted, Claim, HistoryPage, IdempotencyKey, Message, Object, ObjectMeta, ObjectStore, Session, SessionId,
    SessionState, SessionStore, StoreError, TurnCommit, TurnStatus, UserId,
};
use async_trait::async_trait;
use sha2::{Digest, Sha256};

/// How many calls each port received; read by the benchmark.
#[derive(Debug, Default)]
pub struct CallCounts {
    pub object_lists: AtomicU64,
    pub object_gets: AtomicU64,
    pub object_puts: AtomicU64,
    pub session_loads: AtomicU64,
    pub session_commits: AtomicU64,
}

impl CallCounts {
    /// All calls so far, summed over kinds.
    pub fn total(&self) -> u64 {
        [&self.object_lists, &self.object_gets, &self.object_puts, &self.session_loads, &self.session_commits]
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

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

#[derive(Debug, Clone)]
struct StoredSession {
    version: u64,
    turns: Vec<Vec<Message>>,
    state: SessionState,
    created_at: i64,
    updated_at: i64,
    title: Option<String>,
}

/// An idempotency record: running under an owner until its lease ends, committed with its reply,
/// or (a background turn) queued, or failed with its error.
#[derive(Debug, Clone)]
struct KeyRecord {
    request_hash: String,
    /// `None` while a background turn waits in the queue.
    owner: Option<String>,
    lease_until: i64,
    reply: Option<serde_json::Value>,
    error: Option<serde_json::Value>,
    background: bool,
    expires_at: i64,
}

/// How long a finished key is remembered, as in the DynamoDB adapter.
const KEY_TTL_SECS: i64 = 24 * 60 * 60;

impl KeyRecord {
    fn status(&self) -> TurnStatus {
        match (&self.reply, &self.error, &self.owner) {
            (Some(reply), _, _) => TurnStatus::Committed { reply: reply.clone() },
            (None, Some(error), _) => TurnStatus::Failed { error: error.clone() },
            (None, None, Some(_)) => TurnStatus::Running,
            (None, None, None) => TurnStatus::Queued,
        }
    }
}

/// A fresh owner token: only needs to differ between claims of one process.
fn rand_owner() -> u128 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let count = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    (nanos << 32) ^ u128::from(count)
}

/// Sessions in memory; `commit` is atomic and versioned exactly like the DynamoDB adapter's,
/// idempotency keys included.
#[derive(Debug, Default)]
pub struct MemorySessionStore {
    sessions: Mutex<HashMap<(UserId, SessionId), StoredSession>>,
    keys: Mutex<HashMap<(UserId, SessionId, String), KeyRecord>>,
    usage: Mutex<Usage>,
    pub calls: CallCounts,
}

/// Every tenant's usage by day, the tokens of failed turns' writes already applied, and the
/// operators' budgets.
#[derive(Debug, Default)]
struct Usage {
    days: BTreeMap<(UserId, String), UsageDay>,
    applied: HashSet<String>,
    budgets: HashMap<UserId, BudgetOverride>,
    /// Tokens held by running model calls, by tenant and day.
    reserved: HashMap<(UserId, String), u64>,
}

impl Usage {
    fn add(&mut self, user: &UserId, usage: &TurnUsage) {
        if usage.reserved > 0 {
            let held = self.reserved.entry((user.clone(), usage.day.clone())).or_default();
            *held = held.saturating_sub(usage.reserved);
        }
        if usage.is_empty() && !usage.committed {
            // Only a reservation given back: no spend, no failed turn.
            return;
        }
        let day = self
            .days
            .entry((user.clone(), usage.day.clone()))
            .or_insert_with(|| UsageDay { day: usage.day.clone(), ..UsageDay::default() });
        day.totals.add(&usage.totals());
        for (model, spent) in &usage.models {
            day.models.entry(model.clone()).or_default().add(spent);
        }
    }
}

impl MemorySessionStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or with `None` removes) `user`'s own daily budget, as an operator's item does in DynamoDB.
    pub fn set_budget(&self, user: &UserId, budget: Option<BudgetOverride>) {
        let mut usage = lock(&self.usage);
        match budget {
            Some(budget) => usage.budgets.insert(user.clone(), budget),
            None => usage.budgets.remove(user),
        };
    }
}

#[async_trait]
impl SessionStore for MemorySessionStore {
    async fn load(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError> {
        bump(&self.calls.session_loads);
        let sessions = lock(&self.sessions);
        let Some(stored) = sessions.get(&(user.clone(), session.clone())) else { return Ok(None) };
        // The same bounds as the DynamoDB adapter: back from the newest turn to the summary's boundary.
        let boundary = stored.state.summary.as_ref().map_or(0, |summary| summary.covers);
        let mut end: usize = stored.turns.iter().map(Vec::len).sum();
        let (mut first, mut bytes) = (stored.turns.len(), 0usize);
        while first > 0 {
            first -= 1;
            end -= stored.turns[first].len();
            bytes += serde_json::to_string(&stored.turns[first]).map_or(0, |json| json.len());
            let count = stored.turns.len() - first;
            if (stored.state.summary.is_some() && end <= boundary)
                || count >= MAX_LOADED_TURNS
                || bytes >= MAX_LOADED_HISTORY_BYTES
            {
                break;
            }
        }
        let mut turn_starts = Vec::new();
        let mut start = end;
        for (index, turn) in stored.turns.iter().enumerate().skip(first) {
            turn_starts.push((index as u64 + 1, start));
            start += turn.len();
        }
        Ok(Some(Session {
            user_id: user.clone(),
            session_id: session.clone(),
            version: stored.version,
            history: stored.turns[first..].concat(),
            history_offset: end,
            turn_starts,
            state: stored.state.clone(),
            updated_at: stored.updated_at,
        }))
    }

    async fn history_page(
        &self,
        user: &UserId,
        session: &SessionId,
        before: Option<u64>,
        max_turns: usize,
        max_bytes: usize,
    ) -> Result<Option<(Session, HistoryPage)>, StoreError> {
        let sessions = lock(&self.sessions);
        let Some(stored) = sessions.get(&(user.clone(), session.clone())) else { return Ok(None) };
        let newest = before.map_or(stored.version, |before| before.saturating_sub(1).min(stored.version));
        let (mut turns, mut bytes) = (Vec::new(), 0usize);
        let mut number = newest;
        while number > 0 && turns.len() < max_turns.max(1) && (turns.is_empty() || bytes < max_bytes) {
            let messages = stored.turns[(number - 1) as usize].clone();
            bytes += serde_json::to_string(&messages).map_or(0, |json| json.len());
            turns.push((number, messages));
            number -= 1;
        }
        let next_before = (number > 0).then(|| number + 1);
        let mut meta = Session::new(user.clone(), session.clone());
        meta.version = stored.version;
        meta.state = stored.state.clone();
        meta.updated_at = stored.updated_at;
        Ok(Some((meta, HistoryPage { turns, next_before })))
    }

    async fn commit(&self, user: &UserId, session: &SessionId, commit: &TurnCommit) -> Result<(), StoreError> {
        bump(&self.calls.session_commits);
        // Lock order: keys, then sessions, then usage, as everywhere in this store.
        let mut keys = lock(&self.keys);
        let mut sessions = lock(&self.sessions);
        let mut usage = lock(&self.usage);
        let key = (user.clone(), session.clone());
        let current = sessions.get(&key).map_or(0, |stored| stored.version);
        if current != commit.expected_version {
            return Err(StoreError::Conflict);
        }
        if let Some(idempotency) = &commit.idempotency {
            let id = (user.clone(), session.clone(), idempotency.key.key_hash.clone());
            match keys.get_mut(&id) {
                Some(record)
                    if record.owner.as_deref() == Some(idempotency.owner.as_str())
                        && record.reply.is_none()
                        && record.error.is_none() =>
                {
                    record.reply = Some(idempotency.reply.clone());
                    record.expires_at = commit.now + KEY_TTL_SECS;
                }
                _ => return Err(StoreError::Conflict),
            }
        }
        let stored = sessions.entry(key).or_insert_with(|| StoredSession {
            version: 0,
            turns: Vec::new(),
            state: SessionState::default(),
            created_at: commit.now,
            updated_at: 0,
            title: session_title(&commit.new_messages),
        });
        stored.version += 1;
        stored.turns.push(commit.new_messages.clone());
        stored.state = commit.state.clone();
        stored.updated_at = commit.now;
        // Under the same locks: the usage counts exactly when the turn is stored.
        if let Some(spent) = &commit.usage {
            usage.add(user, spent);
        }
        Ok(())
    }

    async fn record_usage(&self, user: &UserId, spent: &TurnUsage, token: &str) -> Result<(), StoreError> {
        let mut usage = lock(&self.usage);
        // A write already applied under this token is acknowledged, not counted again.
        if usage.applied.insert(token.to_owned()) {
            usage.add(user, spent);
        }
        Ok(())
    }

    async fn usage(&self, user: &UserId, from: &str, to: &str) -> Result<Vec<UsageDay>, StoreError> {
        let usage = lock(&self.usage);
        let range = (user.clone(), from.to_owned())..=(user.clone(), to.to_owned());
        Ok(usage.days.range(range).map(|(_, day)| day.clone()).collect())
    }

    async fn budget_state(&self, user: &UserId, day: &str) -> Result<BudgetState, StoreError> {
        let usage = lock(&self.usage);
        let used_tokens = usage.days.get(&(user.clone(), day.to_owned())).map_or(0, |day| day.totals.tokens());
        Ok(BudgetState {
            used_tokens,
            claimed_tokens: used_tokens + usage.reserved.get(&(user.clone(), day.to_owned())).copied().unwrap_or(0),
            budget: usage.budgets.get(user).copied(),
            misconfigured: None,
        })
    }

    async fn reserve_tokens(
        &self,
        user: &UserId,
        day: &str,
        want: u64,
        budget: u64,
        _seen: u64,
    ) -> Result<Reservation, StoreError> {
        // Under the lock, as DynamoDB's conditional update: read, compare and add at once.
        let mut usage = lock(&self.usage);
        let key = (user.clone(), day.to_owned());
        let spent = usage.days.get(&key).map_or(0, |day| day.totals.tokens());
        let held = usage.reserved.entry(key).or_default();
        let claimed = spent + *held;
        let left = budget.saturating_sub(claimed);
        if left == 0 {
            return Ok(Reservation::Refused { claimed });
        }
        let tokens = want.min(left).max(1);
        *held += tokens;
        Ok(Reservation::Granted { tokens, claimed: claimed + tokens })
    }

    async fn list_sessions(
        &self,
        user: &UserId,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<SessionList, StoreError> {
        let limit = limit.clamp(1, MAX_SESSIONS_PAGE);
        let sessions = lock(&self.sessions);
        // The DynamoDB index's order: newest update first, then the session id, descending.
        let mut mine: Vec<SessionSummary> = sessions
            .iter()
            .filter(|((owner, _), _)| owner == user)
            .map(|((_, session), stored)| SessionSummary {
                session_id: session.clone(),
                created_at: stored.created_at,
                updated_at: stored.updated_at,
                version: stored.version,
                title: stored.title.clone(),
            })
            .filter(|summary| {
                after.is_none_or(|after| {
                    (summary.updated_at, summary.session_id.as_str()) < (after.updated_at, after.session_id.as_str())
                })
            })
            .collect();
        mine.sort_by(|a, b| (b.updated_at, b.session_id.as_str()).cmp(&(a.updated_at, a.session_id.as_str())));
        let next = (mine.len() > limit).then(|| SessionCursor {
            updated_at: mine[limit - 1].updated_at,
            session_id: mine[limit - 1].session_id.clone(),
        });
        mine.truncate(limit);
        Ok(SessionList { sessions: mine, next })
    }

    async fn claim(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
        lease_until: i64,
    ) -> Result<Claim, StoreError> {
        let mut keys = lock(&self.keys);
        let id = (user.clone(), session.clone(), key.key_hash.clone());
        let mut background = false;
        if let Some(record) = keys.get(&id).filter(|record| record.expires_at >= now) {
            if record.request_hash != key.request_hash {
                return Ok(Claim::Mismatch);
            }
            match record.status() {
                TurnStatus::Committed { reply } => return Ok(Claim::Committed { reply }),
                TurnStatus::Failed { error } => return Ok(Claim::Failed { error }),
                TurnStatus::Running if record.lease_until >= now => return Ok(Claim::Running),
                TurnStatus::Running | TurnStatus::Queued => background = record.background,
            }
        }
        let owner = format!("{:032x}", rand_owner());
        let record = KeyRecord {
            request_hash: key.request_hash.clone(),
            owner: Some(owner.clone()),
            lease_until,
            reply: None,
            error: None,
            background,
            expires_at: lease_until + KEY_TTL_SECS,
        };
        keys.insert(id, record);
        Ok(Claim::Claimed { owner })
    }

    async fn release(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        owner: &str,
    ) -> Result<(), StoreError> {
        let mut keys = lock(&self.keys);
        let id = (user.clone(), session.clone(), key.key_hash.clone());
        let Some(record) = keys.get_mut(&id) else { return Ok(()) };
        if record.owner.as_deref() != Some(owner) || record.reply.is_some() || record.error.is_some() {
            return Ok(());
        }
        if record.background {
            record.owner = None;
        } else {
            keys.remove(&id);
        }
        Ok(())
    }

    async fn accept(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        now: i64,
    ) -> Result<Accepted, StoreError> {
        let mut keys = lock(&self.keys);
        let id = (user.clone(), session.clone(), key.key_hash.clone());
        if let Some(record) = keys.get(&id).filter(|record| record.expires_at >= now) {
            if record.request_hash != key.request_hash {
                return Ok(Accepted::Mismatch);
            }
            return Ok(Accepted::Existing(record.status()));
        }
        let record = KeyRecord {
            request_hash: key.request_hash.clone(),
            owner: None,
            lease_until: 0,
            reply: None,
            error: None,
            background: true,
            expires_at: now + KEY_TTL_SECS,
        };
        keys.insert(id, record);
        Ok(Accepted::New)
    }

    async fn turn_status(
        &self,
        user: &UserId,
        session: &SessionId,
        key_hash: &str,
        now: i64,
    ) -> Result<Option<TurnStatus>, StoreError> {
        let keys = lock(&self.keys);
        let id = (user.clone(), session.clone(), key_hash.to_owned());
        Ok(keys.get(&id).filter(|record| record.expires_at >= now).map(KeyRecord::status))
    }

    async fn fail_queued(
        &self,
        user: &UserId,
        session: &SessionId,
        key: &IdempotencyKey,
        error: &serde_json::Value,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut keys = lock(&self.keys);
        let id = (user.clone(), session.clone(), key.key_hash.clone());
        match keys.get_mut(&id) {
            Some(record) if record.background && record.status() == TurnStatus::Queued => {
                record.error = Some(error.clone());
                record.expires_at = now + KEY_TTL_SECS;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn commits_are_versioned() {
        let store = MemorySessionStore::new();
        let user = UserId::parse("u1").unwrap();
        let session = SessionId::parse("s1").unwrap();
        let commit = TurnCommit {
            expected_version: 0,
            new_messages: vec![Message::user("hi")],
            history_len: 0,
            state: SessionState::default(),
            now: 1,
            commit_token: "t1".to_owned(),
            idempotency: None,
            usage: None,
        };
        store.commit(&user, &session, &commit).await.unwrap();
        assert!(matches!(store.commit(&user, &session, &commit).await, Err(StoreError::Conflict)));
        let loaded = store.load(&user, &session).await.unwrap().unwrap();
        assert_eq!((loaded.version, loaded.history.len()), (1, 1));
        let other = UserId::parse("u2").unwrap();
        assert!(store.load(&other, &session).await.unwrap().is_none());
    }

    fn first_commit(now: i64) -> TurnCommit {
        TurnCommit {
            expected_version: 0,
            new_messages: vec![Message::user("hi")],
            history_len: 0,
            state: SessionState::default(),
            now,
            commit_token: format!("t{now}"),
            idempotency: None,
            usage: None,
        }
    }

    #[tokio::test]
    async fn lists_a_users_own_sessions_newest_first_in_pages() {
        let store = MemorySessionStore::new();
        let (ana, bob) = (UserId::parse("ana").unwrap(), UserId::parse("bob").unwrap());
        // s3 and s4 are updated in the same second: the session id orders them.
        for (name, now) in [("s1", 10), ("s2", 20), ("s3", 30), ("s4", 30), ("s5", 5)] {
            store.commit(&ana, &SessionId::parse(name).unwrap(), &first_commit(now)).await.unwrap();
        }
        store.commit(&bob, &SessionId::parse("b1").unwrap(), &first_commit(40)).await.unwrap();
        // A second turn moves s1 to the top and keeps its creation time.
        let mut second = first_commit(50);
        second.expected_version = 1;
        second.history_len = 1;
        store.commit(&ana, &SessionId::parse("s1").unwrap(), &second).await.unwrap();

        let mut seen = Vec::new();
        let mut after = None;
        let mut pages = 0;
        loop {
            let page = store.list_sessions(&ana, after.as_ref(), 2).await.unwrap();
            pages += 1;
            assert!(page.sessions.len() <= 2);
            seen.extend(
                page.sessions.iter().map(|s| (s.session_id.to_string(), s.created_at, s.updated_at, s.version)),
            );
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(pages, 3, "five sessions in pages of two, the last page without a cursor");
        let expected = [("s1", 10, 50, 2), ("s4", 30, 30, 1), ("s3", 30, 30, 1), ("s2", 20, 20, 1), ("s5", 5, 5, 1)];
        let expected: Vec<_> = expected.iter().map(|(s, c, u, v)| (s.to_string(), *c, *u, *v)).collect();
        assert_eq!(seen, expected);

        // A cursor names no user: used by another, it lists that user's own sessions only.
        let ana_cursor = SessionCursor { updated_at: 60, session_id: SessionId::parse("s1").unwrap() };
        let bobs = store.list_sessions(&bob, Some(&ana_cursor), 100).await.unwrap();
        let ids: Vec<String> = bobs.sessions.iter().map(|s| s.session_id.to_string()).collect();
        assert_eq!(ids, ["b1"]);
        assert!(bobs.next.is_none());
        let nobody = store.list_sessions(&UserId::parse("carol").unwrap(), None, 20).await.unwrap();
        assert!(nobody.sessions.is_empty() && nobody.next.is_none());
    }

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
