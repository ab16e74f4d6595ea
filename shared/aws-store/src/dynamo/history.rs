//! Reading a session back: the meta item and its turns newest first, in one descending Query from
//! the meta item's sort key, only as far as the turn needs (the summary's boundary); a history page
//! reads the meta item and the turns it asks for. Never the whole partition.

use agent_ports::ids::{SessionId, UserId};
use agent_ports::message::Message;
use agent_ports::store::{HistoryPage, Session, StoreError, MAX_LOADED_HISTORY_BYTES, MAX_LOADED_TURNS};
use aws_sdk_dynamodb::types::AttributeValue;

use super::{decode_state, partition_key, turn_sort_key, unix_now, DynamoSessionStore, META_SORT_KEY};
use super::{SPILL_THRESHOLD_BYTES, TURN_SORT_KEY_PREFIX};
use crate::codec::{s, Item, Reader};

/// Turns asked for per Query page when a load goes on past its first page: the recent part is
/// usually a few turns, and one page reads at most 1 MB whatever the limit.
const LOAD_PAGE_TURNS: i32 = 32;
/// Turns the first Query of a load reads after the meta item. The summary that says how many are
/// needed is in that meta item, so the first page cannot be sized to it: this many covers the
/// unsummarised turns of a summarised session (a summary is taken every few turns) and a short
/// conversation's whole history, so a load is one request; more are read on a second page. The
/// price is read capacity for turns the summary already covers, never another request.
const FIRST_PAGE_TURNS: i32 = 32;

/// One stored turn as read, before its messages are decoded.
pub(super) struct RawTurn {
    pub number: u64,
    /// Index of the turn's first message in the whole history (absent on very old items).
    pub offset: Option<usize>,
    pub item: Item,
}

/// The meta item's fields a reader needs.
struct Meta {
    version: u64,
    item: Item,
}

/// A walk back through a session's turns from its newest: the turns read so far, newest first.
pub(super) struct Walk {
    turns: Vec<RawTurn>,
    bytes: usize,
    newest: u64,
}

/// What one turn item told the walk.
enum Step {
    Next,
    /// The walk is over; `more` says whether older live turns may remain.
    Done {
        more: bool,
    },
}

impl Walk {
    fn new(newest: u64) -> Self {
        Self { turns: Vec::new(), bytes: 0, newest }
    }

    /// The number of the turn the walk reads next (0 when it read turn 1).
    fn next_number(&self) -> u64 {
        self.turns.last().map_or(self.newest, |turn| turn.number - 1)
    }

    /// Takes the next item of a descending read of the turns. Items above the newest turn are left
    /// from an earlier session of the same id that expired, and are passed over; an expired turn
    /// ends the walk (older ones expired before it).
    fn take(
        &mut self,
        pk: &str,
        item: Item,
        now: i64,
        more: &mut impl FnMut(usize, usize, &RawTurn) -> bool,
    ) -> Result<Step, StoreError> {
        let sk = item.get("sk").and_then(|sk| sk.as_s().ok()).cloned().unwrap_or_default();
        let context = format!("session {pk} {sk}");
        let number: u64 = sk
            .strip_prefix(TURN_SORT_KEY_PREFIX)
            .and_then(|number| number.parse().ok())
            .ok_or_else(|| StoreError::Corrupt(format!("session {pk}: bad turn sort key {sk:?}")))?;
        if number > self.newest {
            return Ok(Step::Next);
        }
        let reader = Reader { item: &item, context: &context };
        if reader.int::<i64>("expires_at")? < now {
            return Ok(Step::Done { more: false });
        }
        let expected = self.next_number();
        if number != expected {
            return Err(StoreError::Corrupt(format!("session {pk}: turn {expected} is missing")));
        }
        let offset = match reader.opt("message_offset") {
            Some(_) => Some(reader.int::<usize>("message_offset")?),
            None => None,
        };
        self.bytes += match item.get("messages") {
            Some(AttributeValue::S(json)) => json.len(),
            _ => SPILL_THRESHOLD_BYTES,
        };
        self.turns.push(RawTurn { number, offset, item });
        let last = self.turns.last().expect("just pushed");
        if last.number == 1 {
            return Ok(Step::Done { more: false });
        }
        if !more(self.turns.len(), self.bytes, last) {
            return Ok(Step::Done { more: true });
        }
        Ok(Step::Next)
    }
}

impl DynamoSessionStore {
    /// The live meta item of the session (at [`META_SORT_KEY`], or at [`super::LEGACY_META_SORT_KEY`] for a
    /// session written before that layout), or `None` when there is none or it has expired.
    async fn meta(&self, user: &UserId, session: &SessionId, now: i64) -> Result<Option<Meta>, StoreError> {
        let pk = partition_key(user, session);
        let found = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(&pk))
            .key("sk", s(META_SORT_KEY))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.backend("GetItem", &pk, err))?;
        let item = match found.item {
            Some(item) => item,
            None => match self.legacy_meta(&pk).await? {
                Some(item) => item,
                None => return Ok(None),
            },
        };
        Self::live_meta(user, session, item, now)
    }

    /// `item` as the session's meta item, or `None` when it has expired.
    fn live_meta(user: &UserId, session: &SessionId, item: Item, now: i64) -> Result<Option<Meta>, StoreError> {
        let context = format!("session {} META", partition_key(user, session));
        let reader = Reader { item: &item, context: &context };
        if reader.int::<i64>("expires_at")? < now {
            return Ok(None);
        }
        if reader.string("user_id")? != user.as_str() || reader.string("session_id")? != session.as_str() {
            return Err(StoreError::Corrupt(format!("{context}: user_id/session_id do not match the key")));
        }
        let version = reader.int("version")?;
        Ok(Some(Meta { version, item }))
    }

    /// Goes on with `walk`, strongly consistent, as long as `more(turns read, bytes read, last turn)`
    /// says so. Returns the turns, newest first, and whether older live turns may remain.
    pub(super) async fn turns_back(
        &self,
        pk: &str,
        mut walk: Walk,
        page_turns: i32,
        now: i64,
        more: &mut impl FnMut(usize, usize, &RawTurn) -> bool,
    ) -> Result<(Vec<RawTurn>, bool), StoreError> {
        let newest = walk.next_number();
        if newest == 0 {
            return Ok((walk.turns, false));
        }
        let mut start: Option<std::collections::HashMap<String, AttributeValue>> = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND #sk BETWEEN :first AND :newest")
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_names("#sk", "sk")
                .expression_attribute_values(":pk", s(pk))
                .expression_attribute_values(":first", s(turn_sort_key(1)))
                .expression_attribute_values(":newest", s(turn_sort_key(newest)))
                .scan_index_forward(false)
                .consistent_read(true)
                .limit(page_turns)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|err| self.backend("Query", pk, err))?;
            let last_key = page.last_evaluated_key().filter(|key| !key.is_empty()).cloned();
            for item in page.items.unwrap_or_default() {
                if let Step::Done { more } = walk.take(pk, item, now, more)? {
                    return Ok((walk.turns, more));
                }
            }
            match last_key {
                Some(key) => start = Some(key),
                None => return Ok((walk.turns, false)),
            }
        }
    }

    /// The messages of turns read by [`Self::turns_back`], oldest first.
    async fn messages_of(
        &self,
        user: &UserId,
        session: &SessionId,
        turns: &[RawTurn],
    ) -> Result<Vec<(u64, Vec<Message>)>, StoreError> {
        let mut out = Vec::with_capacity(turns.len());
        for turn in turns.iter().rev() {
            out.push((turn.number, self.turn_messages(user, session, turn.number, &turn.item).await?));
        }
        Ok(out)
    }

    /// The session as its meta item describes it, with no history yet.
    fn session_of(user: &UserId, session: &SessionId, meta: &Meta) -> Result<Session, StoreError> {
        let context = format!("session {} META", partition_key(user, session));
        let reader = Reader { item: &meta.item, context: &context };
        Ok(Session {
            user_id: user.clone(),
            session_id: session.clone(),
            version: meta.version,
            history: Vec::new(),
            history_offset: 0,
            turn_starts: Vec::new(),
            state: decode_state(&reader)?,
            updated_at: reader.int("updated_at")?,
        })
    }

    /// The session and its recent turns, in one Query when the session is in the current layout:
    /// descending from [`META_SORT_KEY`], the meta item comes first and the newest turns after it.
    pub(super) async fn load_recent(&self, user: &UserId, session: &SessionId) -> Result<Option<Session>, StoreError> {
        let now = unix_now();
        let pk = partition_key(user, session);
        let page = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :first AND :meta")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_names("#sk", "sk")
            .expression_attribute_values(":pk", s(&pk))
            .expression_attribute_values(":first", s(turn_sort_key(1)))
            .expression_attribute_values(":meta", s(META_SORT_KEY))
            .scan_index_forward(false)
            .consistent_read(true)
            .limit(1 + FIRST_PAGE_TURNS)
            .send()
            .await
            .map_err(|err| self.backend("Query", &pk, err))?;
        let truncated = page.last_evaluated_key().is_some_and(|key| !key.is_empty());
        let mut items = page.items.unwrap_or_default().into_iter().peekable();
        let meta_item = match items.peek() {
            // Nothing at all: no session (every commit writes a turn item with the meta item).
            None => return Ok(None),
            Some(first) if first.get("sk") == Some(&s(META_SORT_KEY)) => items.next().expect("peeked"),
            // Turns without a meta item at the new key: a session written before it, or turns left
            // by an expired session.
            Some(_) => match self.legacy_meta(&pk).await? {
                Some(item) => item,
                None => return Ok(None),
            },
        };
        let Some(meta) = Self::live_meta(user, session, meta_item, now)? else { return Ok(None) };
        let mut loaded = Self::session_of(user, session, &meta)?;
        // Without a summary every live turn is needed (within the bounds).
        let boundary = loaded.state.summary.as_ref().map(|summary| summary.covers);
        let mut more = |count: usize, bytes: usize, last: &RawTurn| {
            let reached = last.offset.zip(boundary).is_some_and(|(offset, boundary)| offset <= boundary);
            !reached && count < MAX_LOADED_TURNS && bytes < MAX_LOADED_HISTORY_BYTES
        };

        // Back from the newest turn to the one holding the summary's boundary, within the bounds:
        // the first page's turns, then, only when they were not enough, more pages.
        let mut walk = Walk::new(meta.version);
        let mut finished = meta.version == 0;
        let mut remain = false;
        if !finished {
            for item in items {
                if let Step::Done { more: older } = walk.take(&pk, item, now, &mut more)? {
                    (finished, remain) = (true, older);
                    break;
                }
            }
        }
        let turns = if finished || !truncated {
            walk.turns
        } else {
            // One page of exactly the turns still needed when the summary says where it ends.
            let next = walk.next_number();
            let page_turns = match loaded.state.summary.as_ref().and_then(|summary| summary.from_turn) {
                Some(from) if from >= 1 => {
                    i32::try_from((next + 1).saturating_sub(from).clamp(1, 100)).unwrap_or(LOAD_PAGE_TURNS)
                }
                _ => LOAD_PAGE_TURNS,
            };
            let (turns, older) = self.turns_back(&pk, walk, page_turns, now, &mut more).await?;
            remain = older;
            turns
        };
        if meta.version > 0 && turns.first().map(|turn| turn.number) != Some(meta.version) {
            return Err(StoreError::Corrupt(format!("session {pk}: turn {} is missing", meta.version)));
        }
        let history_offset = match turns.last() {
            None => 0,
            Some(oldest) if oldest.number == 1 => 0,
            Some(oldest) => oldest.offset.unwrap_or_else(|| {
                tracing::warn!(pk, turn = oldest.number, "a turn without message_offset; counting from it");
                0
            }),
        };
        if remain && history_offset > boundary.unwrap_or(0) {
            tracing::warn!(pk, history_offset, boundary, "the unsummarised history exceeds the load bounds");
        }
        let mut start = history_offset;
        for (turn, messages) in self.messages_of(user, session, &turns).await? {
            loaded.turn_starts.push((turn, start));
            start += messages.len();
            loaded.history.extend(messages);
        }
        loaded.history_offset = history_offset;
        Ok(Some(loaded))
    }

    pub(super) async fn page(
        &self,
        user: &UserId,
        session: &SessionId,
        before: Option<u64>,
        max_turns: usize,
        max_bytes: usize,
    ) -> Result<Option<(Session, HistoryPage)>, StoreError> {
        let now = unix_now();
        let Some(meta) = self.meta(user, session, now).await? else { return Ok(None) };
        let newest = before.map_or(meta.version, |before| before.saturating_sub(1).min(meta.version));
        let pk = partition_key(user, session);
        let page_turns = i32::try_from(max_turns.clamp(1, 100)).unwrap_or(100);
        let mut within = |count: usize, bytes: usize, _: &RawTurn| count < max_turns && bytes < max_bytes;
        let (turns, more) = self.turns_back(&pk, Walk::new(newest), page_turns, now, &mut within).await?;
        let next_before = if more { turns.last().map(|turn| turn.number) } else { None };
        let skill_versions = turns
            .iter()
            .filter_map(|turn| match turn.item.get("skill_versions") {
                Some(AttributeValue::S(json)) => Some((turn.number, serde_json::from_str(json).ok()?)),
                _ => None,
            })
            .collect();
        let mut turns = self.messages_of(user, session, &turns).await?;
        turns.reverse();
        Ok(Some((Self::session_of(user, session, &meta)?, HistoryPage { turns, skill_versions, next_before })))
    }
}
