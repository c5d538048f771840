//! The compacted history's storage: an overlay that stands for the full history up to a
//! position, followed by the full history after it.

use sqlx::types::Json;

use super::Stamp;
use super::{Store, StoreError, with_db, with_writer};
use crate::model::{HistoryMessage, SessionId, TenantId, scrub_nul};

/// The compacted history in its parts.
#[derive(Debug, Clone, Default)]
pub struct CompactedView {
    pub overlay: Vec<HistoryMessage>,
    /// Full-history messages after the overlay, with their positions.
    pub tail: Vec<(i64, HistoryMessage)>,
}

impl Store {
    pub async fn get_compacted_view(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<CompactedView, StoreError> {
        let overlay: Vec<Json<HistoryMessage>> = with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT c.message FROM compacted_history c JOIN sessions s ON s.id = c.session_id \
                 WHERE s.tenant_id = $1 AND c.session_id = $2 ORDER BY c.position",
            )
            .bind(tenant)
            .bind(session)
            .fetch_all(pool)
            .await
        })?;
        let tail: Vec<(i64, Json<HistoryMessage>)> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT h.position, h.message FROM history h JOIN sessions s ON s.id = h.session_id \
                 WHERE s.tenant_id = $1 AND h.session_id = $2 \
                 AND h.position > COALESCE(s.compacted_through, -1) ORDER BY h.position",
            )
            .bind(tenant)
            .bind(session)
            .fetch_all(pool)
            .await
        })?;
        Ok(CompactedView {
            overlay: overlay.into_iter().map(|Json(m)| m).collect(),
            tail: tail.into_iter().map(|(p, Json(m))| (p, m)).collect(),
        })
    }

    /// Replaces the overlay: it now stands for the full history up to `through`.
    pub async fn replace_compaction(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        overlay: &[HistoryMessage],
        through: i64,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "DELETE FROM compacted_history WHERE session_id = $2 \
                 AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = $2 AND s.tenant_id = $1)",
            )
            .bind(tenant)
            .bind(session)
            .execute(&mut *tx)
            .await?;
            for (position, message) in overlay.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO compacted_history (session_id, position, message, created_at) \
                     SELECT $2, $3, $4, $5 FROM sessions WHERE id = $2 AND tenant_id = $1",
                )
                .bind(tenant)
                .bind(session)
                .bind(position as i64)
                .bind(Json(scrub_nul(message.clone())))
                .bind(Stamp(crate::model::now()))
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query(
                "UPDATE sessions SET compacted_through = $3 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(session)
            .bind(through)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })?;
        Ok(())
    }

    /// Provider-reported input tokens per estimated token for the session, once known.
    pub async fn get_token_ratio(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Option<f64>, StoreError> {
        let ratio: Option<Option<f64>> = with_db!(self, |pool| {
            sqlx::query_scalar("SELECT token_ratio FROM sessions WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(session)
                .fetch_optional(pool)
                .await
        })?;
        Ok(ratio.flatten())
    }

    pub async fn update_token_ratio(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        ratio: f64,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query("UPDATE sessions SET token_ratio = $3 WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(session)
                .bind(ratio)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }
}
