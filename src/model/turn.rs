//! Turns: one request to an agent and everything it produced, with an explicit lifecycle.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{RunId, SessionId, TenantId, TurnId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub id: TurnId,
    pub tenant_id: TenantId,
    pub session_id: SessionId,
    /// The run it belongs to, if a protocol asked for one.
    pub run_id: Option<RunId>,
    pub status: TurnStatus,
    pub stream: StreamMode,
    pub stop_reason: Option<StopReason>,
    pub error: Option<TurnError>,
    pub usage: Usage,
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
    pub first_seq: Option<i64>,
    pub last_seq: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The W3C `traceparent` of the span that admitted the turn, when traces are exported.
    pub trace_parent: Option<String>,
}

impl Turn {
    /// A turn as admitted: queued, in no run, nothing streamed or used yet, created now.
    pub fn queued(
        id: TurnId,
        tenant_id: TenantId,
        session_id: SessionId,
        stream: StreamMode,
    ) -> Turn {
        Turn {
            id,
            tenant_id,
            session_id,
            run_id: None,
            status: TurnStatus::Queued,
            stream,
            stop_reason: None,
            error: None,
            usage: Usage::default(),
            idempotency_key: None,
            request_hash: None,
            first_seq: None,
            last_seq: None,
            created_at: super::now(),
            started_at: None,
            finished_at: None,
            trace_parent: None,
        }
    }
}

/// queued → running → completed | failed | cancelled | interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
    Interrupted,
}

impl TurnStatus {
    pub fn is_terminal(self) -> bool {
        !matches!(self, TurnStatus::Queued | TurnStatus::Running)
    }

    /// The terminal status a turn ends in.
    pub fn after_stop(reason: StopReason, error: Option<&TurnError>) -> TurnStatus {
        match (reason, error.map(|e| e.code.as_str())) {
            (StopReason::Error, Some(TurnError::CANCELLED)) => TurnStatus::Cancelled,
            (StopReason::Error, Some(TurnError::INTERRUPTED)) => TurnStatus::Interrupted,
            (StopReason::Error, _) => TurnStatus::Failed,
            _ => TurnStatus::Completed,
        }
    }
}

/// How the client asked to receive the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StreamMode {
    #[default]
    None,
    Delta,
    Message,
}

/// Read from its name alone, so that anything else is refused with the names it may take
/// (`"stream": true` → `expected one of "none", "delta", "message"`).
impl<'de> Deserialize<'de> for StreamMode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names;

        impl serde::de::Visitor<'_> for Names {
            type Value = StreamMode;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"one of "none", "delta", "message""#)
            }

            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<StreamMode, E> {
                match name {
                    "none" => Ok(StreamMode::None),
                    "delta" => Ok(StreamMode::Delta),
                    "message" => Ok(StreamMode::Message),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }

        deserializer.deserialize_str(Names)
    }
}

/// Why a turn stopped, as AAP names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Refusal,
    Error,
}

/// Why a turn failed, was cancelled or was interrupted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TurnError {
    pub code: String,
    pub message: String,
}

impl TurnError {
    pub const CANCELLED: &'static str = "cancelled";
    pub const INTERRUPTED: &'static str = "interrupted";
    /// The agent's `max_steps` ended the turn while the model kept calling tools.
    pub const MAX_STEPS: &'static str = "max_steps";

    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// What a turn consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub tool_calls: u64,
    #[serde(default)]
    pub wall_ms: u64,
}

macro_rules! text_enum {
    ($ty:ty { $($variant:ident = $text:literal),+ $(,)? }) => {
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    other => Err(format!("unknown {} `{other}`", stringify!($ty))),
                }
            }
        }
    };
}

pub(super) use text_enum;

text_enum!(TurnStatus {
    Queued = "queued",
    Running = "running",
    Completed = "completed",
    Failed = "failed",
    Cancelled = "cancelled",
    Interrupted = "interrupted",
});
text_enum!(StreamMode {
    None = "none",
    Delta = "delta",
    Message = "message",
});
text_enum!(StopReason {
    EndTurn = "end_turn",
    ToolUse = "tool_use",
    MaxTokens = "max_tokens",
    Refusal = "refusal",
    Error = "error",
});
