//! A user's sessions, most recently updated first, through the sparse global secondary index
//! [`SESSIONS_BY_USER_INDEX`]: partition key [`OWNER_ATTRIBUTE`] (S), sort key `updated_at` (N),
//! projecting `session_id`, `created_at`, `version`, `expires_at` and [`TITLE_ATTRIBUTE`].
//!
//! Only meta items carry [`OWNER_ATTRIBUTE`] (turn, idempotency and usage items never do), so the
//! index holds one entry per session. Sessions whose meta item was written before the attribute
//! existed are not in it: they appear after their next turn. The index is read eventually
//! consistent, so a commit may show in the listing a moment after it was made.

use agent_ports::ids::{SessionId, UserId};
use agent_ports::store::{SessionCursor, SessionList, SessionSummary, StoreError, MAX_SESSIONS_PAGE};

use super::{partition_key, unix_now, DynamoSessionStore, META_SORT_KEY};
use crate::codec::{n, s, Item, Reader};

/// The index that lists a user's sessions (declared in `template.yaml` with the table). The second
/// of its name: the first, `sessions-by-user`, did not project the title, and DynamoDB cannot change
/// an index's projection in place.
pub const SESSIONS_BY_USER_INDEX: &str = "sessions-by-user-v2";
/// A session's title on its meta item, written by its first turn (see
/// [`agent_ports::message::session_title`]).
pub const TITLE_ATTRIBUTE: &str = "title";
/// The user id on a session's meta item, and only there: the index's partition key. Not `user_id`,
/// which older meta items at `sk = "META"` carry too.
pub const OWNER_ATTRIBUTE: &str = "owner";

impl DynamoSessionStore {
    pub(super) async fn sessions_of(
        &self,
        user: &UserId,
        after: Option<&SessionCursor>,
        limit: usize,
    ) -> Result<SessionList, StoreError> {
        let limit = limit.clamp(1, MAX_SESSIONS_PAGE);
        let now = unix_now();
        // The cursor's sort values with the caller's own keys: whatever it says, the Query stays
        // in the caller's partition of the index.
        let mut start = after.map(|cursor| start_key(user, cursor));
        let mut found: Vec<SessionSummary> = Vec::new();
        let context = format!("index {SESSIONS_BY_USER_INDEX}");
        // One more than a page, so the last page is known to be the last; expired sessions not yet
        // deleted by DynamoDB are skipped, which may take another request.
        while found.len() <= limit {
            let wanted = i32::try_from(limit + 1 - found.len()).unwrap_or(i32::MAX);
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(SESSIONS_BY_USER_INDEX)
                .key_condition_expression("#owner = :owner")
                .expression_attribute_names("#owner", OWNER_ATTRIBUTE)
                .expression_attribute_values(":owner", s(user.as_str()))
                .scan_index_forward(false)
                .limit(wanted)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|err| self.backend("Query", &context, err))?;
            for item in page.items() {
                if let Some(summary) = summary_of(user, item, now)? {
                    found.push(summary);
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        let next = (found.len() > limit).then(|| SessionCursor {
            updated_at: found[limit - 1].updated_at,
            session_id: found[limit - 1].session_id.clone(),
        });
        found.truncate(limit);
        Ok(SessionList { sessions: found, next })
    }
}

/// The index key a Query goes on after: the cursor's sort values under `user`'s own keys.
fn start_key(user: &UserId, cursor: &SessionCursor) -> Item {
    Item::from([
        (OWNER_ATTRIBUTE.to_string(), s(user.as_str())),
        ("updated_at".to_string(), n(cursor.updated_at)),
        ("pk".to_string(), s(partition_key(user, &cursor.session_id))),
        ("sk".to_string(), s(META_SORT_KEY)),
    ])
}

/// One index entry as a listing shows it, or `None` when the session has expired.
fn summary_of(user: &UserId, item: &Item, now: i64) -> Result<Option<SessionSummary>, StoreError> {
    let context = format!("index {SESSIONS_BY_USER_INDEX} entry");
    let reader = Reader { item, context: &context };
    if reader.int::<i64>("expires_at")? < now {
        return Ok(None);
    }
    let session_id = SessionId::parse(reader.string("session_id")?)
        .map_err(|err| StoreError::Corrupt(format!("{context}: session_id: {err}")))?;
    // The entry must be the caller's own session's meta item, whatever wrote it.
    if reader.string("pk")? != partition_key(user, &session_id) || reader.string("sk")? != META_SORT_KEY {
        return Err(StoreError::Corrupt(format!("{context}: its keys are not its owner's session meta item")));
    }
    Ok(Some(SessionSummary {
        session_id,
        created_at: reader.int("created_at")?,
        updated_at: reader.int("updated_at")?,
        version: reader.int("version")?,
        title: reader.nullable_string(TITLE_ATTRIBUTE)?.map(str::to_owned),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_key_is_always_the_callers() {
        let user = UserId::parse("bob").unwrap();
        let cursor = SessionCursor { updated_at: 42, session_id: SessionId::parse("s-9").unwrap() };
        let key = start_key(&user, &cursor);
        assert_eq!(key[OWNER_ATTRIBUTE], s("bob"));
        assert_eq!(key["pk"], s("bob#s-9"));
        assert_eq!(key["updated_at"], n(42));
        assert_eq!(key["sk"], s(META_SORT_KEY));
    }

    #[test]
    fn an_entry_of_another_users_session_is_corrupt() {
        let user = UserId::parse("bob").unwrap();
        let item = Item::from([
            ("pk".to_string(), s("ana#s1")),
            ("sk".to_string(), s(META_SORT_KEY)),
            ("session_id".to_string(), s("s1")),
            ("created_at".to_string(), n(1)),
            ("updated_at".to_string(), n(2)),
            ("version".to_string(), n(3)),
            ("expires_at".to_string(), n(i64::MAX)),
        ]);
        assert!(matches!(summary_of(&user, &item, 0), Err(StoreError::Corrupt(_))));
        let mut own = item.clone();
        own.insert("pk".to_string(), s("bob#s1"));
        let summary = summary_of(&user, &own, 0).unwrap().expect("live");
        assert_eq!(
            (summary.session_id.as_str(), summary.created_at, summary.updated_at, summary.version, summary.title),
            ("s1", 1, 2, 3, None)
        );
        own.insert(TITLE_ATTRIBUTE.to_string(), s("Pásame el borrador"));
        assert_eq!(summary_of(&user, &own, 0).unwrap().unwrap().title.as_deref(), Some("Pásame el borrador"));
        own.insert("expires_at".to_string(), n(5));
        assert_eq!(summary_of(&user, &own, 6).unwrap(), None, "an expired session is left out");
    }
}
