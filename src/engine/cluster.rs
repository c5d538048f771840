//! Several processes on one database. Each process holds a lease it renews while it lives
//! and owns the turns it admits; a turn whose owner's lease expired is ended by whichever
//! living process claims it first. On PostgreSQL the processes hear each other: committed
//! events reach every process's live subscribers, and commands (stop a turn, stop a
//! tenant's turns) reach the process that runs the turn. SQLite is served by one process:
//! a start ends every turn an earlier run left.
//!
//! Longer than most files here: its background loops (the lease's renewal, the sweep of
//! dead processes' turns, the listener relaying commits and commands, the shared queue's
//! dispatch) are started together and stopped together, and share the lease and the
//! listener's state; `lease.rs` holds the lease itself.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::EngineError;
use super::request::Permission;
use super::runner::Engine;
use super::scheduler::TurnControl;
use super::turn_log;
use crate::model::{ProcessId, SessionId, TenantId, Turn, TurnError, TurnId};
use crate::store::{Backend, Notice, StoreError};

/// Events read from the log per query when another process's commit is caught up with.
/// How often a process with a free slot looks for turns waiting for any process.
const DISPATCH_TICK: Duration = Duration::from_millis(500);
/// How often the ending of turns whose end could not be stored is tried again.
const UNENDED_RETRY: Duration = Duration::from_millis(500);
/// How long to wait before listening again after the connection failed.
const RELISTEN: Duration = Duration::from_secs(1);

/// What one process asks of the others.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Command {
    /// Stop this turn, wherever it runs.
    StopTurn { turn: TurnId, reason: TurnError },
    /// Stop every turn of this tenant.
    StopTenant { tenant: TenantId, reason: TurnError },
    /// A turn waits for any process with a free slot.
    Dispatch,
    /// The session was deleted: its followers' streams end.
    CloseSession { session: SessionId },
}

impl Engine {
    /// Registers this process, then ends the turns no living process owns: on SQLite every
    /// turn an earlier run left unfinished, on PostgreSQL those of processes whose lease
    /// expired (a living process's turns go on).
    pub async fn recover(self: &Arc<Self>) -> Result<usize, EngineError> {
        let host = hostname();
        let sent = Instant::now();
        self.store
            .insert_process(&self.process, &host, self.lease())
            .await?;
        self.lease.renewed(sent);
        let alone = self.store.backend() == Backend::Sqlite;
        if !alone {
            // Renewed from now on: ending many orphans may take longer than a lease.
            tokio::spawn(self.clone().heartbeat());
            tokio::spawn(self.clone().watch_lease());
        }
        tokio::spawn(self.clone().end_unended());
        self.store.expire_processes(&self.process, alone).await?;
        self.end_orphans(alone).await
    }

    /// Ends the unfinished turns of processes that hold no lease, each by exactly one
    /// process (with `unclaimed`, queued turns no process took too). Returns how many this
    /// process ended.
    async fn end_orphans(&self, unclaimed: bool) -> Result<usize, EngineError> {
        let mut ended = 0;
        for orphan in self.store.list_orphan_turns(unclaimed).await? {
            // This process's own: its heartbeat learns it lost its lease and stops them.
            if orphan.owner == Some(self.process) {
                continue;
            }
            let turn = &orphan.turn;
            if !self
                .store
                .claim_turn(&turn.id, orphan.owner.as_ref(), Some(&self.process))
                .await?
            {
                continue;
            }
            tracing::warn!(turn_id = %turn.id, owner = ?orphan.owner, "ending a turn whose process is gone");
            let interrupted = turn_log::interrupt_orphan(self, turn).await;
            if self.settle(turn, orphan.owner.as_ref()).await {
                ended += 1;
            } else {
                interrupted?;
            }
        }
        Ok(ended)
    }

    pub(super) fn lease(&self) -> Duration {
        Duration::from_millis(self.settings.lease_ms)
    }

    /// Starts what keeps this process in the cluster beside its heartbeat (started by
    /// [`Self::recover`]): the sweep for dead processes' turns, listening to the others, and
    /// taking turns that wait for any process. Only on PostgreSQL.
    pub fn start_cluster(self: &Arc<Self>) {
        if self.store.backend() != Backend::Postgres {
            return;
        }
        tokio::spawn(self.clone().sweep());
        tokio::spawn(self.clone().listen());
        tokio::spawn(self.clone().dispatch());
    }

    /// Tells every process (this one too) that a turn waits for a free slot.
    pub(super) async fn dispatch_soon(&self) {
        self.turns_may_wait();
        if let Err(error) = self.broadcast(&Command::Dispatch).await {
            tracing::warn!(%error, "cannot tell the other processes a turn waits");
        }
    }

    fn turns_may_wait(&self) {
        self.maybe_waiting.store(true, Ordering::Release);
        self.dispatch_wake.notify_one();
    }

    /// Takes turns waiting for any process while this one has free slots: when told one
    /// waits, when one of its turns ends, and every `DISPATCH_TICK` in case a word was lost.
    async fn dispatch(self: Arc<Self>) {
        let mut tick = tokio::time::interval(DISPATCH_TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.stopped() => return,
                _ = self.dispatch_wake.notified() => {}
                _ = tick.tick() => {}
            }
            while let Some(slot) = self.free_slot() {
                let claimed = self
                    .store
                    .claim_queued_turn(&self.process, self.settings.max_concurrent_turns_per_tenant)
                    .await;
                match claimed {
                    Ok(Some((turn, permissions))) => {
                        // Registered at once: a cancel from now on finds it here.
                        let control = self.scheduler.register(&turn);
                        tokio::spawn(self.clone().run_claimed(turn, permissions, slot, control));
                    }
                    Ok(None) => {
                        self.maybe_waiting.store(false, Ordering::Release);
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot take a waiting turn");
                        break;
                    }
                }
            }
        }
    }

    /// Runs a turn taken from the queue (started in the database by the claim).
    async fn run_claimed(
        self: Arc<Self>,
        turn: Turn,
        permissions: Option<serde_json::Value>,
        slot: tokio::sync::OwnedSemaphorePermit,
        control: Arc<TurnControl>,
    ) {
        tracing::info!(turn_id = %turn.id, "took a turn that waited for any process");
        let permissions: Vec<Permission> = match permissions.map(serde_json::from_value) {
            None => Vec::new(),
            Some(Ok(permissions)) => permissions,
            Some(Err(error)) => {
                tracing::error!(%error, turn_id = %turn.id, "a waiting turn's permissions are corrupt");
                Vec::new()
            }
        };
        let session = match self
            .store
            .get_session(&turn.tenant_id, &turn.session_id)
            .await
        {
            Ok(session) => session,
            Err(error) => {
                tracing::warn!(%error, turn_id = %turn.id, "the session of a waiting turn is gone");
                turn_log::stop_failed(
                    &self,
                    &turn,
                    None,
                    TurnError::new("internal", "the turn's session could not be read"),
                )
                .await;
                self.scheduler.unregister(&turn.id);
                return;
            }
        };
        // Another turn of this session ran elsewhere since this process last saw it.
        self.histories.forget(&turn.session_id);
        // The claim counted the tenant's turns over every process: no slot of this
        // process's tenant count is needed.
        self.spawn_turn(
            turn,
            session,
            permissions,
            Some((None, slot)),
            true,
            control,
        );
    }

    async fn heartbeat(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.settings.heartbeat());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.stopped() => return,
                _ = tick.tick() => {}
            }
            let sent = Instant::now();
            match self.store.renew_process(&self.process, self.lease()).await {
                Ok(true) => {
                    self.lease.renewed(sent);
                    self.stop_requested().await
                }
                // Shutting down: it unregistered itself.
                Ok(false) if !self.is_accepting() => return,
                Ok(false) => self.lost_lease().await,
                Err(error) => tracing::warn!(%error, "cannot renew this process's lease"),
            }
        }
    }

    /// Stops the turns other processes asked this one to stop in the database: a stop
    /// whose notification was lost arrives within a heartbeat.
    async fn stop_requested(&self) {
        let requests = match self.store.list_stop_requests(&self.process).await {
            Ok(requests) => requests,
            Err(error) => {
                tracing::warn!(%error, "cannot read the stop requests for this process's turns");
                return;
            }
        };
        for (turn, reason) in requests {
            let Some(control) = self.scheduler.control(&turn) else {
                continue;
            };
            let reason = serde_json::from_value(reason)
                .unwrap_or_else(|_| TurnError::new(TurnError::CANCELLED, "the turn was cancelled"));
            control.stop(reason);
        }
    }

    /// Another process found this one's lease expired and may be ending its turns: stop
    /// them (what they would still write is refused), then serve on under a new lease.
    async fn lost_lease(&self) {
        tracing::error!(
            "this process's lease expired before it was renewed: its turns are ended; \
             is the database overloaded, or engine.lease_ms too short?"
        );
        for control in self.scheduler.all_controls() {
            control.stop(TurnError::new(
                TurnError::INTERRUPTED,
                "the server running the turn lost contact with the database",
            ));
        }
        let sent = Instant::now();
        match self
            .store
            .insert_process(&self.process, &hostname(), self.lease())
            .await
        {
            Ok(()) => self.lease.renewed(sent),
            Err(error) => tracing::warn!(%error, "cannot register this process again"),
        }
    }

    /// Stops this process's turns as soon as it can no longer prove its lease (its last
    /// renewal plus the lease, less the margin, has passed on its own clock): before any
    /// other process may find the lease expired and take them. The event writer refuses
    /// their events from the same moment; they end once the lease is proven again (or by
    /// the process that takes them).
    async fn watch_lease(self: Arc<Self>) {
        loop {
            let renewed = self.lease.next_renewal();
            let until = self.lease.proven_until();
            let expires = async {
                match until {
                    Some(until) => tokio::time::sleep_until(until.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.stopped() => return,
                _ = renewed => continue,
                _ = expires => {}
            }
            if self.lease.is_held() {
                continue;
            }
            let turns = self.scheduler.all_controls();
            tracing::warn!(
                turns = turns.len(),
                "this process cannot prove its lease (not renewed in time): its turns stop \
                 and it writes nothing until the lease is renewed"
            );
            for control in turns {
                control.stop(TurnError::new(
                    TurnError::INTERRUPTED,
                    "the server running the turn lost contact with the database",
                ));
            }
            tokio::select! {
                _ = self.stopped() => return,
                _ = self.lease.next_renewal() => {}
            }
        }
    }

    /// Ends the turns whose `turn_stop` could not be stored (the database was full or
    /// unavailable, or the lease unproven), as soon as a write succeeds again: each gets a
    /// terminal event saying why. A turn another process ended meanwhile is left to it.
    async fn end_unended(self: Arc<Self>) {
        loop {
            tokio::select! {
                _ = self.stopped() => return,
                _ = self.unended_wake.notified() => {}
                _ = tokio::time::sleep(UNENDED_RETRY) => {}
            }
            let unended: Vec<(Turn, TurnError)> = self
                .unended
                .lock()
                .expect("unended lock")
                .values()
                .cloned()
                .collect();
            for (turn, reason) in unended {
                if !self.lease.is_held() {
                    break;
                }
                match turn_log::end_unstored(&self, &turn, reason).await {
                    Ok(()) | Err(EngineError::Store(StoreError::Fenced(_))) => {
                        tracing::info!(turn_id = %turn.id, "ended a turn whose end could not be stored before");
                        self.unended.lock().expect("unended lock").remove(&turn.id);
                    }
                    Err(error) => {
                        tracing::warn!(%error, turn_id = %turn.id, "cannot end a turn yet");
                        break;
                    }
                }
            }
        }
    }

    /// Whether this process can take turns now: it proves its lease and the database takes
    /// a write (a renewal of the lease: a write that changes the row, which SQLite cannot
    /// skip), within `limit`. After a write was refused for a full disk, also one that needs
    /// new space (a renewal made in place proves nothing then), until one succeeds.
    pub async fn can_write(&self, limit: Duration) -> Result<(), StoreError> {
        if !self.lease.is_held() {
            return Err(StoreError::Unavailable(
                super::writer::LEASE_UNPROVEN.into(),
            ));
        }
        let renewed = async {
            self.store
                .renew_process(&self.process, self.lease())
                .await?;
            if self.store.storage_refused() {
                self.store.probe_space().await?;
            }
            Ok(())
        };
        match tokio::time::timeout(limit, renewed).await {
            Ok(written) => written,
            Err(_) => Err(StoreError::Unavailable(format!(
                "no write within {} ms",
                limit.as_millis()
            ))),
        }
    }

    /// Ends the unfinished turns the database says this process owns but that it neither
    /// runs nor is ending (a turn handed back to it while it lost its lease, a claim whose
    /// end failed): seen so at two sweeps in a row (a turn just admitted or taken is
    /// registered at once), each is ended as an interrupted one. No other process would:
    /// this process is alive.
    async fn end_untracked(&self) -> Result<usize, EngineError> {
        if !self.lease.is_held() {
            return Ok(0);
        }
        let owned = self.store.list_owned_turns(&self.process).await?;
        let mut untracked: Vec<Turn> = Vec::new();
        {
            let unended = self.unended.lock().expect("unended lock");
            untracked.extend(owned.into_iter().filter(|turn| {
                self.scheduler.control(&turn.id).is_none() && !unended.contains_key(&turn.id)
            }));
        }
        let mut suspects = self.untracked.lock().expect("untracked lock");
        let mut ended = 0;
        let mut next = std::collections::HashSet::new();
        for turn in untracked {
            if suspects.contains(&turn.id) {
                tracing::warn!(turn_id = %turn.id, "ending a turn this process owns but does not run");
                self.end_later(
                    &turn,
                    TurnError::new(
                        TurnError::INTERRUPTED,
                        "the server running the turn lost contact with the database",
                    ),
                );
                ended += 1;
            } else {
                next.insert(turn.id);
            }
        }
        *suspects = next;
        drop(suspects);
        if ended > 0 {
            self.unended_wake.notify_one();
        }
        Ok(ended)
    }

    /// A turn of this process whose end could not be stored: ended later, with `reason`.
    pub(super) fn end_later(&self, turn: &Turn, reason: TurnError) {
        self.unended
            .lock()
            .expect("unended lock")
            .insert(turn.id, (turn.clone(), reason));
    }

    async fn sweep(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.settings.lease_sweep_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.stopped() => return,
                _ = tick.tick() => {}
            }
            let swept = async {
                self.store.expire_processes(&self.process, false).await?;
                self.end_orphans(false).await?;
                self.end_untracked().await
            };
            if let Err(error) = swept.await {
                tracing::warn!(%error, "cannot sweep for turns of dead processes");
            }
        }
    }

    /// Follows the other processes' notifications until shutdown, listening again after a
    /// lost connection; what was missed meanwhile is read from the log.
    async fn listen(self: Arc<Self>) {
        loop {
            match self.store.listen(&self.process).await {
                Ok(Some(mut listener)) => {
                    self.relay.catch_up_all();
                    loop {
                        let notice = tokio::select! {
                            _ = self.stopped() => return,
                            notice = listener.recv() => notice,
                        };
                        match notice {
                            Ok(Notice::Events(committed)) => {
                                for one in committed {
                                    self.relay.remote_commit(one);
                                }
                            }
                            Ok(Notice::Command(payload)) => self.command(&payload),
                            Ok(Notice::Reconnected) => self.relay.catch_up_all(),
                            Err(error) => {
                                tracing::warn!(%error, "lost the notification connection");
                                break;
                            }
                        }
                    }
                }
                Ok(None) => return,
                Err(error) => tracing::warn!(%error, "cannot listen for other processes"),
            }
            tokio::select! {
                _ = self.stopped() => return,
                _ = tokio::time::sleep(RELISTEN) => {}
            }
        }
    }

    /// Ends a turn waiting for any process, if none took it yet: `false` if one did.
    pub(super) async fn end_unclaimed(
        &self,
        turn: &Turn,
        reason: TurnError,
    ) -> Result<bool, EngineError> {
        if !self
            .store
            .claim_unclaimed_turn(&turn.id, &self.process)
            .await?
        {
            return Ok(false);
        }
        turn_log::stop_unstarted(self, turn, None, reason).await;
        // Not ended: it waits for any process again.
        if !self.settle(turn, None).await {
            return Err(EngineError::Store(StoreError::Corrupt(
                "the waiting turn could not be ended".into(),
            )));
        }
        Ok(true)
    }

    /// After ending a turn this process took: whether the end is durable. If it is not
    /// (or the database cannot say), the turn goes back to `owner`, for the next try (of
    /// any process).
    async fn settle(&self, turn: &Turn, owner: Option<&ProcessId>) -> bool {
        let ended = self
            .store
            .get_turn(&turn.tenant_id, &turn.session_id, &turn.id)
            .await
            .is_ok_and(|turn| turn.status.is_terminal());
        if !ended
            && let Err(error) = self
                .store
                .claim_turn(&turn.id, Some(&self.process), owner)
                .await
        {
            tracing::warn!(%error, turn_id = %turn.id, "cannot give back a turn it failed to end");
        }
        ended
    }

    /// Sends a command to the other processes (nothing on SQLite: there are none).
    pub(super) async fn broadcast(&self, command: &Command) -> Result<(), StoreError> {
        let payload = serde_json::to_string(command)?;
        self.store.notify_command(&payload).await
    }

    fn command(&self, payload: &str) {
        let command: Command = match serde_json::from_str(payload) {
            Ok(command) => command,
            Err(error) => {
                tracing::warn!(%error, "ignored a malformed command from another process");
                return;
            }
        };
        match command {
            Command::StopTurn { turn, reason } => {
                if let Some(control) = self.scheduler.control(&turn) {
                    control.stop(reason);
                }
            }
            Command::StopTenant { tenant, reason } => {
                for control in self.scheduler.tenant_controls(&tenant) {
                    control.stop(reason.clone());
                }
            }
            Command::Dispatch => self.turns_may_wait(),
            Command::CloseSession { session } => self.fanout.close(&session),
        }
    }

    /// At shutdown, once this process's turns ended: it owns nothing, so it leaves now
    /// instead of when its lease expires.
    pub(super) async fn leave(&self) {
        if self.scheduler.running_turns() > 0 {
            return;
        }
        if let Err(error) = self.store.delete_process(&self.process).await {
            tracing::warn!(%error, "cannot unregister this process");
        }
    }
}

/// The name of this host, for operators reading the processes table.
fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .map(|h| format!("{h}:{}", std::process::id()))
        .unwrap_or_else(|| format!("pid {}", std::process::id()))
}
