//! Stopping turns: a client's cancel, a tenant's suspension or deletion, a deleted session,
//! and the server's graceful shutdown. Each reaches the turn wherever it runs and waits for
//! its end to be durable.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;

use super::error::{EngineError, not_found};
use super::follow::Follow;
use super::runner::Engine;
use crate::model::{SessionId, TenantId, Turn, TurnError, TurnId};
use crate::store::Deltas;

impl Engine {
    /// Stops every queued and running turn of the tenant with `reason`, on whichever
    /// process runs it, and waits (up to `limit`) until their ends are durable, so their
    /// streams end with a terminal event.
    pub async fn stop_tenant_turns(&self, tenant: &TenantId, reason: TurnError, limit: Duration) {
        for control in self.scheduler.tenant_controls(tenant) {
            control.stop(reason.clone());
        }
        // Asked in the database too: an owner that misses the notification finds it there.
        let stored = serde_json::to_value(&reason).expect("a turn error serializes");
        if let Err(error) = self.store.request_stop(tenant, None, &stored).await {
            tracing::warn!(%error, tenant_id = %tenant, "cannot record a stopped tenant's turns");
        }
        let command = super::cluster::Command::StopTenant {
            tenant: *tenant,
            reason: reason.clone(),
        };
        if let Err(error) = self.broadcast(&command).await {
            tracing::warn!(%error, tenant_id = %tenant, "cannot tell the other processes to stop a tenant's turns");
        }
        let unfinished = match self.store.list_unfinished_turns(tenant).await {
            Ok(turns) => turns,
            Err(error) => {
                tracing::warn!(%error, tenant_id = %tenant, "cannot list a stopped tenant's turns");
                return;
            }
        };
        // Those waiting for any process: this one takes them to end them.
        for turn in &unfinished {
            if let Err(error) = self.end_unclaimed(turn, reason.clone()).await {
                tracing::warn!(%error, turn_id = %turn.id, "cannot end a waiting turn");
            }
        }
        let ended = futures_util::future::join_all(
            unfinished
                .iter()
                .map(|turn| self.wait_for_end(tenant, &turn.session_id, &turn.id, limit)),
        );
        if tokio::time::timeout(limit, ended).await.is_err() {
            tracing::warn!(tenant_id = %tenant, "turns of a stopped tenant did not end in time");
        }
    }

    /// Stops a queued or running turn and waits (briefly) for its end. Stopping a turn
    /// that already ended changes nothing.
    pub async fn cancel_turn(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn_id: &TurnId,
    ) -> Result<Turn, EngineError> {
        let turn = self
            .store
            .get_turn(tenant, session, turn_id)
            .await
            .map_err(|e| not_found(e, "turn"))?;
        if turn.status.is_terminal() {
            return Ok(turn);
        }
        let reason = TurnError::new(TurnError::CANCELLED, "the turn was cancelled by the client");
        match self.scheduler.control(turn_id) {
            Some(control) => control.stop(reason),
            // Waiting for any process: this one takes it to end it.
            None if self.end_unclaimed(&turn, reason.clone()).await? => {}
            // Another process runs it (or ran it: then the command finds nothing to stop).
            None => {
                let stored = serde_json::to_value(&reason).expect("a turn error serializes");
                self.store
                    .request_stop(tenant, Some(turn_id), &stored)
                    .await?;
                let command = super::cluster::Command::StopTurn {
                    turn: *turn_id,
                    reason,
                };
                self.broadcast(&command).await?;
            }
        }
        self.wait_for_end(tenant, session, turn_id, Duration::from_secs(10))
            .await
    }

    /// Follows the turn until its `turn_stop` (or the timeout), then reads it.
    async fn wait_for_end(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn_id: &TurnId,
        limit: Duration,
    ) -> Result<Turn, EngineError> {
        let events = self.follow(Follow {
            tenant: *tenant,
            session: *session,
            turn: Some(*turn_id),
            after: 0,
            deltas: Deltas::Merged,
        });
        let drained = events.for_each(|_| async {});
        let _ = tokio::time::timeout(limit, drained).await;
        Ok(self.store.get_turn(tenant, session, turn_id).await?)
    }

    /// Deletes a session, stopping its active turn first.
    pub async fn delete_session(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<(), EngineError> {
        if let Some(active) = self.store.get_active_turn(tenant, session).await? {
            self.cancel_turn(tenant, session, &active.id).await?;
        }
        self.store
            .delete_session(tenant, session)
            .await
            .map_err(|e| not_found(e, "session"))?;
        self.histories.forget(session);
        self.fanout.close(session);
        let command = super::cluster::Command::CloseSession { session: *session };
        if let Err(error) = self.broadcast(&command).await {
            tracing::warn!(%error, session_id = %session, "cannot end a deleted session's streams on the other processes");
        }
        Ok(())
    }

    /// Graceful shutdown: refuse new turns, let running ones finish within `grace`,
    /// interrupt the rest, commit every event, then end live streams.
    pub async fn shutdown(&self, grace: Duration) {
        self.accepting.store(false, Ordering::Release);
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            let controls = self.scheduler.all_controls();
            tracing::warn!(
                turns = controls.len(),
                "grace period over: interrupting turns"
            );
            for control in controls {
                control.stop(TurnError::new(
                    TurnError::INTERRUPTED,
                    "the server shut down before the turn finished",
                ));
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), self.tracker.wait()).await;
        }
        self.writer.flush().await;
        self.leave().await;
        self.shutdown.cancel();
    }

    /// Resolves when the server stops.
    pub(super) async fn stopped(&self) {
        self.shutdown.cancelled().await
    }

    pub fn is_accepting(&self) -> bool {
        self.accepting.load(Ordering::Acquire)
    }
}
