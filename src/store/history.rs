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
            HistoryType::Compacted => {
                "SELECT message FROM compacted_history WHERE tenant_id = $1 AND session_id = $2 \
                 ORDER BY position"
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

    /// The last `limit` messages of the session's history of the given type, in order.
    pub async fn list_recent_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        kind: HistoryType,
        limit: i64,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        let sql = match kind {
            HistoryType::Full => {
                "SELECT message FROM history WHERE tenant_id = $1 AND session_id = $2 \
                 ORDER BY position DESC LIMIT $3"
            }
            HistoryType::Compacted => {
                "SELECT message FROM compacted_history WHERE tenant_id = $1 AND session_id = $2 \
                 ORDER BY position DESC LIMIT $3"
            }
        };
        let rows: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(tenant)
                .bind(session)
                .bind(limit)
                .fetch_all(pool)
                .await
        })?;
        Ok(rows.into_iter().rev().map(|Json(m)| m).collect())
    }
}
