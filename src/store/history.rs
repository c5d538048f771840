//! Reading a session's full and compacted histories.

use chrono::{DateTime, Utc};

use sqlx::types::Json;

use super::Stamp;

use super::{Store, StoreError, with_db};
use crate::model::HistoryType;
use crate::model::{HistoryMessage, SessionId, TenantId};

impl Store {
    /// The session's history of the given type, in order. An existing session with no
    /// messages gives an empty list; callers check the session exists first.
    pub async fn list_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        kind: HistoryType,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        self.list_history_page(tenant, session, kind, 0, i64::MAX)
            .await
    }

    /// Up to `limit` messages of the session's history of the given type from the
    /// `offset`-th on, in order.
    pub async fn list_history_page(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        kind: HistoryType,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        let sql = match kind {
            // Positions are 0, 1, 2, …: the offset is a position.
            HistoryType::Full => {
                "SELECT h.message FROM history h JOIN sessions s ON s.id = h.session_id \
                 WHERE s.tenant_id = $1 AND h.session_id = $2 \
                 AND h.position >= $3 ORDER BY h.position LIMIT $4"
            }
            HistoryType::Compacted => {
                "SELECT message FROM ( \
                   SELECT 0 AS part, c.position, c.message FROM compacted_history c \
                   JOIN sessions s ON s.id = c.session_id \
                   WHERE s.tenant_id = $1 AND c.session_id = $2 \
                   UNION ALL \
                   SELECT 1 AS part, h.position, h.message FROM history h \
                   JOIN sessions s ON s.id = h.session_id \
                   WHERE s.tenant_id = $1 AND h.session_id = $2 \
                   AND h.position > COALESCE(s.compacted_through, -1) \
                 ) AS compacted ORDER BY part, position LIMIT $4 OFFSET $3"
            }
        };
        let rows: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(tenant)
                .bind(session)
                .bind(offset)
                .bind(limit)
                .fetch_all(pool)
                .await
        })?;
        Ok(rows.into_iter().map(|Json(m)| m).collect())
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
