//! The turn engine: admits turns, runs them as background tasks within global and
//! per-tenant limits, cancels them, and shuts down gracefully.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::agent_loop;
use super::error::EngineError;
use super::fanout::Fanout;
use super::follow::{Follow, follow};
use super::histories::Snapshot;
use super::input::{InputMessage, PendingCall, check_input, pending_tool_calls};
use super::sessions::seal_option;
use super::writer::EventWriter;
use crate::agents::{Agents, SessionConfigRequest};
use crate::config::{EngineSettings, HistoryType, OptionKind};
use crate::crypto::SecretBox;
use crate::metrics::Metrics;
use crate::model::{
    Event, HistoryMessage, ProcessId, Quota, QuotaExceeded, Run, RunId, RunStatus, Session,
    SessionId, StreamMode, TenantId, Turn, TurnError, TurnId, TurnStatus, Usage, json_len,
};
use crate::store::Deltas;
use crate::store::{
    AdmissionLimits, Backend, RUN_NOT_AWAITING, Refusal, RunLink, SlotClaim, Store, StoreError,
};

/// Which run a turn being admitted belongs to.
#[derive(Debug, Clone, Default)]
pub(super) enum RunPart {
    #[default]
    None,
    /// It starts a new run.
    New,
    /// It resumes this awaiting run.
    Resume(RunId),
}

/// A turn as a client asks for it, protocol aside.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// The agent's name, if the client repeated it: it must not change.
    pub agent_name: Option<String>,
    /// Session overrides that persist: options merged by key, server tools replaced.
    pub agent: SessionConfigRequest,
    pub messages: Vec<InputMessage>,
    pub stream: StreamMode,
    pub idempotency_key: Option<String>,
    /// A digest of the request as sent, to tell a retry from a different request.
    pub fingerprint: String,
}

impl TurnRequest {
    pub fn fingerprint_of(body: &serde_json::Value) -> String {
        crate::model::sha256_hex(body.to_string().as_bytes())
    }
}

/// An idempotency key as stored: in its protocol's namespace (`scope`), so the same key
/// sent over two protocols names two requests. AAP's keys, the engine's own, have none.
pub fn scoped_key(scope: &str, key: &str) -> String {
    if scope.is_empty() {
        key.to_owned()
    } else {
        format!("{scope}:{key}")
    }
}

/// The key a client sent, from a stored key of its protocol's namespace.
pub fn unscoped_key<'a>(scope: &str, stored: &'a str) -> Option<&'a str> {
    stored.strip_prefix(scope)?.strip_prefix(':')
}

/// A client's answer to a server tool call that waited for permission.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Permission {
    pub call: PendingCall,
    pub granted: bool,
    pub reason: Option<String>,
}

/// A turn `start_turn` accepted.
#[derive(Debug)]
pub struct StartedTurn {
    pub turn: Turn,
    /// For a new turn: subscribed before it could write, so following it needs no replay.
    live: Option<super::fanout::Subscription>,
}

impl StartedTurn {
    fn replay(turn: Turn) -> Self {
        Self { turn, live: None }
    }
}

/// The off switches of this process's queued and running turns.
pub(super) type Controls = Mutex<HashMap<TurnId, Arc<TurnControl>>>;

/// A running or queued turn's off switch, with the reason it was pulled.
#[derive(Debug)]
pub struct TurnControl {
    tenant: TenantId,
    token: CancellationToken,
    reason: Mutex<Option<TurnError>>,
    /// Cancelled once the turn's task ended (its `turn_stop` is durable).
    ended: CancellationToken,
}

impl TurnControl {
    fn new(tenant: TenantId) -> Self {
        Self {
            tenant,
            token: CancellationToken::new(),
            reason: Mutex::new(None),
            ended: CancellationToken::new(),
        }
    }

    pub fn stop(&self, reason: TurnError) {
        self.reason
            .lock()
            .expect("turn control lock")
            .get_or_insert(reason);
        self.token.cancel();
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    pub fn reason(&self) -> TurnError {
        self.reason
            .lock()
            .expect("turn control lock")
            .clone()
            .unwrap_or_else(|| TurnError::new(TurnError::CANCELLED, "the turn was cancelled"))
    }
}

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
    /// Reads of other processes' commits in flight.
    pub(super) remote_reads: super::cluster::RemoteReads,
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
    tracker: TaskTracker,
    controls: Arc<Controls>,
    /// What this process can prove of its lease.
    pub(super) lease: Arc<super::lease::Lease>,
    /// Turns whose `turn_stop` could not be stored, with why they end: ended once a write
    /// succeeds again.
    pub(super) unended: Mutex<HashMap<TurnId, (Turn, TurnError)>>,
    pub(super) unended_wake: tokio::sync::Notify,
    /// Unfinished turns of this process's that it did not run at the last sweep.
    pub(super) untracked: Mutex<std::collections::HashSet<TurnId>>,
    global: Arc<Semaphore>,
    /// Each tenant's slots, sized by its concurrent-turn quota when they were made.
    tenants: Mutex<HashMap<TenantId, (usize, Arc<Semaphore>)>>,
    /// Per-tenant quotas and the counting of the rate ones.
    pub(super) quotas: super::quotas::QuotaBook,
    queued: AtomicUsize,
    /// Turns waiting for a slot, per tenant (entries leave at zero).
    queued_by_tenant: Mutex<HashMap<TenantId, usize>>,
    accepting: AtomicBool,
    /// Cancelled when the server stops: live streams end.
    shutdown: CancellationToken,
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
        let controls: Arc<Controls> = Default::default();
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
                controls: controls.clone(),
            },
        );
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
            remote_reads: Default::default(),
            dispatch_wake: tokio::sync::Notify::new(),
            maybe_waiting: AtomicBool::new(true),
            histories: super::histories::Histories::new(settings.history_cache_kib * 1024),
            global: Arc::new(Semaphore::new(settings.max_concurrent_turns)),
            settings,
            limits,
            metrics,
            tracker: TaskTracker::new(),
            controls,
            lease,
            unended: Mutex::new(HashMap::new()),
            unended_wake: tokio::sync::Notify::new(),
            untracked: Mutex::new(std::collections::HashSet::new()),
            tenants: Mutex::new(HashMap::new()),
            queued: AtomicUsize::new(0),
            queued_by_tenant: Mutex::new(HashMap::new()),
            accepting: AtomicBool::new(true),
            shutdown: CancellationToken::new(),
        })
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

    /// Validates and records a turn, then runs it in the background. A retry with the same
    /// idempotency key gets the earlier turn instead.
    pub async fn start_turn(
        self: &Arc<Self>,
        tenant: &TenantId,
        session_id: &SessionId,
        request: TurnRequest,
    ) -> Result<StartedTurn, EngineError> {
        self.admit(tenant, session_id, request, RunPart::None).await
    }

    /// `start_turn` for a turn that starts or resumes a run, recorded in the same
    /// transaction as the turn.
    pub(super) async fn admit(
        self: &Arc<Self>,
        tenant: &TenantId,
        session_id: &SessionId,
        request: TurnRequest,
        run: RunPart,
    ) -> Result<StartedTurn, EngineError> {
        if !self.accepting.load(Ordering::Acquire) {
            return Err(EngineError::ShuttingDown);
        }
        if !self.lease.is_held() {
            return Err(StoreError::Unavailable(super::writer::LEASE_UNPROVEN.into()).into());
        }
        let mut request = request;
        // The session as remembered, checked by the turn's own INSERT. Read again if it
        // moved, or if the request looks wrong for it (answers to calls it may not know).
        let mut charged = false;
        if let Some(snapshot) = self.histories.snapshot(tenant, session_id) {
            match self
                .admit_on(
                    tenant,
                    session_id,
                    &mut request,
                    &run,
                    Some(snapshot),
                    &mut charged,
                )
                .await
            {
                Err(EngineError::Store(StoreError::Stale) | EngineError::Invalid(_)) => {
                    self.histories.forget(session_id);
                }
                admitted => return admitted,
            }
        }
        self.admit_on(tenant, session_id, &mut request, &run, None, &mut charged)
            .await
    }

    /// One attempt at admission. What it does to `request` (large parts stored once and
    /// referenced) holds for a second attempt too.
    async fn admit_on(
        self: &Arc<Self>,
        tenant: &TenantId,
        session_id: &SessionId,
        request: &mut TurnRequest,
        run: &RunPart,
        snapshot: Option<Snapshot>,
        charged: &mut bool,
    ) -> Result<StartedTurn, EngineError> {
        let session = match &snapshot {
            Some(snapshot) => snapshot.session.clone(),
            None => self
                .store
                .get_session(tenant, session_id)
                .await
                .map_err(|e| not_found(e, "session"))?,
        };
        if let Some(name) = &request.agent_name
            && *name != session.agent
        {
            return Err(EngineError::Invalid(crate::model::FieldError::new(
                "agent.name",
                format!(
                    "a session's agent cannot change (this session's is `{}`)",
                    session.agent
                ),
            )));
        }
        if let Some(key) = &request.idempotency_key
            && let Some(earlier) = self.earlier_turn(tenant, session_id, key, request).await?
        {
            return Ok(StartedTurn::replay(earlier));
        }
        let agent = self
            .agent_of(&session)
            .await?
            .ok_or(EngineError::AgentUnavailable)?;
        for (i, message) in request.messages.iter().enumerate() {
            if let InputMessage::User { content } | InputMessage::ToolResult { content, .. } =
                message
            {
                agent.check_content(content, &format!("messages[{i}].content"))?;
            }
            if let InputMessage::User { content } = message {
                agent.check_input_body(content, &format!("messages[{i}].content"))?;
            }
        }
        let pending = match &snapshot {
            Some(snapshot) => snapshot.pending.clone(),
            None => self.pending_tool_calls(tenant, session_id).await?,
        };
        check_input(&request.messages, &pending, |name| {
            agent.has_server_tool(name)
        })?;
        let permissions: Vec<Permission> = request
            .messages
            .iter()
            .filter_map(|message| match message {
                InputMessage::ToolPermission {
                    tool_call_id,
                    granted,
                    reason,
                } => pending
                    .iter()
                    .find(|c| c.id == *tool_call_id)
                    .map(|call| Permission {
                        call: call.clone(),
                        granted: *granted,
                        reason: reason.clone(),
                    }),
                _ => None,
            })
            .collect();
        let updated = self.apply_overrides(&agent, &session, &request.agent)?;
        super::parts::store_large_parts(
            &self.store,
            tenant,
            session_id,
            self.settings.inline_part_max_bytes,
            &mut request.messages,
        )
        .await?;
        // A valid new turn counts against the tenant's quotas once, however many attempts
        // its admission takes.
        if !*charged {
            self.quotas.check_tokens(tenant).await?;
            self.quotas.charge(tenant, Quota::TurnsPerMinute).await?;
            *charged = true;
        }

        // Where the turn waits for a slot. With one free here, it is this process's at once.
        // On PostgreSQL a turn that finds none is left to whichever process frees one first;
        // on SQLite it waits here (this process is the only one).
        let start = match self.try_permits(tenant) {
            Some(permits) => Start::Here(Some(permits)),
            None if self.store.backend() == Backend::Postgres => {
                let (tenant_queued, queued) = self.store.count_unclaimed_turns(tenant).await?;
                self.check_tenant_queue(tenant, tenant_queued.max(0) as u64)?;
                if queued >= self.settings.max_queued_turns as i64 {
                    return Err(EngineError::QueueFull);
                }
                Start::Anywhere
            }
            None => {
                self.reserve_queue_slot(tenant)?;
                Start::Here(None)
            }
        };
        let id = TurnId::generate();
        let run_id = match run {
            RunPart::None => None,
            RunPart::New => Some(Run::id_for(&id)),
            RunPart::Resume(run) => Some(*run),
        };
        let link = match (run, &run_id) {
            (RunPart::New, Some(id)) => RunLink::New(id),
            (RunPart::Resume(_), Some(id)) => RunLink::Resume(id),
            _ => RunLink::None,
        };
        let answers_calls = request
            .messages
            .iter()
            .any(|m| !matches!(m, InputMessage::User { .. }));
        let turn = Turn {
            id,
            tenant_id: *tenant,
            session_id: *session_id,
            run_id,
            status: TurnStatus::Queued,
            stream: request.stream,
            stop_reason: None,
            error: None,
            usage: Usage::default(),
            idempotency_key: request.idempotency_key.clone(),
            // Only a retry with the same key compares it.
            request_hash: request
                .idempotency_key
                .as_ref()
                .map(|_| self.request_hash(request)),
            first_seq: None,
            last_seq: None,
            created_at: crate::model::now(),
            started_at: None,
            finished_at: None,
            trace_parent: crate::traces::current_traceparent(),
        };
        let input: Vec<HistoryMessage> = request
            .messages
            .iter()
            .filter_map(InputMessage::to_history)
            .collect();
        // One turn at a time per session: what the history holds cannot change before the
        // turn is recorded (the remembered state is checked in its `INSERT`).
        let (history_messages, history_bytes) = match &snapshot {
            Some(snapshot) => (
                snapshot.remembered.history_len.max(0) as u64,
                snapshot.history_bytes,
            ),
            None => self.store.history_size(tenant, session_id).await?,
        };
        let input_bytes: u64 = input.iter().map(|m| json_len(m) as u64).sum();
        if history_messages + input.len() as u64 > self.limits.session_max_messages
            || history_bytes + input_bytes > self.limits.session_max_bytes
        {
            if let Start::Here(None) = start {
                self.release_queue_slot(tenant);
            }
            return Err(EngineError::SessionFull {
                messages: history_messages,
                bytes: history_bytes,
                max_messages: self.limits.session_max_messages,
                max_bytes: self.limits.session_max_bytes,
            });
        }
        let owner = match start {
            Start::Here(_) => Some(&self.process),
            Start::Anywhere => None,
        };
        let carried = match (&start, permissions.is_empty()) {
            (Start::Anywhere, false) => {
                Some(serde_json::to_value(&permissions).map_err(StoreError::from)?)
            }
            _ => None,
        };
        let limits = AdmissionLimits {
            // On SQLite the in-memory queue above is exact (one process).
            queued_turns: matches!(start, Start::Anywhere).then(|| {
                self.quotas
                    .of(tenant)
                    .limit(Quota::QueuedTurns)
                    .unwrap_or(0)
            }),
            // The model reads the history too: about four bytes a token.
            tokens: self.quotas.token_budget(
                tenant,
                token_estimate(&agent, &input).saturating_add(history_bytes.div_ceil(4)),
            ),
        };
        let inserted = self
            .store
            .insert_turn(
                tenant,
                &turn,
                owner,
                carried.as_ref(),
                updated.as_ref(),
                &input,
                link,
                answers_calls,
                snapshot.as_ref().map(|s| s.remembered),
                limits,
            )
            .await;
        if let Err(error) = inserted {
            if let Start::Here(None) = start {
                self.release_queue_slot(tenant);
            }
            return match error {
                StoreError::Refused(Refusal::QueuedTurns(waiting)) => {
                    self.check_tenant_queue(tenant, waiting)?;
                    Err(EngineError::QueueFull)
                }
                StoreError::Refused(Refusal::Tokens { used, .. }) => {
                    Err(self.quotas.tokens_refusal(tenant, used))
                }
                // Two requests with one key at the same moment: whichever index refused the
                // second, it is a retry of the first, which is committed by now.
                StoreError::Conflict(what)
                    if what != RUN_NOT_AWAITING && request.idempotency_key.is_some() =>
                {
                    let key = request.idempotency_key.as_deref().unwrap_or_default();
                    match self.earlier_turn(tenant, session_id, key, request).await? {
                        Some(earlier) => Ok(StartedTurn::replay(earlier)),
                        None => Err(EngineError::SessionBusy),
                    }
                }
                StoreError::Conflict(what) if what == RUN_NOT_AWAITING => {
                    let status = match &run_id {
                        Some(id) => self.store.get_run_status(tenant, id).await?,
                        None => RunStatus::Completed,
                    };
                    Err(EngineError::RunNotAwaiting(status))
                }
                StoreError::Conflict(_) => Err(EngineError::SessionBusy),
                StoreError::NotFound => Err(EngineError::NotFound("session")),
                other => Err(other.into()),
            };
        }
        crate::telemetry::record_session(session_id);
        crate::telemetry::record_turn(&turn.id);
        // Subscribed before the turn can write anything: its follower needs no replay.
        let live = self.fanout.subscribe(tenant, session_id);
        let session = updated.unwrap_or(session);
        if let Some(snapshot) = &snapshot {
            self.histories.admitted(&turn.id, snapshot, &session, input);
        }
        let live = match start {
            Start::Here(permits) => {
                let control = self.register(&turn);
                self.spawn_turn(turn.clone(), session, permissions, permits, false, control);
                Some(live)
            }
            Start::Anywhere => {
                tracing::info!(turn_id = %turn.id, "no free slot here: the turn waits for any process");
                self.dispatch_soon().await;
                // Another process may write its first events before this one hears of
                // them: its followers read the log from the turn's start.
                None
            }
        };
        tracing::info!(turn_id = %turn.id, session_id = %session_id, "turn queued");
        Ok(StartedTurn { turn, live })
    }

    /// The turn's off switch, where commands for it find it from now on.
    pub(super) fn register(&self, turn: &Turn) -> Arc<TurnControl> {
        let control = Arc::new(TurnControl::new(turn.tenant_id));
        self.controls
            .lock()
            .expect("controls lock")
            .insert(turn.id, control.clone());
        control
    }

    /// Forgets a registered turn's control (its turn ended without a task).
    pub(super) fn unregister(&self, turn: &TurnId) {
        self.controls.lock().expect("controls lock").remove(turn);
    }

    /// Runs a turn this process owns, its control registered, in the background: with
    /// `permits` it has its slot already, `claimed` it was started in the database already
    /// (taken from the queue).
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
        self.tracker.spawn(
            async move {
                engine
                    .execute(turn, session, permissions, control, permits, claimed)
                    .await
            }
            .instrument(span),
        );
    }

    /// A slot of the tenant's and one of this process's, if both are free now.
    fn try_permits(&self, tenant: &TenantId) -> Option<Permits> {
        let tenant = self.tenant_limit(tenant).try_acquire_owned().ok()?;
        let global = self.global.clone().try_acquire_owned().ok()?;
        Some((Some(tenant), global))
    }

    /// One of this process's slots, if it takes turns and has one free.
    pub(super) fn free_slot(&self) -> Option<OwnedSemaphorePermit> {
        if !self.accepting.load(Ordering::Acquire) || !self.lease.is_held() {
            return None;
        }
        self.global.clone().try_acquire_owned().ok()
    }

    /// The tenant's latest turn a client started with `key` in `scope`, in any session.
    pub async fn find_turn_by_key(
        &self,
        tenant: &TenantId,
        scope: &str,
        key: &str,
    ) -> Result<Option<Turn>, EngineError> {
        // No turn is known by a key no request could have been admitted with.
        if key.chars().any(char::is_control) {
            return Ok(None);
        }
        Ok(self
            .store
            .find_latest_turn_by_key(tenant, &scoped_key(scope, key))
            .await?)
    }

    /// Tool calls still unanswered. They can only follow the last user message, so the tail
    /// of the history usually answers; the whole history is read when it does not.
    pub async fn pending_tool_calls(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Vec<PendingCall>, EngineError> {
        const TAIL: i64 = 8;
        let tail = self
            .store
            .list_recent_history(tenant, session, TAIL)
            .await?;
        let has_user = tail
            .iter()
            .any(|m| matches!(m, HistoryMessage::User { .. }));
        if has_user || (tail.len() as i64) < TAIL {
            return Ok(pending_tool_calls(&tail));
        }
        let history = self
            .store
            .list_history(tenant, session, HistoryType::Full)
            .await?;
        Ok(pending_tool_calls(&history))
    }

    /// The turn an idempotency key already started, if the request is the same one.
    async fn earlier_turn(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        key: &str,
        request: &TurnRequest,
    ) -> Result<Option<Turn>, EngineError> {
        match self
            .store
            .find_turn_by_idempotency_key(tenant, session, key)
            .await?
        {
            Some(turn)
                if turn.request_hash.as_deref() == Some(self.request_hash(request).as_str()) =>
            {
                Ok(Some(turn))
            }
            Some(_) => Err(EngineError::IdempotencyMismatch),
            None => Ok(None),
        }
    }

    /// What a turn stores to tell a retry from another request: the request's digest keyed
    /// with the secrets key, so the database holds no guessing oracle for what a request
    /// carried (secret options included).
    fn request_hash(&self, request: &TurnRequest) -> String {
        self.secrets
            .mac_hex("turn-request", request.fingerprint.as_bytes())
    }

    /// The session as the turn's overrides leave it, or `None` if they change nothing.
    fn apply_overrides(
        &self,
        agent: &crate::agents::Agent,
        session: &Session,
        overrides: &SessionConfigRequest,
    ) -> Result<Option<Session>, EngineError> {
        if overrides.server_tools.is_none()
            && overrides.options.is_empty()
            && overrides.client_tools.is_none()
        {
            return Ok(None);
        }
        let mut updated = session.clone();
        if let Some(tools) = &overrides.server_tools {
            agent.check_server_tools(tools)?;
            updated.server_tools = tools.clone();
        }
        for (name, value) in &overrides.options {
            match agent.check_option(name, value)? {
                // A secret as a read showed it: the stored one stays.
                OptionKind::Secret
                    if value == crate::agents::REDACTED
                        && session.sealed_options.contains_key(name) => {}
                OptionKind::Secret if value == crate::agents::REDACTED => {
                    return Err(crate::model::FieldError::new(
                        format!("agent.options.{name}"),
                        format!(
                            "`{}` keeps a stored secret, and this session has none: send the \
                             value itself",
                            crate::agents::REDACTED
                        ),
                    )
                    .into());
                }
                OptionKind::Secret => {
                    let sealed =
                        seal_option(&self.secrets, &session.tenant_id, &session.id, name, value);
                    updated.options.remove(name);
                    updated.sealed_options.insert(name.clone(), sealed);
                }
                OptionKind::Text | OptionKind::Select => {
                    updated.sealed_options.remove(name);
                    updated.options.insert(name.clone(), value.clone());
                }
            }
        }
        if let Some(tools) = &overrides.client_tools {
            agent.check_client_tools(tools)?;
            updated.client_tools = tools.clone();
        }
        updated.updated_at = crate::model::now();
        Ok(Some(updated))
    }

    /// A place in the queue, within the global bound and the tenant's share of it.
    fn reserve_queue_slot(&self, tenant: &TenantId) -> Result<(), EngineError> {
        let max = self.settings.max_queued_turns;
        let mut by_tenant = self.queued_by_tenant.lock().expect("queue lock");
        let mine = by_tenant.get(tenant).copied().unwrap_or(0);
        self.check_tenant_queue(tenant, mine as u64)?;
        self.queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|_| EngineError::QueueFull)?;
        by_tenant.insert(*tenant, mine + 1);
        self.metrics
            .set_turn_queue_depth(self.queued.load(Ordering::Acquire));
        Ok(())
    }

    /// Refuses a turn that would wait beyond the tenant's queued-turn quota (named by its
    /// concurrent-turn quota when the tenant may queue none).
    fn check_tenant_queue(&self, tenant: &TenantId, waiting: u64) -> Result<(), EngineError> {
        let quotas = self.quotas.of(tenant);
        let allowed = quotas.limit(Quota::QueuedTurns).unwrap_or(0);
        if waiting < allowed {
            return Ok(());
        }
        let (quota, limit) = match allowed {
            0 => (
                Quota::ConcurrentTurns,
                quotas.limit(Quota::ConcurrentTurns).unwrap_or(0),
            ),
            _ => (Quota::QueuedTurns, allowed),
        };
        Err(EngineError::QuotaExceeded(QuotaExceeded {
            quota,
            limit,
            retry_after: 1,
        }))
    }

    fn release_queue_slot(&self, tenant: &TenantId) {
        let left = self.queued.fetch_sub(1, Ordering::AcqRel) - 1;
        self.metrics.set_turn_queue_depth(left);
        let mut by_tenant = self.queued_by_tenant.lock().expect("queue lock");
        if let Some(mine) = by_tenant.get_mut(tenant) {
            *mine -= 1;
            if *mine == 0 {
                by_tenant.remove(tenant);
            }
        }
    }

    /// The tenant's slots in this process. A changed quota makes new slots: turns holding
    /// the old ones finish, new turns count against the new size.
    pub(super) fn tenant_limit(&self, tenant: &TenantId) -> Arc<Semaphore> {
        let size = self.concurrent_quota(tenant);
        let mut tenants = self.tenants.lock().expect("tenant limits lock");
        match tenants.get(tenant) {
            Some((made_for, slots)) if *made_for == size => slots.clone(),
            _ => {
                let slots = Arc::new(Semaphore::new(size));
                tenants.insert(*tenant, (size, slots.clone()));
                slots
            }
        }
    }

    /// The tenant's concurrent-turn quota.
    pub(super) fn concurrent_quota(&self, tenant: &TenantId) -> usize {
        self.quotas
            .of(tenant)
            .limit(Quota::ConcurrentTurns)
            .map_or(usize::MAX >> 4, |n| {
                usize::try_from(n).unwrap_or(usize::MAX >> 4)
            })
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
        let tenant_limit = self.tenant_limit(&turn.tenant_id);
        let waited_here = held.is_none();
        let slot = tokio::select! {
            biased;
            _ = control.token().cancelled() => Slot::Stopped,
            slot = async {
                let permits = match held {
                    Some(permits) => permits,
                    None => match acquire(tenant_limit, self.global.clone()).await {
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
            self.release_queue_slot(&turn.tenant_id);
        }
        match slot {
            // Ended elsewhere (another process, or deleted with its session): nothing to do.
            Slot::Gone => {
                tracing::info!(turn_id = %turn.id, "the waiting turn ended elsewhere");
            }
            Slot::Ready(_permits) => {
                let waited = (crate::model::now() - turn.created_at).to_std();
                self.metrics.turn_queue_wait(waited.unwrap_or_default());
                let run = agent_loop::run_turn(&self, &turn, &session, &permissions, &control);
                // A bug must not leave a turn without its end: clients wait for turn_stop.
                if std::panic::AssertUnwindSafe(run)
                    .catch_unwind()
                    .await
                    .is_err()
                {
                    tracing::error!(turn_id = %turn.id, "a turn's task panicked");
                    agent_loop::stop_failed(
                        &self,
                        &turn,
                        Some(&session.agent),
                        TurnError::new("internal", "the turn failed inside the server"),
                    )
                    .await;
                }
            }
            Slot::Stopped => {
                agent_loop::stop_unstarted(&self, &turn, Some(&session.agent), control.reason())
                    .await
            }
            Slot::Failed => {
                let reason =
                    TurnError::new("internal", "the turn could not start: the database failed");
                agent_loop::stop_unstarted(&self, &turn, Some(&session.agent), reason).await
            }
        }
        self.controls
            .lock()
            .expect("controls lock")
            .remove(&turn.id);
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
        let limit = self.concurrent_quota(&turn.tenant_id);
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

    /// Stops every queued and running turn of the tenant with `reason`, on whichever
    /// process runs it, and waits (up to `limit`) until their ends are durable, so their
    /// streams end with a terminal event.
    pub async fn stop_tenant_turns(&self, tenant: &TenantId, reason: TurnError, limit: Duration) {
        for control in self.tenant_controls(tenant) {
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

    pub(super) fn control(&self, turn: &TurnId) -> Option<Arc<TurnControl>> {
        self.controls
            .lock()
            .expect("controls lock")
            .get(turn)
            .cloned()
    }

    pub(super) fn tenant_controls(&self, tenant: &TenantId) -> Vec<Arc<TurnControl>> {
        self.controls
            .lock()
            .expect("controls lock")
            .values()
            .filter(|control| control.tenant == *tenant)
            .cloned()
            .collect()
    }

    pub(super) fn all_controls(&self) -> Vec<Arc<TurnControl>> {
        self.controls
            .lock()
            .expect("controls lock")
            .values()
            .cloned()
            .collect()
    }

    /// Turns this process has queued or running.
    pub(super) fn running_turns(&self) -> usize {
        self.controls.lock().expect("controls lock").len()
    }

    /// Resolves when the server stops.
    pub(super) async fn stopped(&self) {
        self.shutdown.cancelled().await
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
        match self.control(turn_id) {
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
            let controls = self.all_controls();
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

    /// Per-tenant quotas, and the counting of the rate ones.
    pub fn quotas(&self) -> &super::quotas::QuotaBook {
        &self.quotas
    }

    pub fn is_accepting(&self) -> bool {
        self.accepting.load(Ordering::Acquire)
    }
}

/// How often a turn whose tenant is at its limit on other processes asks again.
const SLOT_POLL_MIN: Duration = Duration::from_millis(20);
const SLOT_POLL_MAX: Duration = Duration::from_millis(500);

/// A turn's slots: its tenant's on this process (none for a turn taken from the queue,
/// whose claim counted its tenant's turns over every process) and one of this process's.
pub(super) type Permits = (Option<OwnedSemaphorePermit>, OwnedSemaphorePermit);

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

/// Where an admitted turn waits for its slot.
enum Start {
    /// On this process, which owns it (holding its slots already, or queued here).
    Here(Option<Permits>),
    /// On whichever process frees a slot first (PostgreSQL).
    Anywhere,
}

async fn acquire(tenant: Arc<Semaphore>, global: Arc<Semaphore>) -> Option<Permits> {
    let tenant = tenant.acquire_owned().await.ok()?;
    let global = global.acquire_owned().await.ok()?;
    Some((Some(tenant), global))
}

fn not_found(error: StoreError, what: &'static str) -> EngineError {
    match error {
        StoreError::NotFound => EngineError::NotFound(what),
        other => other.into(),
    }
}

/// The tokens a turn is expected to use, reserved of its tenant's daily token quota until it
/// ends: its system prompt and input read, and a reply as long as its input.
fn token_estimate(agent: &crate::agents::Agent, input: &[HistoryMessage]) -> u64 {
    let read = crate::providers::estimate_tokens(&agent.settings().system_prompt, input, &[]);
    let written = crate::providers::estimate_tokens("", input, &[]);
    (read + written).max(1)
}
