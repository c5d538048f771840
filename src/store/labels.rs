//! Labels: a JSON object (as text) a client attaches to one of the tenant's turns or
//! sessions and reads back with it; the store keeps them and never reads into them.

use super::{Store, StoreError, with_db, with_writer};
use crate::model::{SessionId, TenantId, TurnId};

/// What labels are attached to.
#[derive(Debug, Clone, Copy)]
pub enum Labelled {
    Turn(TurnId),
    Session(SessionId),
}

impl Labelled {
    /// What is labelled, in an error's words.
    pub fn kind(self) -> &'static str {
        match self {
            Labelled::Turn(_) => "turn",
            Labelled::Session(_) => "session",
        }
    }

    /// The statements that write and read this row's labels, and the row's id.
    fn statements(self) -> (&'static str, &'static str, uuid::Uuid) {
        match self {
            Labelled::Turn(turn) => (
                "UPDATE turns SET labels = $3 WHERE tenant_id = $1 AND id = $2",
                "SELECT labels FROM turns WHERE tenant_id = $1 AND id = $2",
                turn.to_uuid(),
            ),
            Labelled::Session(session) => (
                "UPDATE sessions SET labels = $3 WHERE tenant_id = $1 AND id = $2",
                "SELECT labels FROM sessions WHERE tenant_id = $1 AND id = $2",
                session.to_uuid(),
            ),
        }
    }
}

impl Store {
    /// Attaches `labels` to the tenant's turn or session, replacing any it had.
    pub async fn set_labels(
        &self,
        tenant: &TenantId,
        of: Labelled,
        labels: &str,
    ) -> Result<(), StoreError> {
        let (update, _, id) = of.statements();
        let done = with_writer!(self, |pool| {
            sqlx::query(update)
                .bind(tenant)
                .bind(id)
                .bind(labels)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if done == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// The labels attached to the tenant's turn or session, if any.
    pub async fn get_labels(
        &self,
        tenant: &TenantId,
        of: Labelled,
    ) -> Result<Option<String>, StoreError> {
        let (_, select, id) = of.statements();
        let row: Option<(Option<String>,)> = with_db!(self, |pool| {
            sqlx::query_as(select)
                .bind(tenant)
                .bind(id)
                .fetch_optional(pool)
                .await
        })?;
        row.ok_or(StoreError::NotFound).map(|(labels,)| labels)
    }
}
