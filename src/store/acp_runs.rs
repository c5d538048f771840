//! ACP runs: a chain of engine turns in one session, known by the first turn's id.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::turns::APPEND_HISTORY;
use super::{Store, StoreError, with_db, with_writer};
use crate::model::{HistoryMessage, SessionId, TenantId, TurnId};

/// A run and its turns, oldest first (the first turn's id is the run's).
#[derive(Debug, Clone, PartialEq)]
pub struct AcpRun {
    pub id: TurnId,
    pub tenant_id: TenantId,
    pub session_id: SessionId,
    pub turns: Vec<TurnId>,
    /// When a client cancelled the run while it awaited answers.
    pub cancelled_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl AcpRun {
    pub fn last_turn(&self) -> &TurnId {
        self.turns.last().unwrap_or(&self.id)
    }
}

#[derive(sqlx::FromRow)]
struct RunRow {
    id: TurnId,
    tenant_id: TenantId,
    session_id: SessionId,
    cancelled_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

impl Store {
    /// Records a run started by `run.id`, its first turn.
    pub async fn insert_acp_run(&self, tenant: &TenantId, run: &AcpRun) -> Result<(), StoreError> {
        let result = with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "INSERT INTO acp_runs (id, tenant_id, session_id, created_at) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(&run.id)
            .bind(tenant)
            .bind(&run.session_id)
            .bind(run.created_at)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO acp_run_turns (tenant_id, run_id, position, turn_id) \
                 VALUES ($1, $2, 0, $2)",
            )
            .bind(tenant)
            .bind(&run.id)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        });
        result.map_err(StoreError::from)
    }

    /// Appends a turn (a resume) to the run.
    pub async fn insert_acp_run_turn(
        &self,
        tenant: &TenantId,
        run: &TurnId,
        turn: &TurnId,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO acp_run_turns (tenant_id, run_id, position, turn_id) \
                 SELECT $1, $2, COALESCE(MAX(position) + 1, 0), $3 FROM acp_run_turns \
                 WHERE tenant_id = $1 AND run_id = $2",
            )
            .bind(tenant)
            .bind(run)
            .bind(turn)
            .execute(pool)
            .await
            .map(|_| ())
        })?;
        Ok(())
    }

    pub async fn get_acp_run(&self, tenant: &TenantId, id: &TurnId) -> Result<AcpRun, StoreError> {
        let (row, turns): (RunRow, Vec<TurnId>) = with_db!(self, |pool| {
            let row: RunRow = sqlx::query_as(
                "SELECT id, tenant_id, session_id, cancelled_at, created_at FROM acp_runs \
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(id)
            .fetch_one(pool)
            .await?;
            let turns = sqlx::query_scalar(
                "SELECT turn_id FROM acp_run_turns WHERE tenant_id = $1 AND run_id = $2 \
                 ORDER BY position",
            )
            .bind(tenant)
            .bind(id)
            .fetch_all(pool)
            .await?;
            Ok::<_, sqlx::Error>((row, turns))
        })?;
        Ok(AcpRun {
            id: row.id,
            tenant_id: row.tenant_id,
            session_id: row.session_id,
            turns,
            cancelled_at: row.cancelled_at,
            created_at: row.created_at,
        })
    }

    /// Marks an awaiting run cancelled and records `answers` (tool messages that close
    /// the calls it awaited) in the session's history, attributed to `turn`. `false` when
    /// the run was cancelled already.
    pub async fn cancel_awaiting_acp_run(
        &self,
        tenant: &TenantId,
        run: &AcpRun,
        at: DateTime<Utc>,
        answers: &[HistoryMessage],
    ) -> Result<bool, StoreError> {
        let result = with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let updated = sqlx::query(
                "UPDATE acp_runs SET cancelled_at = $3 \
                 WHERE tenant_id = $1 AND id = $2 AND cancelled_at IS NULL",
            )
            .bind(tenant)
            .bind(&run.id)
            .bind(at)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 1 {
                for message in answers {
                    sqlx::query(APPEND_HISTORY)
                        .bind(tenant)
                        .bind(&run.session_id)
                        .bind(Json(message))
                        .bind(at)
                        .bind(run.last_turn())
                        .execute(&mut *tx)
                        .await?;
                }
            }
            tx.commit().await.map(|_| updated == 1)
        });
        result.map_err(StoreError::from)
    }
}
