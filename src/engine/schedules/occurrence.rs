//! Starting one claimed occurrence through the engine's turn admission, and recording how
//! it ended. The turn's idempotency key is the occurrence's id, and a new session is
//! recorded on the occurrence before its turn starts: an occurrence taken over from a
//! process that stopped half way still starts one turn.

use std::sync::Arc;

use futures_util::StreamExt;

use super::Schedules;
use crate::engine::{EngineError, Follow, Idempotency, InputMessage, TurnRequest};
use crate::model::{
    EventData, OccurrenceReason, Overlap, Schedule, SessionId, SessionPolicy, StreamMode, TurnId,
    TurnStatus, WebhookEvent,
};
use crate::store::{Deltas, OpenOccurrence, ScheduleMessage, StoreError};

/// Why a claimed occurrence does not start a turn now.
enum NotNow {
    /// It is recorded as not started, for this reason.
    Refused(OccurrenceReason, Option<String>),
    /// It waits behind the schedule's running occurrence.
    Wait,
    /// It stays pending: a later pass (or another process) starts it.
    Later(String),
}

impl Schedules {
    /// Starts a claimed (pending) occurrence, or records why it does not start.
    pub(super) async fn start_occurrence(
        self: &Arc<Self>,
        schedule: &Schedule,
        open: &OpenOccurrence,
    ) {
        let outcome = self.try_start(schedule, open).await;
        let now = crate::model::now();
        let recorded = match outcome {
            Ok((session, turn)) => {
                let message = self.message(
                    WebhookEvent::ScheduleRunStarted,
                    schedule,
                    open,
                    serde_json::json!({"status": "started", "session_id": session, "turn_id": turn}),
                );
                let started = self
                    .store
                    .mark_occurrence_started(&open.tenant, &open.id, &session, &turn, &message, now)
                    .await;
                if let Ok(true) = started {
                    tracing::info!(schedule_id = %schedule.id, occurrence_id = %open.id, turn_id = %turn, planned_at = %open.planned_at, "scheduled occurrence started");
                    self.watch(open.clone(), session, turn);
                }
                started.map(|_| ())
            }
            Err(NotNow::Wait) => {
                match self
                    .store
                    .mark_occurrence_waiting(
                        &open.tenant,
                        &open.schedule,
                        &open.id,
                        self.settings.max_waiting,
                    )
                    .await
                {
                    Ok(true) => Ok(()),
                    Ok(false) => {
                        self.refuse(schedule, open, OccurrenceReason::QueueFull, None)
                            .await
                    }
                    Err(error) => Err(error),
                }
            }
            Err(NotNow::Refused(reason, detail)) => {
                self.refuse(schedule, open, reason, detail).await
            }
            Err(NotNow::Later(why)) => {
                tracing::warn!(schedule_id = %schedule.id, occurrence_id = %open.id, why, "a scheduled occurrence stays pending");
                Ok(())
            }
        };
        if let Err(error) = recorded {
            tracing::warn!(%error, occurrence_id = %open.id, "cannot record a scheduled occurrence");
        }
        self.engine.webhook_wake.notify_one();
    }

    async fn refuse(
        &self,
        schedule: &Schedule,
        open: &OpenOccurrence,
        reason: OccurrenceReason,
        detail: Option<String>,
    ) -> Result<(), StoreError> {
        // Skipping is the policy working; a refusal is a failure the tenant is told of.
        let failed = !matches!(reason, OccurrenceReason::Skipped);
        let message = failed.then(|| {
            self.message(
                WebhookEvent::ScheduleRunFailed,
                schedule,
                open,
                serde_json::json!({"status": "not_started", "reason": reason, "message": detail}),
            )
        });
        self.store
            .mark_occurrence_not_started(
                &open.tenant,
                &open.id,
                reason,
                detail.as_deref(),
                message.as_ref(),
                crate::model::now(),
            )
            .await?;
        tracing::info!(schedule_id = %schedule.id, occurrence_id = %open.id, reason = %reason, "scheduled occurrence not started");
        Ok(())
    }

    async fn try_start(
        &self,
        schedule: &Schedule,
        open: &OpenOccurrence,
    ) -> Result<(SessionId, TurnId), NotNow> {
        let store_error = |e: StoreError| NotNow::Later(e.to_string());
        let gone = match self
            .engine
            .agent_for_new_session(&schedule.tenant_id, &schedule.agent, schedule.agent_version)
            .await
        {
            Ok(_) => None,
            Err(EngineError::Invalid(refused)) => Some(refused.message),
            Err(other) => return Err(NotNow::Later(other.to_string())),
        };
        if let Some(why) = gone {
            if let Err(error) = self
                .store
                .pause_agent_schedules(
                    &schedule.tenant_id,
                    &schedule.agent,
                    "agent_missing",
                    crate::model::now(),
                )
                .await
            {
                tracing::warn!(%error, "cannot pause the schedules of a missing agent");
            }
            return Err(NotNow::Refused(OccurrenceReason::AgentMissing, Some(why)));
        }
        // A turn the taken-over occurrence started already: only its record is missing.
        let running = self
            .store
            .schedule_has_active_turn(&schedule.tenant_id, &schedule.id)
            .await
            .map_err(store_error)?;
        let waiting = schedule.overlap == Overlap::Queue
            && self
                .store
                .schedule_has_waiting(&schedule.tenant_id, &schedule.id, &open.id)
                .await
                .map_err(store_error)?;
        if running || waiting {
            return Err(match schedule.overlap {
                Overlap::Skip => NotNow::Refused(
                    OccurrenceReason::Skipped,
                    Some("the previous occurrence was still running".into()),
                ),
                Overlap::Queue => NotNow::Wait,
            });
        }
        let session = match schedule.session_policy {
            SessionPolicy::Fixed => schedule.session_id.ok_or_else(|| {
                NotNow::Refused(
                    OccurrenceReason::Error,
                    Some("the schedule has no session".into()),
                )
            })?,
            SessionPolicy::New => match open.session {
                Some(session) => session,
                None => {
                    let config = crate::agents::SessionConfigRequest {
                        server_tools: schedule.server_tools.clone(),
                        options: schedule.options.clone(),
                        client_tools: None,
                    };
                    let created = self
                        .engine
                        .create_session_on_version(
                            &schedule.tenant_id,
                            &schedule.agent,
                            schedule.agent_version,
                            config,
                            Vec::new(),
                        )
                        .await
                        .map_err(|e| refusal(e, schedule.overlap))?;
                    self.store
                        .set_occurrence_session(&schedule.tenant_id, &open.id, &created.id)
                        .await
                        .map_err(store_error)?
                }
            },
        };
        let request = TurnRequest {
            agent_name: None,
            agent: Default::default(),
            messages: vec![InputMessage::User {
                content: schedule.input.clone(),
            }],
            stream: StreamMode::None,
            idempotency: Some(Idempotency {
                key: format!("schedule:{}", open.id),
                fingerprint: open.id.to_string(),
            }),
        };
        let started = self
            .engine
            .start_turn(&schedule.tenant_id, &session, request)
            .await
            .map_err(|e| refusal(e, schedule.overlap))?;
        Ok((session, started.turn.id))
    }

    /// Follows a started occurrence's turn to its end, then records it.
    fn watch(self: &Arc<Self>, open: OpenOccurrence, session: SessionId, turn: TurnId) {
        let this = self.clone();
        self.tracker.spawn(async move {
            let events = this.engine.follow(Follow {
                tenant: open.tenant,
                session,
                turn: Some(turn),
                after: 0,
                deltas: Deltas::Merged,
            });
            let mut events = std::pin::pin!(events);
            loop {
                tokio::select! {
                    event = events.next() => match event {
                        Some(Ok(event)) if matches!(event.data, EventData::TurnStop { .. }) => break,
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    },
                    _ = this.stop.cancelled() => return,
                }
            }
            this.finish_ended().await;
            this.wake.notify_one();
        });
    }

    /// Records the end of every started occurrence whose turn has ended (once, whichever
    /// process sees it first), telling the tenant's webhooks.
    pub(super) async fn finish_ended(&self) {
        let ended = match self.store.ended_occurrences().await {
            Ok(ended) => ended,
            Err(error) => {
                tracing::warn!(%error, "cannot read ended scheduled occurrences");
                return;
            }
        };
        let mut queued = false;
        for (open, status) in ended {
            let schedule = match self
                .store
                .get_schedule_of(&open.tenant, &open.schedule)
                .await
            {
                Ok(Some(schedule)) => schedule,
                _ => continue,
            };
            let event = match status {
                TurnStatus::Completed => WebhookEvent::ScheduleRunFinished,
                _ => WebhookEvent::ScheduleRunFailed,
            };
            let message = self.message(
                event,
                &schedule,
                &open,
                serde_json::json!({
                    "status": "finished",
                    "session_id": open.session,
                    "turn_id": open.turn,
                    "turn_status": status.as_str(),
                }),
            );
            match self
                .store
                .finish_occurrence(
                    &open.tenant,
                    &open.id,
                    status,
                    &message,
                    crate::model::now(),
                )
                .await
            {
                Ok(done) => queued |= done,
                Err(error) => tracing::warn!(%error, "cannot record a scheduled occurrence's end"),
            }
        }
        if queued {
            self.engine.webhook_wake.notify_one();
        }
    }

    /// A webhook message about an occurrence: its schedule, its time, and `fields`.
    fn message(
        &self,
        event: WebhookEvent,
        schedule: &Schedule,
        open: &OpenOccurrence,
        fields: serde_json::Value,
    ) -> ScheduleMessage {
        let mut data = serde_json::json!({
            "tenant_id": schedule.tenant_id,
            "schedule_id": schedule.id,
            "occurrence_id": open.id,
            "kind": open.kind,
            "planned_at": open.planned_at,
        });
        if let (Some(data), serde_json::Value::Object(fields)) = (data.as_object_mut(), fields) {
            data.extend(fields.into_iter().filter(|(_, v)| !v.is_null()));
        }
        ScheduleMessage {
            event,
            agent: schedule.agent.clone(),
            data: data.to_string(),
        }
    }
}

/// What an engine refusal makes of an occurrence.
fn refusal(error: EngineError, overlap: Overlap) -> NotNow {
    match error {
        EngineError::QuotaExceeded(exceeded) => {
            NotNow::Refused(OccurrenceReason::Quota, Some(exceeded.to_string()))
        }
        EngineError::QueueFull => NotNow::Refused(
            OccurrenceReason::Quota,
            Some(EngineError::QueueFull.to_string()),
        ),
        EngineError::SessionBusy => match overlap {
            Overlap::Skip => NotNow::Refused(
                OccurrenceReason::Skipped,
                Some("the schedule's session was running another turn".into()),
            ),
            Overlap::Queue => NotNow::Wait,
        },
        EngineError::AgentUnavailable => NotNow::Refused(
            OccurrenceReason::AgentMissing,
            Some(EngineError::AgentUnavailable.to_string()),
        ),
        EngineError::ShuttingDown => NotNow::Later(EngineError::ShuttingDown.to_string()),
        EngineError::Store(store) if store.is_outage() => NotNow::Later(store.to_string()),
        EngineError::NotFound(what) => NotNow::Refused(
            OccurrenceReason::Error,
            Some(format!("the schedule's {what} was not found")),
        ),
        EngineError::Store(_) | EngineError::Sealed(_) => {
            NotNow::Later("the turn could not be recorded".into())
        }
        other => NotNow::Refused(OccurrenceReason::Error, Some(other.to_string())),
    }
}
