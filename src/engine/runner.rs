//! The engine: the parts that admit, schedule, run, stop and log turns, held together. Its
//! operations live beside the part they belong to (`admission.rs`, `turn_task.rs`,
//! `turn_control.rs`, `runs.rs`, `sessions.rs`, `cluster.rs`, …); this file holds the state
//! they share and how it is built.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use futures_util::Stream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::fanout::Fanout;
use super::follow::{Follow, follow};
use super::request::StartedTurn;
use super::scheduler::Scheduler;
use super::turn_parts::TurnParts;
use super::writer::EventWriter;
use crate::agents::Agents;
use crate::config::EngineSettings;
use crate::crypto::SecretBox;
use crate::metrics::Metrics;
use crate::model::{Event, ProcessId, SessionId, TurnId};
use crate::store::Deltas;
use crate::store::{Backend, Store, StoreError};

#[derive(Debug)]
pub struct Engine {
    pub(super) store: Store,
    pub(super) catalog: super::catalog::Catalog,
    pub(super) secrets: SecretBox,
    pub(super) writer: EventWriter,
    pub(super) http: reqwest::Client,
    pub(super) tools: crate::config::ToolsSettings,
    pub(super) mcp: Arc<crate::tools::mcp::McpRegistry>,
    pub(super) fanout: Arc<Fanout>,
    /// This process, the owner of the turns it admits.
    pub(super) process: ProcessId,
    /// Woken when the event writer queued webhook deliveries.
    pub(super) webhook_wake: Arc<tokio::sync::Notify>,
    /// Relays other processes' commits to this process's followers.
    pub(super) relay: Arc<super::relay::Relay>,
    /// Wakes the dispatcher of turns waiting for any process.
    pub(super) dispatch_wake: tokio::sync::Notify,
    /// Whether turns may be waiting for any process (set when one is announced, cleared
    /// when the dispatcher finds none): a turn's end wakes the dispatcher only then.
    pub(super) maybe_waiting: AtomicBool,
    /// Recently active sessions' histories, read incrementally.
    pub(super) histories: super::histories::Histories,
    pub(super) settings: EngineSettings,
    /// What one session may hold.
    pub(super) limits: crate::config::LimitsSettings,
    pub(super) metrics: Arc<Metrics>,
    pub(super) tracker: TaskTracker,
    /// The runtime the event writer runs on, where turns run too: a turn queues all the
    /// events it has ready before the writer takes any. (Spawned by the HTTP worker that
    /// admitted it, a turn ran on that worker's thread, and its first event woke the
    /// writer's thread, which committed it alone: two batches, two waits, per turn.)
    pub(super) runtime: tokio::runtime::Handle,
    /// Slots, queue and the turns' off switches.
    pub(super) scheduler: Scheduler,
    /// What this process can prove of its lease.
    pub(super) lease: Arc<super::lease::Lease>,
    /// Turns whose `turn_stop` could not be stored, with why they end: ended once a write
    /// succeeds again.
    pub(super) unended: super::turn_parts::Unended,
    pub(super) unended_wake: tokio::sync::Notify,
    /// Unfinished turns of this process's that it did not run at the last sweep.
    pub(super) untracked: Mutex<std::collections::HashSet<TurnId>>,
    /// Per-tenant quotas and the counting of the rate ones.
    pub(super) quotas: super::quotas::QuotaBook,
    pub(super) accepting: AtomicBool,
    /// Cancelled when the server stops: live streams end.
    pub(super) shutdown: CancellationToken,
}

impl Engine {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Store,
        agents: Agents,
        secrets: SecretBox,
        settings: EngineSettings,
        tools: crate::config::ToolsSettings,
        mcp: Arc<crate::tools::mcp::McpRegistry>,
        quotas: crate::model::QuotaDefaults,
        metrics: Arc<Metrics>,
        limits: crate::config::LimitsSettings,
        tenant_agents: super::catalog::TenantAgentPolicy,
    ) -> Arc<Engine> {
        let fanout = Arc::new(Fanout::new(settings.subscriber_buffer, metrics.clone()));
        let process = ProcessId::generate();
        let webhook_wake = Arc::new(tokio::sync::Notify::new());
        let scheduler = Scheduler::new(settings.max_concurrent_turns, settings.max_queued_turns);
        let lease = Arc::new(super::lease::Lease::new(
            settings.lease(),
            settings.lease_margin(),
            store.backend() == Backend::Sqlite,
        ));
        let writer = EventWriter::start(
            store.clone(),
            fanout.clone(),
            process,
            settings.max_batch_events,
            webhook_wake.clone(),
            metrics.clone(),
            super::writer::Ownership {
                lease: lease.clone(),
                controls: scheduler.controls(),
            },
        );
        let relay = super::relay::Relay::new(store.clone(), fanout.clone());
        Arc::new(Engine {
            quotas: super::quotas::QuotaBook::new(store.clone(), quotas),
            store,
            catalog: super::catalog::Catalog::new(agents, tenant_agents, mcp.clone()),
            secrets,
            writer,
            http: crate::providers::http_client(),
            tools,
            mcp,
            fanout,
            process,
            webhook_wake,
            relay,
            dispatch_wake: tokio::sync::Notify::new(),
            maybe_waiting: AtomicBool::new(true),
            histories: super::histories::Histories::new(settings.history_cache_kib * 1024),
            settings,
            limits,
            metrics,
            tracker: TaskTracker::new(),
            runtime: tokio::runtime::Handle::current(),
            scheduler,
            lease,
            unended: Mutex::new(HashMap::new()),
            unended_wake: tokio::sync::Notify::new(),
            untracked: Mutex::new(std::collections::HashSet::new()),
            accepting: AtomicBool::new(true),
            shutdown: CancellationToken::new(),
        })
    }

    /// What a turn uses while it runs and ends.
    pub(super) fn turn_parts(&self) -> TurnParts<'_> {
        TurnParts {
            store: &self.store,
            catalog: &self.catalog,
            secrets: &self.secrets,
            writer: &self.writer,
            http: &self.http,
            tools: &self.tools,
            mcp: &self.mcp,
            metrics: &self.metrics,
            histories: &self.histories,
            quotas: &self.quotas,
            unended: &self.unended,
        }
    }

    /// The session's events after a cursor, replayed then live.
    pub fn follow(
        &self,
        what: Follow,
    ) -> impl Stream<Item = Result<Arc<Event>, StoreError>> + use<> {
        follow(
            self.store.clone(),
            self.fanout.clone(),
            self.shutdown.clone(),
            what,
            None,
        )
    }

    /// The events of a turn this process just started (or replays), from its first.
    pub fn follow_started(
        &self,
        started: StartedTurn,
    ) -> impl Stream<Item = Result<Arc<Event>, StoreError>> + use<> {
        let what = Follow {
            tenant: started.turn.tenant_id,
            session: started.turn.session_id,
            turn: Some(started.turn.id),
            after: 0,
            deltas: Deltas::Merged,
        };
        follow(
            self.store.clone(),
            self.fanout.clone(),
            self.shutdown.clone(),
            what,
            started.live,
        )
    }

    /// This process's id, and what wakes its webhook sender when deliveries are queued.
    pub fn webhook_wiring(&self) -> (ProcessId, Arc<tokio::sync::Notify>) {
        (self.process, self.webhook_wake.clone())
    }

    /// How many sessions have live followers now (a channel each).
    pub fn live_sessions(&self) -> usize {
        self.fanout.channel_count()
    }

    /// Ends the live streams of these sessions (their data is gone).
    pub fn close_sessions(&self, sessions: &[SessionId]) {
        for session in sessions {
            self.fanout.close(session);
        }
    }

    /// Per-tenant quotas, and the counting of the rate ones.
    pub fn quotas(&self) -> &super::quotas::QuotaBook {
        &self.quotas
    }
}
