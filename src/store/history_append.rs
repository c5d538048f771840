//! Messages added to a session's full history between its turns (by no turn).

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::Conflict;
use super::{Stamp, Store, StoreError, with_writer};
use crate::model::{HistoryMessage, SessionId, TenantId, scrub_nul};

const LOCK_SQLITE: &str = "SELECT id FROM sessions WHERE tenant_id = $1 AND id = $2";
const LOCK_PG: &str = "SELECT id FROM sessions WHERE tenant_id = $1 AND id = $2 FOR UPDATE";
const ACTIVE_TURN: &str = "SELECT COUNT(*) FROM turns \
     WHERE tenant_id = $1 AND session_id = $2 AND status IN ('queued', 'running')";
const LENGTH: &str = "SELECT COALESCE(MAX(position) + 1, 0) FROM history WHERE session_id = $1";
const INSERT: &str = "INSERT INTO history (session_id, position, message, created_at) \
     VALUES ($1, $2, $3, $4)";

impl Store {
    /// Appends `messages` to the tenant's session's full history, by no turn, in one
    /// transaction, if the history still holds `expected_len` messages (what the caller
    /// checked them against). `NotFound` for another tenant's or an unknown session;
    /// `Conflict(ActiveTurn)` while the session has a queued or running turn;
    /// `Stale` when the history moved. The session row is locked first (PostgreSQL), so a
    /// turn admitted meanwhile waits for this commit and then reads these messages.
    pub async fn append_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        expected_len: i64,
        messages: &[HistoryMessage],
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let lock = match &self.db {
            super::Db::Sqlite(_) => LOCK_SQLITE,
            super::Db::Postgres(_) => LOCK_PG,
        };
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let found: Option<SessionId> = sqlx::query_scalar(lock)
                .bind(tenant)
                .bind(session)
                .fetch_optional(&mut *tx)
                .await?;
            if found.is_none() {
                return Err(StoreError::NotFound);
            }
            let active: i64 = sqlx::query_scalar(ACTIVE_TURN)
                .bind(tenant)
                .bind(session)
                .fetch_one(&mut *tx)
                .await?;
            if active > 0 {
                return Err(StoreError::Conflict(Conflict::ActiveTurn));
            }
            let length: i64 = sqlx::query_scalar(LENGTH)
                .bind(session)
                .fetch_one(&mut *tx)
                .await?;
            if length != expected_len {
                return Err(StoreError::Stale);
            }
            for (i, message) in messages.iter().enumerate() {
                sqlx::query(INSERT)
                    .bind(session)
                    .bind(length + i as i64)
                    .bind(Json(scrub_nul(message.clone())))
                    .bind(Stamp(at))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }
}
