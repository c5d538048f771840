//! Reading a session's full and compacted histories.

use sqlx::types::Json;

use super::{Store, StoreError, with_db};
use crate::config::HistoryType;
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
        let sql = match kind {
            HistoryType::Full => {
                "SELECT message FROM history WHERE tenant_id = $1 AND session_id = $2 \
                 ORDER BY position"
            }
            // The overlay compaction wrote, then the full history past what it covers.
            HistoryType::Compacted => {
                "SELECT message FROM ( \
                   SELECT 0 AS part, position, message FROM compacted_history \
                   WHERE tenant_id = $1 AND session_id = $2 \
                   UNION ALL \
                   SELECT 1 AS part, h.position, h.message FROM history h \
                   JOIN sessions s ON s.id = h.session_id \
                   WHERE h.tenant_id = $1 AND h.session_id = $2 \
                   AND h.position > COALESCE(s.compacted_through, -1) \
                 ) AS compacted ORDER BY part, position"
            }
        };
        let rows: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(tenant)
                .bind(session)
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
                "SELECT message FROM history WHERE tenant_id = $1 AND session_id = $2 \
                 ORDER BY position DESC LIMIT $3",
            )
            .bind(tenant)
            .bind(session)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().rev().map(|Json(m)| m).collect())
    }
}
