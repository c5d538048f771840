//! Runs: a chain of turns answering one request of a protocol whose unit is bigger than a
//! turn. A run is created in the transaction of its first turn, a resume adds its turn in
//! the transaction that records it, and the event writer keeps the run's status with the
//! events that change it. Faces read the status (one row) and never replay the log to
//! decide what a run may do.

use std::sync::Arc;

use super::error::EngineError;
use super::follow::Follow;
use super::pager::LogPager;
use super::request::{RunPart, StartedTurn, TurnRequest};
use super::runner::Engine;
use super::turn_log;
use crate::model::{Event, Run, RunId, RunStatus, SessionId, StreamMode, TenantId, Turn, TurnId};
use crate::store::{Deltas, RunLink, StoreError};

/// What a pending call of a cancelled run is answered with.
pub const CANCELLED_CALL: &str = "Tool call cancelled: the client cancelled the run";

impl Engine {
    /// Starts a run with its first turn (see `start_turn`).
    pub async fn start_run(
        self: &Arc<Self>,
        tenant: &TenantId,
        session: &SessionId,
        request: TurnRequest,
    ) -> Result<(Run, StartedTurn), EngineError> {
        let started = self.admit(tenant, session, request, RunPart::New).await?;
        // A retry of a request whose turn started no run is not that request.
        let id = started
            .turn
            .run_id
            .ok_or(EngineError::IdempotencyMismatch)?;
        Ok((self.get_run(tenant, &id).await?, started))
    }

    /// Resumes an awaiting run with a turn that answers its pending calls.
    pub async fn resume_run(
        self: &Arc<Self>,
        tenant: &TenantId,
        id: &RunId,
        request: TurnRequest,
    ) -> Result<(Run, StartedTurn), EngineError> {
        let run = self.get_run(tenant, id).await?;
        if run.status != RunStatus::Awaiting {
            return Err(EngineError::RunNotAwaiting(run.status));
        }
        let started = self
            .admit(tenant, &run.session_id, request, RunPart::Resume(*id))
            .await?;
        Ok((self.get_run(tenant, id).await?, started))
    }

    /// The run's events as one stream: its turns' events from the log, deltas as they were
    /// streamed, each turn followed live until it stops; `started`, a turn this process
    /// just started, is followed from its live subscription instead.
    pub fn follow_run(
        &self,
        run: &Run,
        started: Option<StartedTurn>,
    ) -> impl futures_util::Stream<Item = Result<Arc<Event>, StoreError>> + use<> {
        use futures_util::StreamExt;
        use futures_util::stream::LocalBoxStream;
        let live = started.as_ref().map(|s| s.turn.id);
        let mut parts: Vec<LocalBoxStream<'static, _>> = run
            .turns
            .iter()
            .filter(|turn| Some(**turn) != live)
            .map(|turn| {
                self.follow(Follow {
                    tenant: run.tenant_id,
                    session: run.session_id,
                    turn: Some(*turn),
                    after: -1,
                    deltas: Deltas::AsStreamed,
                })
                .boxed_local()
            })
            .collect();
        if let Some(started) = started {
            parts.push(self.follow_started(started).boxed_local());
        }
        futures_util::stream::iter(parts).flatten()
    }

    /// Every stored event of the run's turns, in order, deltas as they were streamed (so a
    /// face that numbers its frames per delta replays exactly what it sent live).
    pub async fn run_events(&self, run: &Run) -> Result<Vec<Event>, EngineError> {
        let log = LogPager::of_run(
            self.store.clone(),
            run.tenant_id,
            run.session_id,
            run.id,
            Deltas::AsStreamed,
        );
        Ok(log.all_after(-1).await?)
    }

    pub async fn get_run(&self, tenant: &TenantId, id: &RunId) -> Result<Run, EngineError> {
        self.store.get_run(tenant, id).await.map_err(run_not_found)
    }

    /// The run's status: one row, never a replay.
    pub async fn run_status(
        &self,
        tenant: &TenantId,
        id: &RunId,
    ) -> Result<RunStatus, EngineError> {
        self.store
            .get_run_status(tenant, id)
            .await
            .map_err(run_not_found)
    }

    /// Cancels a run: a queued or running one is stopped; an awaiting one ends with its
    /// pending calls answered as cancelled, by a turn of the run written through the event
    /// writer, so every face and every follower of the session sees the same events. A run
    /// that ended is refused.
    pub async fn cancel_run(
        self: &Arc<Self>,
        tenant: &TenantId,
        id: &RunId,
    ) -> Result<Run, EngineError> {
        let run = self.get_run(tenant, id).await?;
        match run.status {
            RunStatus::Created | RunStatus::Running => {
                self.cancel_turn(tenant, &run.session_id, run.last_turn())
                    .await?;
            }
            RunStatus::Awaiting => self.cancel_awaiting(&run).await?,
            ended => return Err(EngineError::RunEnded(ended)),
        }
        self.get_run(tenant, id).await
    }

    async fn cancel_awaiting(&self, run: &Run) -> Result<(), EngineError> {
        let pending = self
            .pending_tool_calls(&run.tenant_id, &run.session_id)
            .await?;
        let turn = Turn {
            run_id: Some(run.id),
            trace_parent: crate::traces::current_traceparent(),
            ..Turn::queued(
                TurnId::generate(),
                run.tenant_id,
                run.session_id,
                StreamMode::Delta,
            )
        };
        let inserted = self
            .store
            .insert_turn(
                &run.tenant_id,
                &turn,
                Some(&self.process),
                None,
                None,
                &[],
                RunLink::Cancel(&run.id),
                false,
                None,
                Default::default(),
            )
            .await;
        match inserted {
            Ok(_) => {}
            Err(StoreError::RunNotAwaiting) => {
                let status = self.run_status(&run.tenant_id, &run.id).await?;
                return Err(if status.is_terminal() {
                    EngineError::RunEnded(status)
                } else {
                    EngineError::RunNotAwaiting(status)
                });
            }
            Err(StoreError::Conflict(_)) => return Err(EngineError::SessionBusy),
            Err(other) => return Err(other.into()),
        }
        // Its answers are not a turn's own: the session's history is read again.
        self.histories.forget(&turn.session_id);
        turn_log::answer_cancelled(self.turn_parts(), &turn, &pending, CANCELLED_CALL).await;
        Ok(())
    }
}

fn run_not_found(error: StoreError) -> EngineError {
    match error {
        StoreError::NotFound => EngineError::NotFound("run"),
        other => other.into(),
    }
}
