//! Runs: a chain of turns answering one request of a protocol whose unit is bigger than a
//! turn (an ACP run, an A2A task). The engine owns them; the event writer keeps their
//! status with the events that change it, so reading a run's status is one row.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use super::turn::text_enum;
use super::{RunId, SessionId, StopReason, TenantId, TurnError, TurnId, TurnStatus};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub id: RunId,
    pub tenant_id: TenantId,
    pub session_id: SessionId,
    pub status: RunStatus,
    /// The run's turns, oldest first; the first one's id is written from the run's UUID.
    pub turns: Vec<TurnId>,
    /// When a client cancelled the run while it awaited answers, and the turn that
    /// answered its pending calls as cancelled (none for runs cancelled before that turn
    /// existed).
    pub cancelled_at: Option<DateTime<Utc>>,
    pub cancel_turn: Option<TurnId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Run {
    /// The turn that runs or ran last.
    pub fn last_turn(&self) -> &TurnId {
        self.turns.last().expect("a run has its first turn")
    }

    /// The id of a run started by `turn`: the same UUID.
    pub fn id_for(turn: &TurnId) -> RunId {
        RunId::from_uuid(turn.to_uuid())
    }
}

/// created → running ⇄ awaiting → completed | failed | cancelled | interrupted.
///
/// `created`: its first turn is queued. `running`: a turn of it is queued or running after
/// it started. `awaiting`: its last turn stopped on tool calls the client must answer.
/// A run awaiting calls that a turn outside it answered is `completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Created,
    Running,
    Awaiting,
    Completed,
    Failed,
    Cancelled,
    Interrupted,
}

impl RunStatus {
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            RunStatus::Created | RunStatus::Running | RunStatus::Awaiting
        )
    }

    /// The status a run takes when its turn stops.
    pub fn after_stop(reason: StopReason, error: Option<&TurnError>) -> RunStatus {
        match TurnStatus::after_stop(reason, error) {
            TurnStatus::Completed if reason == StopReason::ToolUse => RunStatus::Awaiting,
            TurnStatus::Cancelled => RunStatus::Cancelled,
            TurnStatus::Interrupted => RunStatus::Interrupted,
            TurnStatus::Failed => RunStatus::Failed,
            _ => RunStatus::Completed,
        }
    }
}

text_enum!(RunStatus {
    Created = "created",
    Running = "running",
    Awaiting = "awaiting",
    Completed = "completed",
    Failed = "failed",
    Cancelled = "cancelled",
    Interrupted = "interrupted",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turns_stop_decides_its_runs_status() {
        let cancelled = TurnError::new(TurnError::CANCELLED, "c");
        let interrupted = TurnError::new(TurnError::INTERRUPTED, "i");
        let failed = TurnError::new("provider_error", "p");
        let cases = [
            (StopReason::EndTurn, None, RunStatus::Completed),
            (StopReason::MaxTokens, None, RunStatus::Completed),
            (StopReason::ToolUse, None, RunStatus::Awaiting),
            (StopReason::Error, Some(&cancelled), RunStatus::Cancelled),
            (
                StopReason::Error,
                Some(&interrupted),
                RunStatus::Interrupted,
            ),
            (StopReason::Error, Some(&failed), RunStatus::Failed),
        ];
        for (reason, error, status) in cases {
            assert_eq!(RunStatus::after_stop(reason, error), status);
            assert_eq!(status.as_str().parse::<RunStatus>().unwrap(), status);
        }
        assert!(!RunStatus::Awaiting.is_terminal());
        assert!(RunStatus::Interrupted.is_terminal());
    }
}
