//! Webhooks: the endpoints a tenant registers (for all its runs and turns, or for one run),
//! the events they receive, and the deliveries of each event's message to each endpoint.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::turn::text_enum;
use super::{EndpointId, MessageId, RunId, StopReason, TenantId, TurnError, TurnStatus};

/// What an endpoint can be told about. Each has a bit in an endpoint's event mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookEvent {
    TurnCompleted,
    TurnFailed,
    TurnCancelled,
    TurnInterrupted,
    /// The turn stopped on tool calls the client runs or on permission requests.
    TurnAwaitingInput,
    /// A run took a new status when its turn stopped.
    RunStatusChanged,
    /// A schedule's occurrence started its turn.
    ScheduleRunStarted,
    /// A schedule's occurrence's turn ended well (completed, or awaiting input).
    ScheduleRunFinished,
    /// A schedule's occurrence failed: its turn failed, was cancelled or interrupted, or
    /// was refused (a quota, its agent gone, an error).
    ScheduleRunFailed,
}

impl WebhookEvent {
    pub const ALL: [WebhookEvent; 9] = [
        WebhookEvent::TurnCompleted,
        WebhookEvent::TurnFailed,
        WebhookEvent::TurnCancelled,
        WebhookEvent::TurnInterrupted,
        WebhookEvent::TurnAwaitingInput,
        WebhookEvent::RunStatusChanged,
        WebhookEvent::ScheduleRunStarted,
        WebhookEvent::ScheduleRunFinished,
        WebhookEvent::ScheduleRunFailed,
    ];

    pub fn bit(self) -> i64 {
        1 << (self as u32)
    }

    /// The mask of every event type.
    pub fn all_mask() -> i64 {
        Self::ALL.iter().fold(0, |mask, event| mask | event.bit())
    }

    /// The event types of a mask, in their order.
    pub fn of_mask(mask: i64) -> Vec<WebhookEvent> {
        Self::ALL
            .into_iter()
            .filter(|event| mask & event.bit() != 0)
            .collect()
    }

    /// The event a turn's stop is.
    pub fn of_stop(reason: StopReason, error: Option<&TurnError>) -> WebhookEvent {
        match TurnStatus::after_stop(reason, error) {
            TurnStatus::Completed if reason == StopReason::ToolUse => {
                WebhookEvent::TurnAwaitingInput
            }
            TurnStatus::Failed => WebhookEvent::TurnFailed,
            TurnStatus::Cancelled => WebhookEvent::TurnCancelled,
            TurnStatus::Interrupted => WebhookEvent::TurnInterrupted,
            _ => WebhookEvent::TurnCompleted,
        }
    }
}

text_enum!(WebhookEvent {
    TurnCompleted = "turn.completed",
    TurnFailed = "turn.failed",
    TurnCancelled = "turn.cancelled",
    TurnInterrupted = "turn.interrupted",
    TurnAwaitingInput = "turn.awaiting_input",
    RunStatusChanged = "run.status_changed",
    ScheduleRunStarted = "schedule.run.started",
    ScheduleRunFinished = "schedule.run.finished",
    ScheduleRunFailed = "schedule.run.failed",
});

impl Serialize for WebhookEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How a delivery proves where it comes from: Standard Webhooks signatures made with the
/// endpoint's secret, or the secret as a bearer token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryAuth {
    Signature,
    Bearer,
}

text_enum!(DeliveryAuth {
    Signature = "signature",
    Bearer = "bearer",
});

/// pending → delivered | failed; a replay makes either pending again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

text_enum!(DeliveryStatus {
    Pending = "pending",
    Delivered = "delivered",
    Failed = "failed",
});

/// A registered endpoint, as a tenant sees it (its secrets are never part of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub id: EndpointId,
    pub tenant_id: TenantId,
    pub url: String,
    pub description: Option<String>,
    pub event_types: Vec<WebhookEvent>,
    pub auth: DeliveryAuth,
    pub enabled: bool,
    /// Why it was disabled, when it was disabled by failures.
    pub disabled_reason: Option<String>,
    /// Until when deliveries are also signed with the secret a rotation replaced.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    /// The run it belongs to, when it is a run's own endpoint (told only of that run's
    /// status changes); `None` for the tenant's endpoints.
    pub run_id: Option<RunId>,
    /// The payload format a run's endpoint is sent in.
    pub format: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A run's own endpoint, as its client may read it back: never its token or credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunEndpoint {
    pub id: EndpointId,
    pub run: RunId,
    /// The client's name for it, unique within the run.
    pub key: String,
    pub url: String,
    pub authorization_scheme: Option<String>,
    pub format: String,
    pub created_at: DateTime<Utc>,
}

/// One message to one endpoint, with its attempts so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebhookDelivery {
    /// The message id: the `webhook-id` header of every attempt.
    pub id: MessageId,
    pub endpoint_id: EndpointId,
    pub event_type: String,
    pub status: DeliveryStatus,
    pub attempts: i64,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    /// The HTTP status of the last attempt, when it got one.
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turns_stop_names_its_event_and_masks_round_trip() {
        let cancelled = TurnError::new(TurnError::CANCELLED, "c");
        assert_eq!(
            WebhookEvent::of_stop(StopReason::ToolUse, None),
            WebhookEvent::TurnAwaitingInput
        );
        assert_eq!(
            WebhookEvent::of_stop(StopReason::EndTurn, None),
            WebhookEvent::TurnCompleted
        );
        assert_eq!(
            WebhookEvent::of_stop(StopReason::Error, Some(&cancelled)),
            WebhookEvent::TurnCancelled
        );
        let mask = WebhookEvent::TurnFailed.bit() | WebhookEvent::RunStatusChanged.bit();
        assert_eq!(
            WebhookEvent::of_mask(mask),
            [WebhookEvent::TurnFailed, WebhookEvent::RunStatusChanged]
        );
        assert_eq!(
            WebhookEvent::of_mask(WebhookEvent::all_mask()),
            WebhookEvent::ALL
        );
        for event in WebhookEvent::ALL {
            assert_eq!(event.as_str().parse::<WebhookEvent>().unwrap(), event);
        }
    }
}
