//! Runs: a chain of turns in one session, created with its first turn and extended by a
//! resume in the transaction that records the turn. Their status is kept by the event
//! writer (see `events.rs`) and by turn admission (`turns.rs`).

use super::Stamp;
use super::{Store, StoreError, with_db};
use crate::model::{Run, RunId, RunStatus, SessionId, TenantId, TurnId};

/// How a turn being recorded belongs to a run.
#[derive(Debug, Clone, Copy, Default)]
pub enum RunLink<'a> {
    /// It belongs to none.
    #[default]
    None,
    /// It starts this new run.
    New(&'a RunId),
    /// It resumes this awaiting run with the answers it brings.
    Resume(&'a RunId),
    /// It answers this awaiting run's calls as cancelled.
    Cancel(&'a RunId),
}

impl<'a> RunLink<'a> {
    pub fn run(self) -> Option<&'a RunId> {
        match self {
            RunLink::None => None,
            RunLink::New(id) | RunLink::Resume(id) | RunLink::Cancel(id) => Some(id),
        }
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct RunRow {
    pub(super) id: RunId,
    tenant_id: TenantId,
    session_id: SessionId,
    status: String,
    cancelled_at: Option<Stamp>,
    cancel_turn_id: Option<TurnId>,
    created_at: Stamp,
    updated_at: Stamp,
}

impl RunRow {
    /// The run, with the ids of its turns (oldest first).
    pub(super) fn into_run(self, turns: Vec<TurnId>) -> Result<Run, StoreError> {
        if turns.is_empty() {
            return Err(StoreError::Corrupt(format!("run {} has no turn", self.id)));
        }
        Ok(Run {
            id: self.id,
            tenant_id: self.tenant_id,
            session_id: self.session_id,
            status: self.status.parse().map_err(StoreError::Corrupt)?,
            turns,
            cancelled_at: self.cancelled_at.map(|s| s.0),
            cancel_turn: self.cancel_turn_id,
            created_at: self.created_at.into(),
            updated_at: self.updated_at.into(),
        })
    }
}

impl Store {
    /// The run and the ids of its turns, oldest first.
    pub async fn get_run(&self, tenant: &TenantId, id: &RunId) -> Result<Run, StoreError> {
        let (row, turns): (RunRow, Vec<TurnId>) = with_db!(self, |pool| {
            let row: RunRow = sqlx::query_as(
                "SELECT id, tenant_id, session_id, status, cancelled_at, cancel_turn_id, \
                 created_at, updated_at FROM runs WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(id)
            .fetch_one(pool)
            .await?;
            let turns = sqlx::query_scalar(
                "SELECT id FROM turns WHERE tenant_id = $1 AND run_id = $2 \
                 ORDER BY created_at, id",
            )
            .bind(tenant)
            .bind(id)
            .fetch_all(pool)
            .await?;
            Ok::<_, sqlx::Error>((row, turns))
        })?;
        row.into_run(turns)
    }

    /// The run's status: one row.
    pub async fn get_run_status(
        &self,
        tenant: &TenantId,
        id: &RunId,
    ) -> Result<RunStatus, StoreError> {
        let status: String = with_db!(self, |pool| {
            sqlx::query_scalar("SELECT status FROM runs WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .fetch_one(pool)
                .await
        })?;
        status.parse().map_err(StoreError::Corrupt)
    }
}

/// Records what admitting a turn does to runs, inside the transaction that records the
/// turn: a new run first (the turn refers to it), or the resumed or cancelled run's change;
/// and a turn that answers pending calls settles the session's other awaiting runs, which
/// were answered outside them.
macro_rules! admit_run {
    ($tx:ident, $tenant:expr, $turn:expr, $run:expr, $answers_calls:expr, before_turn) => {
        if let $crate::store::RunLink::New(id) = $run {
            sqlx::query(
                "INSERT INTO runs (id, tenant_id, session_id, status, created_at, updated_at) \
                 VALUES ($1, $2, $3, 'created', $4, $4)",
            )
            .bind(id)
            .bind($tenant)
            .bind(&$turn.session_id)
            .bind($crate::store::Stamp($turn.created_at))
            .execute(&mut *$tx)
            .await?;
        }
    };
    ($tx:ident, $tenant:expr, $turn:expr, $run:expr, $answers_calls:expr, after_turn) => {
        let changed = match $run {
            $crate::store::RunLink::Resume(id) => Some(
                sqlx::query(
                    "UPDATE runs SET status = 'running', updated_at = $4 \
                     WHERE tenant_id = $1 AND session_id = $2 AND id = $3 \
                     AND status = 'awaiting'",
                )
                .bind($tenant)
                .bind(&$turn.session_id)
                .bind(id)
                .bind($crate::store::Stamp($turn.created_at))
                .execute(&mut *$tx)
                .await?
                .rows_affected(),
            ),
            $crate::store::RunLink::Cancel(id) => Some(
                sqlx::query(
                    "UPDATE runs SET cancelled_at = $4, cancel_turn_id = $5, updated_at = $4 \
                     WHERE tenant_id = $1 AND session_id = $2 AND id = $3 \
                     AND status = 'awaiting' AND cancelled_at IS NULL",
                )
                .bind($tenant)
                .bind(&$turn.session_id)
                .bind(id)
                .bind($crate::store::Stamp($turn.created_at))
                .bind(&$turn.id)
                .execute(&mut *$tx)
                .await?
                .rows_affected(),
            ),
            _ => None,
        };
        if changed == Some(0) {
            return Err($crate::store::StoreError::RunNotAwaiting);
        }
        if $answers_calls {
            sqlx::query(
                "UPDATE runs SET status = 'completed', updated_at = $4 \
                 WHERE tenant_id = $1 AND session_id = $2 AND status = 'awaiting' \
                 AND ($3 IS NULL OR id <> $3)",
            )
            .bind($tenant)
            .bind(&$turn.session_id)
            .bind($run.run().copied())
            .bind($crate::store::Stamp($turn.created_at))
            .execute(&mut *$tx)
            .await?;
        }
    };
}
pub(super) use admit_run;

/// The run status changes a turn's start and stop imply, inside the writer's transaction.
macro_rules! update_run_status {
    ($tx:ident, $tenant:expr, $run:expr, started, $at:expr) => {
        sqlx::query(
            "UPDATE runs SET status = 'running', updated_at = $3 \
             WHERE tenant_id = $1 AND id = $2 AND status = 'created'",
        )
        .bind($tenant)
        .bind($run)
        .bind($crate::store::Stamp($at))
        .execute(&mut *$tx)
        .await?;
    };
    ($tx:ident, $tenant:expr, $run:expr, stopped, $at:expr, $status:expr) => {
        sqlx::query(
            "UPDATE runs SET status = $4, updated_at = $3 \
             WHERE tenant_id = $1 AND id = $2 AND status IN ('created', 'running', 'awaiting')",
        )
        .bind($tenant)
        .bind($run)
        .bind($crate::store::Stamp($at))
        .bind($status)
        .execute(&mut *$tx)
        .await?;
    };
}
pub(super) use update_run_status;
