//! A turn's task on this process: it waits for its slots (its tenant's, then this process's,
//! then, with several processes, its tenant's count over all of them), runs the turn loop,
//! and always leaves the turn ended.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::FutureExt;
use tracing::Instrument;

use tokio::sync::OwnedSemaphorePermit;

use super::request::Permission;
use super::runner::Engine;
use super::scheduler::{Permits, TurnControl, acquire, concurrent_quota};
use super::{turn_log, turn_loop};
use crate::model::{Session, Turn, TurnError};
use crate::store::SlotClaim;

impl Engine {
    /// Runs a turn this process owns, its control registered, in the background: with
    /// `permits` it has its slot already, `claimed` it was started in the database already
    /// (taken from the queue, or its tenant's slot claimed by its admission).
    pub(super) fn spawn_turn(
        self: &Arc<Self>,
        turn: Turn,
        session: Session,
        permissions: Vec<Permission>,
        permits: Option<Permits>,
        claimed: bool,
        control: Arc<TurnControl>,
    ) {
        // Everything the turn's task logs names the turn.
        let span = tracing::info_span!(
            "turn",
            turn_id = %turn.id,
            session_id = %turn.session_id,
            tenant_id = %turn.tenant_id
        );
        if crate::traces::enabled() {
            // A child of the span that admitted it, wherever and whenever it runs.
            if let Some(parent) = turn.trace_parent.as_deref() {
                crate::traces::set_parent(&span, parent);
            }
            crate::traces::set_string(&span, "gen_ai.operation.name", "invoke_agent".into());
            crate::traces::set_string(&span, "gen_ai.agent.name", session.agent.clone());
            if let Some(run) = &turn.run_id {
                crate::traces::set_string(&span, "run_id", run.to_string());
            }
        }
        let engine = self.clone();
        self.tracker.spawn_on(
            async move {
                engine
                    .execute(turn, session, permissions, control, permits, claimed)
                    .await
            }
            .instrument(span),
            &self.runtime,
        );
    }

    /// One of this process's slots, if it takes turns and has one free.
    pub(super) fn free_slot(&self) -> Option<OwnedSemaphorePermit> {
        if !self.accepting.load(Ordering::Acquire) || !self.lease.is_held() {
            return None;
        }
        self.scheduler.global().try_acquire_owned().ok()
    }

    /// Waits for a slot (tenant first, then global), then runs the turn to its end.
    async fn execute(
        self: Arc<Self>,
        turn: Turn,
        session: Session,
        permissions: Vec<Permission>,
        control: Arc<TurnControl>,
        held: Option<Permits>,
        claimed: bool,
    ) {
        let tenant_limit = self
            .scheduler
            .tenant_limit(&turn.tenant_id, self.quotas.of(&turn.tenant_id));
        let waited_here = held.is_none();
        let slot = tokio::select! {
            biased;
            _ = control.token().cancelled() => Slot::Stopped,
            slot = async {
                let permits = match held {
                    Some(permits) => permits,
                    None => match acquire(tenant_limit, self.scheduler.global()).await {
                        Some(permits) => permits,
                        None => return Slot::Failed,
                    },
                };
                if claimed {
                    return Slot::Ready(permits);
                }
                match self.tenant_slot(&turn).await {
                    Some(SlotClaim::Started) => Slot::Ready(permits),
                    Some(SlotClaim::Gone) => Slot::Gone,
                    Some(SlotClaim::Full) | None => Slot::Failed,
                }
            } => slot,
        };
        if waited_here && !claimed {
            let depth = self.scheduler.release_queue_slot(&turn.tenant_id);
            self.metrics.set_turn_queue_depth(depth);
        }
        match slot {
            // Ended elsewhere (another process, or deleted with its session): nothing to do.
            Slot::Gone => {
                tracing::info!(turn_id = %turn.id, "the waiting turn ended elsewhere");
            }
            Slot::Ready(_permits) => {
                let waited = (crate::model::now() - turn.created_at).to_std();
                self.metrics.turn_queue_wait(waited.unwrap_or_default());
                let run =
                    turn_loop::run_turn(self.turn_parts(), &turn, &session, &permissions, &control);
                // A bug must not leave a turn without its end: clients wait for turn_stop.
                if std::panic::AssertUnwindSafe(run)
                    .catch_unwind()
                    .await
                    .is_err()
                {
                    tracing::error!(turn_id = %turn.id, "a turn's task panicked");
                    turn_log::stop_failed(
                        self.turn_parts(),
                        &turn,
                        Some(&session.agent),
                        TurnError::new("internal", "the turn failed inside the server"),
                    )
                    .await;
                }
            }
            Slot::Stopped => {
                turn_log::stop_unstarted(
                    self.turn_parts(),
                    &turn,
                    Some(&session.agent),
                    control.reason(),
                )
                .await
            }
            Slot::Failed => {
                let reason =
                    TurnError::new("internal", "the turn could not start: the database failed");
                turn_log::stop_unstarted(self.turn_parts(), &turn, Some(&session.agent), reason)
                    .await
            }
        }
        self.scheduler.unregister(&turn.id);
        control.ended.cancel();
        // A slot is free here: a turn waiting for any process may take it.
        if self.maybe_waiting.load(Ordering::Acquire) {
            self.dispatch_wake.notify_one();
        }
    }

    /// Waits until the turn's tenant runs fewer turns than its limit over every process
    /// (with one process, its own semaphore already says so), and starts the turn; or
    /// finds it gone. `None` if the database cannot be asked: the turn then ends as failed
    /// to start.
    async fn tenant_slot(&self, turn: &Turn) -> Option<SlotClaim> {
        let limit = concurrent_quota(self.quotas.of(&turn.tenant_id));
        let mut wait = SLOT_POLL_MIN;
        loop {
            match self
                .store
                .start_turn_within(&turn.tenant_id, &turn.id, limit)
                .await
            {
                Ok(SlotClaim::Full) => {}
                Ok(claim) => return Some(claim),
                Err(error) => {
                    tracing::error!(%error, turn_id = %turn.id, "cannot start a turn");
                    return None;
                }
            }
            // Another process's turn of this tenant must end first: its end is not
            // announced here, so ask again, less often the longer it takes.
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(SLOT_POLL_MAX);
        }
    }
}

/// How often a turn whose tenant is at its limit on other processes asks again.
const SLOT_POLL_MIN: Duration = Duration::from_millis(20);

const SLOT_POLL_MAX: Duration = Duration::from_millis(500);

/// What a turn waiting for its slot got.
enum Slot {
    Ready(Permits),
    /// Cancelled (or its tenant stopped) while it waited.
    Stopped,
    /// No longer waiting: another process ended it.
    Gone,
    /// The database failed.
    Failed,
}
