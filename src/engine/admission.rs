//! Admission: a turn a client asks for is validated against its session (agent, input,
//! pending calls, overrides, size), charged to its tenant's quotas, given its place (a slot
//! here, this process's queue, or the shared queue) and recorded in one transaction. A retry
//! with the same idempotency key gets the earlier turn.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::error::{EngineError, InputError, not_found};
use super::histories::Snapshot;
use super::input::{InputMessage, check_input};
use super::request::{Permission, RunPart, StartedTurn, TurnRequest};
use super::runner::Engine;
use super::scheduler::{Permits, check_tenant_queue, concurrent_quota};
use crate::model::{
    HistoryMessage, Quota, Run, RunStatus, SessionId, TenantId, Turn, TurnId, json_len,
};
use crate::store::{AdmissionLimits, Backend, Refusal, RunLink, StoreError};

mod checks;
#[cfg(test)]
mod tests;

impl Engine {
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
                Err(
                    EngineError::Store(StoreError::Stale)
                    | EngineError::Invalid(_)
                    | EngineError::AwaitingInput { .. },
                ) => {
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
        if let Some(idempotency) = &request.idempotency
            && let Some(earlier) = self.earlier_turn(tenant, session_id, idempotency).await?
        {
            return Ok(StartedTurn::replay(earlier));
        }
        let agent = self
            .agent_of(&session)
            .await?
            .ok_or(EngineError::AgentUnavailable)?;
        // The input schema first: a part of a type the agent takes nowhere is that, before
        // it is an image the agent cannot read.
        for (i, message) in request.messages.iter().enumerate() {
            if let InputMessage::User { content } = message
                && let Some(fault) = agent.input_body_fault(content)
            {
                return Err(EngineError::InvalidInput(InputError::of_body(i, fault)));
            }
            if let InputMessage::User { content } | InputMessage::ToolResult { content, .. } =
                message
                && let Some(fault) = agent.content_fault(content)
            {
                return Err(EngineError::InvalidInput(InputError::of_body(i, fault)));
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
        let start = match self.scheduler.try_permits(tenant, self.quotas.of(tenant)) {
            Some(permits) => Start::Here(Some(permits)),
            None if self.store.backend() == Backend::Postgres => {
                let (tenant_queued, queued) = self.store.count_unclaimed_turns(tenant).await?;
                check_tenant_queue(self.quotas.of(tenant), tenant_queued.max(0) as u64)?;
                if queued >= self.settings.max_queued_turns as i64 {
                    return Err(EngineError::QueueFull);
                }
                Start::Anywhere
            }
            None => {
                let depth = self
                    .scheduler
                    .reserve_queue_slot(tenant, self.quotas.of(tenant))?;
                self.metrics.set_turn_queue_depth(depth);
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
            run_id,
            idempotency_key: request.idempotency.as_ref().map(|i| i.key.clone()),
            // Only a retry with the same key compares it.
            request_hash: request.idempotency.as_ref().map(|i| self.request_hash(i)),
            trace_parent: crate::traces::current_traceparent(),
            ..Turn::queued(id, *tenant, *session_id, request.stream)
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
                let depth = self.scheduler.release_queue_slot(tenant);
                self.metrics.set_turn_queue_depth(depth);
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
            // Holding this process's slots, the turn claims its tenant's slot over every
            // process in the same transaction (PostgreSQL), instead of one of its own later.
            start_within: matches!(start, Start::Here(Some(_)))
                .then(|| concurrent_quota(self.quotas.of(tenant))),
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
        let claimed = match inserted {
            Ok(admitted) => {
                // Its runner is this process: its first event follows the seq just read.
                if let (Start::Here(_), Some(last_seq)) = (&start, admitted.last_seq) {
                    self.writer.admitted(turn.id, last_seq);
                }
                admitted.started
            }
            Err(error) => {
                if let Start::Here(None) = start {
                    let depth = self.scheduler.release_queue_slot(tenant);
                    self.metrics.set_turn_queue_depth(depth);
                }
                return match error {
                    StoreError::Refused(Refusal::QueuedTurns(waiting)) => {
                        check_tenant_queue(self.quotas.of(tenant), waiting)?;
                        Err(EngineError::QueueFull)
                    }
                    StoreError::Refused(Refusal::Tokens { used, .. }) => {
                        Err(self.quotas.tokens_refusal(tenant, used))
                    }
                    StoreError::RunNotAwaiting => {
                        let status = match &run_id {
                            Some(id) => self.store.get_run_status(tenant, id).await?,
                            None => RunStatus::Completed,
                        };
                        Err(EngineError::RunNotAwaiting(status))
                    }
                    // Two requests with one key at the same moment: whichever index refused the
                    // second, it is a retry of the first, which is committed by now.
                    StoreError::Conflict(_) => match &request.idempotency {
                        Some(idempotency) => {
                            match self.earlier_turn(tenant, session_id, idempotency).await? {
                                Some(earlier) => Ok(StartedTurn::replay(earlier)),
                                None => Err(EngineError::SessionBusy),
                            }
                        }
                        None => Err(EngineError::SessionBusy),
                    },
                    StoreError::NotFound => Err(EngineError::NotFound("session")),
                    other => Err(other.into()),
                };
            }
        };
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
                let control = self.scheduler.register(&turn);
                self.spawn_turn(
                    turn.clone(),
                    session,
                    permissions,
                    permits,
                    claimed,
                    control,
                );
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
        Ok(StartedTurn {
            turn,
            live,
            replayed: false,
        })
    }
}

/// Where an admitted turn waits for its slot.
enum Start {
    /// On this process, which owns it (holding its slots already, or queued here).
    Here(Option<Permits>),
    /// On whichever process frees a slot first (PostgreSQL).
    Anywhere,
}

/// The tokens a turn is expected to use, reserved of its tenant's daily token quota until it
/// ends: its system prompt and input read, and a reply as long as its input.
fn token_estimate(agent: &crate::agents::Agent, input: &[HistoryMessage]) -> u64 {
    let read = crate::providers::estimate_tokens(&agent.settings().system_prompt, input, &[]);
    let written = crate::providers::estimate_tokens("", input, &[]);
    (read + written).max(1)
}
