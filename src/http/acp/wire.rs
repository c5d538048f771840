//! ACP's objects as they go on the wire: every declared field present, nulls included, in
//! the reference's order, so strict clients (acp-sdk validates with pydantic) accept them.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// ACP timestamps: RFC 3339 in UTC with microseconds, as the reference writes them.
pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A `MessagePart`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = AcpPart)]
pub struct PartObject {
    pub name: Option<String>,
    pub content_type: String,
    pub content: Option<String>,
    pub content_encoding: &'static str,
    pub content_url: Option<String>,
    pub metadata: Option<PartMetadata>,
}

/// A part's `metadata`: trajectory metadata agentry writes, in the reference's key order,
/// or whatever a client sent.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = AcpPartMetadata)]
#[serde(untagged)]
pub enum PartMetadata {
    Trajectory(Trajectory),
    #[schema(value_type = Object)]
    Other(Value),
}

/// `TrajectoryMetadata`: every key present, nulls included, as the reference writes it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = AcpTrajectory)]
pub struct Trajectory {
    pub kind: &'static str,
    pub message: Option<String>,
    pub tool_name: Option<String>,
    pub tool_input: Option<Value>,
    pub tool_output: Option<Value>,
}

impl Trajectory {
    /// Thinking.
    pub fn message(message: impl Into<String>) -> Self {
        Self {
            message: Some(message.into()),
            ..Self::tool(None, None, None)
        }
    }

    /// A tool call (`tool_input`) or its result (`tool_output`).
    pub fn tool(name: Option<String>, input: Option<Value>, output: Option<Value>) -> Self {
        Self {
            kind: "trajectory",
            message: None,
            tool_name: name,
            tool_input: input,
            tool_output: output,
        }
    }
}

impl PartObject {
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            name: None,
            content_type: "text/plain".to_owned(),
            content: Some(content.into()),
            content_encoding: "plain",
            content_url: None,
            metadata: None,
        }
    }

    /// A JSON part (tool calls and results, await requests).
    pub fn json(name: Option<String>, value: &Value, metadata: Option<PartMetadata>) -> Self {
        Self {
            name,
            content_type: "application/json".to_owned(),
            content: Some(value.to_string()),
            content_encoding: "plain",
            content_url: None,
            metadata,
        }
    }
}

/// A `Message`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = AcpMessage)]
pub struct MessageObject {
    pub role: String,
    pub parts: Vec<PartObject>,
    pub created_at: Option<String>,
    pub completed_at: Option<String>,
}

/// `{code, message, data}`: the HTTP error body, `Run.error` and the error event's error.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = AcpError)]
pub struct ErrorObject {
    pub code: &'static str,
    pub message: String,
    pub data: Option<Value>,
}

/// A `MessageAwaitRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = AcpAwaitRequest)]
pub struct AwaitRequest {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub message: MessageObject,
}

/// A run's lifecycle: created → in-progress → awaiting | completed | failed | cancelled;
/// awaiting → in-progress (a resume) | cancelled. (The reference's `cancelling` never
/// shows: a cancel answers once the run has stopped.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = AcpRunStatus)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    Created,
    InProgress,
    Awaiting,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Created => "created",
            RunStatus::InProgress => "in-progress",
            RunStatus::Awaiting => "awaiting",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

impl From<crate::model::RunStatus> for RunStatus {
    /// The engine's status as ACP names it: an interrupted run failed.
    fn from(status: crate::model::RunStatus) -> Self {
        use crate::model::RunStatus as Engine;
        match status {
            Engine::Created => RunStatus::Created,
            Engine::Running => RunStatus::InProgress,
            Engine::Awaiting => RunStatus::Awaiting,
            Engine::Completed => RunStatus::Completed,
            Engine::Failed | Engine::Interrupted => RunStatus::Failed,
            Engine::Cancelled => RunStatus::Cancelled,
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `Run`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = AcpRun)]
pub struct RunObject {
    pub run_id: String,
    pub agent_name: String,
    pub session_id: String,
    pub status: RunStatus,
    pub await_request: Option<AwaitRequest>,
    pub output: Vec<MessageObject>,
    pub error: Option<ErrorObject>,
    pub created_at: String,
    pub finished_at: Option<String>,
}

/// The event types of the reference's closed `Event` union that agentry sends (its
/// `error` event is never sent: a failure is `run.failed`, as the reference does).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(as = AcpEvent)]
#[serde(tag = "type")]
pub enum EventObject {
    #[serde(rename = "run.created")]
    RunCreated { run: RunObject },
    #[serde(rename = "run.in-progress")]
    RunInProgress { run: RunObject },
    #[serde(rename = "run.awaiting")]
    RunAwaiting { run: RunObject },
    #[serde(rename = "run.completed")]
    RunCompleted { run: RunObject },
    #[serde(rename = "run.failed")]
    RunFailed { run: RunObject },
    #[serde(rename = "run.cancelled")]
    RunCancelled { run: RunObject },
    #[serde(rename = "message.created")]
    MessageCreated { message: MessageObject },
    #[serde(rename = "message.part")]
    MessagePart { part: PartObject },
    #[serde(rename = "message.completed")]
    MessageCompleted { message: MessageObject },
    #[serde(rename = "generic")]
    Generic { generic: Value },
}

impl EventObject {
    /// The event announcing `run` in its status.
    pub fn for_run(run: RunObject) -> Self {
        match run.status {
            RunStatus::Created => EventObject::RunCreated { run },
            RunStatus::InProgress => EventObject::RunInProgress { run },
            RunStatus::Awaiting => EventObject::RunAwaiting { run },
            RunStatus::Completed => EventObject::RunCompleted { run },
            RunStatus::Failed => EventObject::RunFailed { run },
            RunStatus::Cancelled => EventObject::RunCancelled { run },
        }
    }

    #[cfg(test)]
    pub fn kind(&self) -> &'static str {
        match self {
            EventObject::RunCreated { .. } => "run.created",
            EventObject::RunInProgress { .. } => "run.in-progress",
            EventObject::RunAwaiting { .. } => "run.awaiting",
            EventObject::RunCompleted { .. } => "run.completed",
            EventObject::RunFailed { .. } => "run.failed",
            EventObject::RunCancelled { .. } => "run.cancelled",
            EventObject::MessageCreated { .. } => "message.created",
            EventObject::MessagePart { .. } => "message.part",
            EventObject::MessageCompleted { .. } => "message.completed",
            EventObject::Generic { .. } => "generic",
        }
    }
}

/// An `AgentManifest`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AcpAgentManifest)]
pub struct AgentManifest {
    pub name: String,
    pub description: String,
    pub metadata: AgentMetadata,
    pub input_content_types: Vec<String>,
    pub output_content_types: Vec<String>,
}

/// `GET /acp/agents`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AcpAgentList)]
pub struct AgentList {
    pub agents: Vec<AgentManifest>,
}

/// A manifest's `Metadata`, keys in the reference's order; agentry fills `annotations`.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
#[schema(as = AcpAgentMetadata)]
pub struct AgentMetadata {
    pub annotations: Option<Annotations>,
    pub documentation: Option<Value>,
    pub license: Option<Value>,
    pub programming_language: Option<Value>,
    pub natural_languages: Option<Value>,
    pub framework: Option<Value>,
    pub capabilities: Option<Value>,
    pub domains: Option<Value>,
    pub tags: Option<Value>,
    pub created_at: Option<Value>,
    pub updated_at: Option<Value>,
    pub author: Option<Value>,
    pub contributors: Option<Value>,
    pub links: Option<Value>,
    pub dependencies: Option<Value>,
    pub recommended_models: Option<Value>,
}

/// `metadata.annotations`: agentry's own under `agentry`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AcpAnnotations)]
pub struct Annotations {
    pub agentry: AgentryAnnotation,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AcpAgentryAnnotation)]
pub struct AgentryAnnotation {
    pub title: Option<String>,
    pub version: String,
    pub input_schema: Vec<SchemaPart>,
    pub output_schema: Vec<SchemaPart>,
}

/// One part of a declared message-body schema.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AcpSchemaPart)]
pub struct SchemaPart {
    pub name: Option<String>,
    pub content_type: String,
    pub required: bool,
}

/// `GET /acp/runs/{id}/events`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AcpEventList)]
pub struct EventList {
    pub events: Vec<EventObject>,
}

/// A `Session` descriptor.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = AcpSession)]
pub struct SessionObject {
    pub id: String,
    pub history: Vec<String>,
    pub state: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_events_serialize_as_the_reference_does() {
        assert_eq!(
            serde_json::to_string(&PartObject::text("Howdy!")).unwrap(),
            r#"{"name":null,"content_type":"text/plain","content":"Howdy!","content_encoding":"plain","content_url":null,"metadata":null}"#
        );
        let event = EventObject::MessagePart {
            part: PartObject::text("x"),
        };
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(value["type"], "message.part");
        assert_eq!(event.kind(), "message.part");
    }
}
