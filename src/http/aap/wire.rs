//! AAP v3 request and response bodies, with the protocol's field names.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::config::OptionKind;
use crate::engine::SessionView;
use crate::model::{HistoryMessage, ServerToolRef, ToolSpec};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSessionRequest {
    pub agent: AgentConfigIn,
    /// History the session starts with.
    #[serde(default)]
    #[schema(value_type = Option<Vec<HistoryMessage>>)]
    pub messages: Option<Vec<Value>>,
    #[serde(default)]
    pub tools: Option<Vec<ToolSpec>>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentConfigIn {
    pub name: String,
    /// A tenant agent's version to run (a draft may be tried so); default: the published
    /// one (an agentry extension).
    #[serde(default)]
    pub version: Option<i64>,
    #[serde(default)]
    pub tools: Option<Vec<ServerToolRef>>,
    #[serde(default)]
    pub options: Option<BTreeMap<String, String>>,
}

/// `PATCH /sessions/{id}`: the tenant agent's version the session runs from now on.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSessionRequest {
    pub agent: AgentVersionIn,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentVersionIn {
    pub version: i64,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionResponse {
    pub session_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub agent: AgentConfigOut,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentConfigOut {
    pub name: String,
    /// The tenant agent's version the session runs (an agentry extension; absent for a
    /// configured agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    pub tools: Vec<ServerToolRef>,
    pub options: BTreeMap<String, String>,
}

impl From<SessionView> for SessionInfo {
    fn from(view: SessionView) -> Self {
        SessionInfo {
            session_id: view.id.to_string(),
            agent: AgentConfigOut {
                name: view.agent,
                version: view.agent_version,
                tools: view.server_tools,
                options: view.options,
            },
            tools: view.client_tools,
            created_at: view.created_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryResponse {
    pub history: BTreeMap<&'static str, Vec<HistoryMessage>>,
    /// The cursor of the next page, when more follow (an agentry extension).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// History as AAP can carry it: a `part` block (from another protocol face) becomes a text
/// block that describes the part and links to its content.
pub fn aap_history(messages: Vec<HistoryMessage>) -> Vec<HistoryMessage> {
    use crate::model::{Content, ContentBlock};
    let render = |content: Content| match content {
        Content::Blocks(blocks) => Content::Blocks(
            blocks
                .into_iter()
                .map(|block| match block {
                    ContentBlock::Part(part) => ContentBlock::Text {
                        text: part.describe(),
                    },
                    other => other,
                })
                .collect(),
        ),
        text => text,
    };
    messages
        .into_iter()
        .map(|message| match message {
            HistoryMessage::User { content } => HistoryMessage::User {
                content: render(content),
            },
            HistoryMessage::Assistant { content } => HistoryMessage::Assistant {
                content: render(content),
            },
            HistoryMessage::Tool {
                tool_call_id,
                content,
            } => HistoryMessage::Tool {
                tool_call_id,
                content: render(content),
            },
            system => system,
        })
        .collect()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MetaResponse {
    pub version: u32,
    pub agents: Vec<AgentInfo>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<AgentOption>,
    pub capabilities: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentOption {
    #[serde(rename = "type")]
    pub kind: OptionKind,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    pub default: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PostTurnRequest {
    #[serde(default)]
    pub agent: Option<AgentOverride>,
    #[serde(default)]
    pub stream: Option<crate::model::StreamMode>,
    #[schema(value_type = Vec<crate::http::openapi::schemas::InputMessage>)]
    pub messages: Vec<Value>,
    #[serde(default)]
    pub tools: Option<Vec<ToolSpec>>,
}

/// `agent` on a turn: the name may be repeated but not changed.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentOverride {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub tools: Option<Vec<ServerToolRef>>,
    #[serde(default)]
    pub options: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostTurnResponse {
    pub stop_reason: crate::model::StopReason,
    pub messages: Vec<HistoryMessage>,
    /// Why a turn that stopped with `error` failed, was cancelled or was interrupted (an
    /// agentry extension, as on the SSE `turn_stop`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::model::TurnError>,
}

/// A turn's record (an agentry extension of AAP).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnInfo {
    pub turn_id: String,
    pub session_id: String,
    pub status: crate::model::TurnStatus,
    pub stream: crate::model::StreamMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<crate::model::StopReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::model::TurnError>,
    pub usage: crate::model::Usage,
    pub created_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<i64>,
    /// The OpenTelemetry trace the turn belongs to (32 hex digits), when traces are
    /// exported (see README "Tracing").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

impl From<crate::model::Turn> for TurnInfo {
    fn from(turn: crate::model::Turn) -> Self {
        TurnInfo {
            turn_id: turn.id.to_string(),
            session_id: turn.session_id.to_string(),
            status: turn.status,
            stream: turn.stream,
            stop_reason: turn.stop_reason,
            error: turn.error,
            usage: turn.usage,
            created_at: turn.created_at,
            started_at: turn.started_at,
            finished_at: turn.finished_at,
            first_seq: turn.first_seq,
            last_seq: turn.last_seq,
            trace_id: turn
                .trace_parent
                .as_deref()
                .and_then(crate::traces::trace_id_of),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TurnList {
    pub turns: Vec<TurnInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Parses one message of a turn request: `user`, `tool` or `tool_permission`.
pub fn parse_input_message(
    value: &Value,
    path: &str,
) -> Result<crate::engine::InputMessage, crate::model::FieldError> {
    use crate::engine::InputMessage;
    use crate::model::FieldError;
    match value.get("role").and_then(Value::as_str) {
        Some("tool_permission") => {
            let id = value
                .get("toolCallId")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .ok_or_else(|| {
                    FieldError::new(format!("{path}.toolCallId"), "must be a non-empty string")
                })?;
            let granted = value
                .get("granted")
                .and_then(Value::as_bool)
                .ok_or_else(|| {
                    FieldError::new(format!("{path}.granted"), "must be true or false")
                })?;
            let reason = match value.get("reason") {
                None | Some(Value::Null) => None,
                Some(Value::String(reason)) => Some(reason.clone()),
                Some(_) => {
                    return Err(FieldError::new(
                        format!("{path}.reason"),
                        "must be a string",
                    ));
                }
            };
            Ok(InputMessage::ToolPermission {
                tool_call_id: id.to_owned(),
                granted,
                reason,
            })
        }
        Some("user") | Some("tool") | None => match HistoryMessage::parse(value, path)? {
            HistoryMessage::User { content } => Ok(InputMessage::User { content }),
            HistoryMessage::Tool {
                tool_call_id,
                content,
            } => Ok(InputMessage::ToolResult {
                tool_call_id,
                content,
            }),
            _ => unreachable!("the role was user or tool"),
        },
        Some(other) => Err(FieldError::new(
            format!("{path}.role"),
            format!(
                "`{other}` messages cannot start a turn; send user, tool or tool_permission messages"
            ),
        )),
    }
}
