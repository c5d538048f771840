//! Reading a session's full and compacted histories.

use chrono::{DateTime, Utc};

use sqlx::types::Json;

use super::Stamp;

#[cfg(test)]
use super::with_writer;
use super::{Backend, Store, StoreError, with_db};
use crate::model::HistoryType;
use crate::model::{HistoryMessage, SessionId, TenantId, TurnId};

/// A history message's stored bytes, as each backend sums them over a session: on SQLite
/// the expression its index by session holds (V34), so that the sum reads the index
/// alone (SQLite reads the generated `bytes` column from the table even where an index
/// holds it); on PostgreSQL the `bytes` column.
macro_rules! stored_bytes {
    (Sqlite, $alias:literal) => {
        concat!("length(CAST(", $alias, ".message AS BLOB))")
    };
    (Postgres, $alias:literal) => {
        concat!($alias, ".bytes")
    };
}

/// The number of messages of a session's full history and their stored bytes.
macro_rules! history_size {
    ($backend:ident) => {
        concat!(
            "SELECT COUNT(*), CAST(COALESCE(SUM(",
            stored_bytes!($backend, "h"),
            "), 0) AS BIGINT) \
             FROM history h JOIN sessions s ON s.id = h.session_id \
             WHERE s.tenant_id = $1 AND h.session_id = $2"
        )
    };
}
const HISTORY_SIZE_SQLITE: &str = history_size!(Sqlite);
const HISTORY_SIZE_PG: &str = history_size!(Postgres);

/// [`Store::list_history_tail`] with the backend's reading of a message's role: the last
/// user message is found from the end, so only the end's messages are read.
macro_rules! history_tail {
    ($backend:ident, $role:literal) => {
        concat!(
            "WITH t AS (SELECT CAST(COALESCE((SELECT u.position FROM history u \
             WHERE u.session_id = $2 AND ",
            $role,
            " = 'user' ORDER BY u.position DESC LIMIT 1), 0) AS BIGINT) AS start), \
             z AS (SELECT CAST(COALESCE(SUM(",
            stored_bytes!($backend, "c"),
            "), 0) AS BIGINT) AS b FROM history c \
             WHERE c.session_id = $2 AND c.position < (SELECT start FROM t)) \
             SELECT s.compacted_through, t.start, z.b, h.message \
             FROM sessions s CROSS JOIN t CROSS JOIN z \
             LEFT JOIN history h ON h.session_id = s.id AND h.position >= t.start \
             WHERE s.tenant_id = $1 AND s.id = $2 ORDER BY h.position"
        )
    };
}
const HISTORY_TAIL_SQLITE: &str = history_tail!(Sqlite, "json_extract(u.message, '$.role')");
const HISTORY_TAIL_PG: &str = history_tail!(Postgres, "u.message->>'role'");

/// The end of a session's full history (see [`Store::list_history_tail`]).
#[derive(Debug)]
pub struct HistoryTail {
    /// The position the compacted overlay stands for (`None`: no overlay).
    pub compacted_through: Option<i64>,
    /// The position of the first message of `messages` (the whole history's length is
    /// `from` + their number).
    pub from: u64,
    /// The stored bytes of the messages before `from`.
    pub bytes_before: u64,
    /// The messages from `from` on, in order.
    pub messages: Vec<HistoryMessage>,
}

impl Store {
    /// The session's history of the given type, in order. An existing session with no
    /// messages gives an empty list; callers check the session exists first.
    pub async fn list_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        kind: HistoryType,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        match kind {
            HistoryType::Full => {
                let rows: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
                    sqlx::query_scalar(
                        "SELECT h.message FROM history h JOIN sessions s ON s.id = h.session_id \
                         WHERE s.tenant_id = $1 AND h.session_id = $2 ORDER BY h.position",
                    )
                    .bind(tenant)
                    .bind(session)
                    .fetch_all(pool)
                    .await
                })?;
                Ok(rows.into_iter().map(|Json(m)| m).collect())
            }
            HistoryType::Compacted => self.list_compacted_history(tenant, session).await,
        }
    }

    /// Whether the session's full history holds a tool call (or a tool message) with this
    /// id.
    pub async fn has_tool_call(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        id: &str,
    ) -> Result<bool, StoreError> {
        let found: Option<i64> = match &self.db {
            super::Db::Sqlite(pools) => {
                sqlx::query_scalar(
                    "SELECT h.position FROM history h JOIN sessions s ON s.id = h.session_id \
                     WHERE s.tenant_id = $1 AND h.session_id = $2 \
                     AND (json_extract(h.message, '$.toolCallId') = $3 OR EXISTS ( \
                       SELECT 1 FROM json_each(h.message, '$.content') c WHERE c.type = 'object' \
                       AND json_extract(h.message, c.fullkey || '.toolCallId') = $3)) LIMIT 1",
                )
                .bind(tenant)
                .bind(session)
                .bind(id)
                .fetch_optional(&pools.read)
                .await?
            }
            super::Db::Postgres(pool) => {
                sqlx::query_scalar(
                    "SELECT h.position FROM history h JOIN sessions s ON s.id = h.session_id \
                     WHERE s.tenant_id = $1 AND h.session_id = $2 \
                     AND (h.message ->> 'toolCallId' = $3 OR h.message @> jsonb_build_object( \
                       'content', jsonb_build_array(jsonb_build_object('toolCallId', $3::text)))) \
                     LIMIT 1",
                )
                .bind(tenant)
                .bind(session)
                .bind(id)
                .fetch_optional(pool)
                .await?
            }
        };
        Ok(found.is_some())
    }

    /// The full history's messages from `position` on, in order, with the position the
    /// compacted overlay stands for (`None`: no overlay). `NotFound` for an unknown session.
    pub async fn list_history_since(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        position: i64,
    ) -> Result<(Option<i64>, Vec<HistoryMessage>), StoreError> {
        let rows: Vec<(Option<Json<HistoryMessage>>, Option<i64>)> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT h.message, s.compacted_through FROM sessions s \
                 LEFT JOIN history h ON h.session_id = s.id AND h.position >= $3 \
                 WHERE s.tenant_id = $1 AND s.id = $2 ORDER BY h.position",
            )
            .bind(tenant)
            .bind(session)
            .bind(position)
            .fetch_all(pool)
            .await
        })?;
        let through = rows.first().ok_or(StoreError::NotFound)?.1;
        let messages = rows
            .into_iter()
            .filter_map(|(message, _)| message.map(|Json(m)| m))
            .collect();
        Ok((through, messages))
    }

    /// The end of the full history from its last user message on (all of it when it holds
    /// none), with its position and the stored bytes of what comes before it: a reader that
    /// needs only the end reads neither the rest's messages nor its rows' overflow pages.
    /// `NotFound` for an unknown session.
    pub async fn list_history_tail(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<HistoryTail, StoreError> {
        let sql = match self.backend() {
            Backend::Sqlite => HISTORY_TAIL_SQLITE,
            Backend::Postgres => HISTORY_TAIL_PG,
        };
        type Row = (Option<i64>, i64, i64, Option<Json<HistoryMessage>>);
        let rows: Vec<Row> = with_db!(self, |pool| {
            sqlx::query_as(sql)
                .bind(tenant)
                .bind(session)
                .fetch_all(pool)
                .await
        })?;
        let &(compacted_through, from, bytes_before, _) =
            rows.first().ok_or(StoreError::NotFound)?;
        let messages = rows
            .into_iter()
            .filter_map(|(.., message)| message.map(|Json(m)| m))
            .collect();
        Ok(HistoryTail {
            compacted_through,
            from: from.max(0) as u64,
            bytes_before: bytes_before.max(0) as u64,
            messages,
        })
    }

    /// Overwrites a stored message with JSON that is no message: a test reading it fails.
    #[cfg(test)]
    pub(crate) async fn garble_history_message(&self, session: &SessionId, position: i64) {
        let cast = match self.backend() {
            Backend::Sqlite => "",
            Backend::Postgres => "::jsonb",
        };
        let sql = format!(
            "UPDATE history SET message = '{{\"role\":\"garbled\"}}'{cast} \
             WHERE session_id = $1 AND position = $2"
        );
        let updated = with_writer!(self, |pool| {
            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(session)
                .bind(position)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })
        .unwrap();
        assert_eq!(updated, 1);
    }

    /// The compacted overlay alone (empty when the session has none).
    pub async fn list_compaction_overlay(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        let rows: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT c.message FROM compacted_history c JOIN sessions s ON s.id = c.session_id \
                 WHERE s.tenant_id = $1 AND c.session_id = $2 ORDER BY c.position",
            )
            .bind(tenant)
            .bind(session)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|Json(m)| m).collect())
    }

    /// The whole compacted history: the full history after the overlay, read in key order
    /// (no sort), and the overlay before it only when the session has one.
    async fn list_compacted_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        let rows: Vec<(Option<Json<HistoryMessage>>, Option<i64>)> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT h.message, s.compacted_through FROM sessions s \
                 LEFT JOIN history h ON h.session_id = s.id \
                 AND h.position > COALESCE(s.compacted_through, -1) \
                 WHERE s.tenant_id = $1 AND s.id = $2 ORDER BY h.position",
            )
            .bind(tenant)
            .bind(session)
            .fetch_all(pool)
            .await
        })?;
        let compacted = rows.first().is_some_and(|(_, through)| through.is_some());
        let tail = rows
            .into_iter()
            .filter_map(|(message, _)| message.map(|Json(m)| m));
        if !compacted {
            return Ok(tail.collect());
        }
        let mut messages = self.list_compaction_overlay(tenant, session).await?;
        messages.extend(tail);
        Ok(messages)
    }

    /// Up to `limit` messages of the session's history of the given type from the
    /// `offset`-th on, in order, with whether more follow.
    pub async fn list_history_page(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        kind: HistoryType,
        offset: i64,
        limit: i64,
    ) -> Result<(Vec<HistoryMessage>, bool), StoreError> {
        self.list_history_page_within(tenant, session, kind, offset, limit, u64::MAX)
            .await
    }

    /// [`Store::list_history_page`] cut by bytes too: the page holds the messages from the
    /// `offset`-th on whose stored sizes add up to at most `max_bytes` (the first one
    /// whatever its size), at most `limit` of them. The sizes are read first, without the
    /// messages, so a request holds its page in memory, never the session.
    pub async fn list_history_page_within(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        kind: HistoryType,
        offset: i64,
        limit: i64,
        max_bytes: u64,
    ) -> Result<(Vec<HistoryMessage>, bool), StoreError> {
        let (sizes_sql, messages_sql) = match kind {
            // Positions are 0, 1, 2, …: the offset is a position.
            HistoryType::Full => (
                "SELECT h.bytes FROM history h JOIN sessions s ON s.id = h.session_id \
                 WHERE s.tenant_id = $1 AND h.session_id = $2 \
                 AND h.position >= $3 ORDER BY h.position LIMIT $4",
                "SELECT h.message FROM history h JOIN sessions s ON s.id = h.session_id \
                 WHERE s.tenant_id = $1 AND h.session_id = $2 \
                 AND h.position >= $3 ORDER BY h.position LIMIT $4",
            ),
            HistoryType::Compacted => (
                "SELECT bytes FROM ( \
                   SELECT 0 AS part, c.position, c.bytes FROM compacted_history c \
                   JOIN sessions s ON s.id = c.session_id \
                   WHERE s.tenant_id = $1 AND c.session_id = $2 \
                   UNION ALL \
                   SELECT 1 AS part, h.position, h.bytes FROM history h \
                   JOIN sessions s ON s.id = h.session_id \
                   WHERE s.tenant_id = $1 AND h.session_id = $2 \
                   AND h.position > COALESCE(s.compacted_through, -1) \
                 ) AS compacted ORDER BY part, position LIMIT $4 OFFSET $3",
                "SELECT message FROM ( \
                   SELECT 0 AS part, c.position, c.message FROM compacted_history c \
                   JOIN sessions s ON s.id = c.session_id \
                   WHERE s.tenant_id = $1 AND c.session_id = $2 \
                   UNION ALL \
                   SELECT 1 AS part, h.position, h.message FROM history h \
                   JOIN sessions s ON s.id = h.session_id \
                   WHERE s.tenant_id = $1 AND h.session_id = $2 \
                   AND h.position > COALESCE(s.compacted_through, -1) \
                 ) AS compacted ORDER BY part, position LIMIT $4 OFFSET $3",
            ),
        };
        let sizes: Vec<i64> = with_db!(self, |pool| {
            sqlx::query_scalar(sizes_sql)
                .bind(tenant)
                .bind(session)
                .bind(offset)
                .bind(limit.saturating_add(1))
                .fetch_all(pool)
                .await
        })?;
        let mut taken = 0usize;
        let mut bytes = 0u64;
        for size in sizes
            .iter()
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
        {
            let size = (*size).max(0) as u64;
            if taken > 0 && bytes.saturating_add(size) > max_bytes {
                break;
            }
            bytes = bytes.saturating_add(size);
            taken += 1;
        }
        let more = sizes.len() > taken;
        if taken == 0 {
            return Ok((Vec::new(), more));
        }
        let rows: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
            sqlx::query_scalar(messages_sql)
                .bind(tenant)
                .bind(session)
                .bind(offset)
                .bind(taken as i64)
                .fetch_all(pool)
                .await
        })?;
        Ok((rows.into_iter().map(|Json(m)| m).collect(), more))
    }

    /// How many messages the session's full history holds and their stored bytes.
    pub async fn history_size(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<(u64, u64), StoreError> {
        let sql = match self.backend() {
            Backend::Sqlite => HISTORY_SIZE_SQLITE,
            Backend::Postgres => HISTORY_SIZE_PG,
        };
        let (count, bytes): (i64, i64) = with_db!(self, |pool| {
            sqlx::query_as(sql)
                .bind(tenant)
                .bind(session)
                .fetch_one(pool)
                .await
        })?;
        Ok((count.max(0) as u64, bytes.max(0) as u64))
    }

    /// The last `limit` messages of the session's full history, in order.
    pub async fn list_recent_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        limit: i64,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        let rows: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT h.message FROM history h JOIN sessions s ON s.id = h.session_id \
                 WHERE s.tenant_id = $1 AND h.session_id = $2 \
                 ORDER BY h.position DESC LIMIT $3",
            )
            .bind(tenant)
            .bind(session)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().rev().map(|Json(m)| m).collect())
    }

    /// One full-history message and when it was stored; `None` past the end.
    pub async fn get_history_entry(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        position: i64,
    ) -> Result<Option<(HistoryMessage, DateTime<Utc>)>, StoreError> {
        let row: Option<(Json<HistoryMessage>, Stamp)> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT h.message, h.created_at FROM history h \
                 JOIN sessions s ON s.id = h.session_id \
                 WHERE s.tenant_id = $1 AND h.session_id = $2 AND h.position = $3",
            )
            .bind(tenant)
            .bind(session)
            .bind(position)
            .fetch_optional(pool)
            .await
        })?;
        Ok(row.map(|(Json(message), at)| (message, at.0)))
    }
}

impl Store {
    /// The full-history messages one turn recorded (what it brought and what it wrote), in
    /// order.
    pub async fn list_turn_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn: &TurnId,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        let rows: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT h.message FROM history h JOIN sessions s ON s.id = h.session_id \
                 WHERE s.tenant_id = $1 AND h.session_id = $2 AND h.turn_id = $3 \
                 ORDER BY h.position",
            )
            .bind(tenant)
            .bind(session)
            .bind(turn)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|Json(m)| m).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::{running_turn, sqlite_store, tenant};
    use crate::model::ProcessId;

    /// On SQLite (V34) a session's messages are stored in the order they were written,
    /// whatever their sessions; its size is summed from its index alone, never from the
    /// table; and its positions stay unique.
    #[tokio::test]
    async fn history_is_appended_summed_from_its_index_and_keeps_positions_unique() {
        let (store, _dir) = sqlite_store().await;
        let tenant = tenant(&store).await;
        let process = ProcessId::generate();
        let a = running_turn(&store, tenant, &process).await.session_id;
        let b = running_turn(&store, tenant, &process).await.session_id;
        let pools = store.sqlite_pools();
        let insert = |session: SessionId, position: i64, message: &'static str| {
            sqlx::query(
                "INSERT INTO history (session_id, position, message, created_at) \
                 VALUES ($1, $2, $3, 0)",
            )
            .bind(session)
            .bind(position)
            .bind(message)
            .execute(&pools.write)
        };
        for (session, position, message) in [
            (a, 0, r#"{"role":"user","content":"one"}"#),
            (b, 0, r#"{"role":"user","content":"two"}"#),
            (a, 1, r#"{"role":"assistant","content":"three"}"#),
            (a, 2, r#"{"role":"user","content":"four"}"#),
        ] {
            insert(session, position, message).await.unwrap();
        }
        let taken = insert(a, 1, "{}").await.unwrap_err();
        assert!(
            taken
                .to_string()
                .contains("UNIQUE constraint failed: history.session_id, history.position"),
            "{taken}"
        );

        let stored: Vec<(SessionId, i64)> =
            sqlx::query_as("SELECT session_id, position FROM history ORDER BY rowid")
                .fetch_all(&pools.read)
                .await
                .unwrap();
        assert_eq!(stored, [(a, 0), (b, 0), (a, 1), (a, 2)]);
        let before_last_user = (r#"{"role":"user","content":"one"}"#.len()
            + r#"{"role":"assistant","content":"three"}"#.len())
            as u64;
        let last_user = r#"{"role":"user","content":"four"}"#.len() as u64;
        assert_eq!(
            store.history_size(&tenant, &a).await.unwrap(),
            (3, before_last_user + last_user)
        );
        let tail = store.list_history_tail(&tenant, &a).await.unwrap();
        assert_eq!(
            (tail.from, tail.bytes_before, tail.messages.len()),
            (2, before_last_user, 1)
        );

        for sql in [HISTORY_SIZE_SQLITE, HISTORY_TAIL_SQLITE] {
            let plan: Vec<(i64, i64, i64, String)> =
                sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                    .bind(tenant)
                    .bind(a)
                    .fetch_all(&pools.read)
                    .await
                    .unwrap();
            let sums: Vec<&str> = plan
                .iter()
                .map(|(_, _, _, detail)| detail.as_str())
                .filter(|detail| detail.starts_with("SEARCH h ") || detail.starts_with("SEARCH c "))
                .collect();
            assert!(
                sums.iter()
                    .any(|detail| detail.contains("USING COVERING INDEX history_session")),
                "{sql}: {plan:?}"
            );
        }
        store.close().await;
    }
}
