//! A2A's objects as this face writes them, and their JSON in each protocol version: 1.0's
//! ProtoJSON (`TASK_STATE_WORKING`, `ROLE_AGENT`, parts by field, stream events wrapped as
//! `{"statusUpdate": …}`) or 0.3's (`working`, `agent`, `kind` on every object, bare
//! events with `final` on the last status).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use super::version::Version;

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Submitted,
        State::Working,
        State::InputRequired,
        State::Completed,
        State::Failed,
        State::Canceled,
    ];

    pub fn name(self, version: Version) -> &'static str {
        if version.proto_json() {
            return match self {
                State::Submitted => "TASK_STATE_SUBMITTED",
                State::Working => "TASK_STATE_WORKING",
                State::InputRequired => "TASK_STATE_INPUT_REQUIRED",
                State::Completed => "TASK_STATE_COMPLETED",
                State::Failed => "TASK_STATE_FAILED",
                State::Canceled => "TASK_STATE_CANCELED",
            };
        }
        match self {
            State::Submitted => "submitted",
            State::Working => "working",
            State::InputRequired => "input-required",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Canceled => "canceled",
        }
    }

    /// A state named in either version's spelling.
    pub fn parse(name: &str) -> Option<State> {
        State::ALL
            .into_iter()
            .find(|s| s.name(Version::V1) == name || s.name(Version::V03) == name)
    }

    /// Whether the task's streams end here: terminal, or waiting for the client.
    pub fn ends_stream(self) -> bool {
        !matches!(self, State::Submitted | State::Working)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

impl Role {
    fn name(self, version: Version) -> &'static str {
        match (self, version.proto_json()) {
            (Role::User, true) => "ROLE_USER",
            (Role::Agent, true) => "ROLE_AGENT",
            (Role::User, false) => "user",
            (Role::Agent, false) => "agent",
        }
    }
}

/// What a part holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Text(String),
    /// Base64 bytes.
    Raw(String),
    Url(String),
    Data(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct PartOut {
    pub body: Body,
    pub media_type: Option<String>,
    pub filename: Option<String>,
    pub metadata: Option<Value>,
}

impl PartOut {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            body: Body::Text(text.into()),
            media_type: None,
            filename: None,
            metadata: None,
        }
    }

    pub fn data(data: Value) -> Self {
        Self {
            body: Body::Data(data),
            media_type: Some("application/json".into()),
            filename: None,
            metadata: None,
        }
    }

    pub fn to_json(&self, version: Version) -> Value {
        let mut out = Map::new();
        match version {
            Version::V1 => {
                match &self.body {
                    Body::Text(text) => out.insert("text".into(), json!(text)),
                    Body::Raw(raw) => out.insert("raw".into(), json!(raw)),
                    Body::Url(url) => out.insert("url".into(), json!(url)),
                    Body::Data(data) => out.insert("data".into(), data.clone()),
                };
                if let Some(media) = &self.media_type {
                    out.insert("mediaType".into(), json!(media));
                }
                if let Some(name) = &self.filename {
                    out.insert("filename".into(), json!(name));
                }
            }
            Version::V03 => match &self.body {
                Body::Text(text) => {
                    out.insert("kind".into(), json!("text"));
                    out.insert("text".into(), json!(text));
                }
                Body::Data(data) => {
                    out.insert("kind".into(), json!("data"));
                    out.insert("data".into(), object_data(data));
                }
                Body::Raw(_) | Body::Url(_) => {
                    let mut file = Map::new();
                    match &self.body {
                        Body::Raw(raw) => file.insert("bytes".into(), json!(raw)),
                        Body::Url(url) => file.insert("uri".into(), json!(url)),
                        _ => unreachable!("files only"),
                    };
                    if let Some(media) = &self.media_type {
                        file.insert("mimeType".into(), json!(media));
                    }
                    if let Some(name) = &self.filename {
                        file.insert("name".into(), json!(name));
                    }
                    out.insert("kind".into(), json!("file"));
                    out.insert("file".into(), Value::Object(file));
                }
            },
            Version::V03Rest => match &self.body {
                Body::Text(text) => {
                    out.insert("text".into(), json!(text));
                }
                Body::Data(data) => {
                    out.insert("data".into(), json!({ "data": object_data(data) }));
                }
                Body::Raw(_) | Body::Url(_) => {
                    let mut file = Map::new();
                    match &self.body {
                        Body::Raw(raw) => file.insert("fileWithBytes".into(), json!(raw)),
                        Body::Url(url) => file.insert("fileWithUri".into(), json!(url)),
                        _ => unreachable!("files only"),
                    };
                    if let Some(media) = &self.media_type {
                        file.insert("mimeType".into(), json!(media));
                    }
                    if let Some(name) = &self.filename {
                        file.insert("name".into(), json!(name));
                    }
                    out.insert("file".into(), Value::Object(file));
                }
            },
        }
        if let Some(metadata) = &self.metadata {
            out.insert("metadata".into(), metadata.clone());
        }
        Value::Object(out)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MessageOut {
    pub message_id: String,
    pub context_id: String,
    pub task_id: Option<String>,
    pub role: Role,
    pub parts: Vec<PartOut>,
}

impl MessageOut {
    pub fn to_json(&self, version: Version) -> Value {
        let mut out = Map::new();
        if version == Version::V03 {
            out.insert("kind".into(), json!("message"));
        }
        out.insert("messageId".into(), json!(self.message_id));
        out.insert("contextId".into(), json!(self.context_id));
        if let Some(task) = &self.task_id {
            out.insert("taskId".into(), json!(task));
        }
        out.insert("role".into(), json!(self.role.name(version)));
        let parts: Vec<Value> = self.parts.iter().map(|p| p.to_json(version)).collect();
        let key = if version == Version::V03Rest {
            "content"
        } else {
            "parts"
        };
        out.insert(key.into(), Value::Array(parts));
        Value::Object(out)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub state: State,
    pub message: Option<MessageOut>,
    pub timestamp: DateTime<Utc>,
}

impl Status {
    pub fn to_json(&self, version: Version) -> Value {
        let mut out = json!({
            "state": self.state.name(version),
            "timestamp": timestamp(self.timestamp),
        });
        if let Some(message) = &self.message {
            out["message"] = message.to_json(version);
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub artifact_id: String,
    pub parts: Vec<PartOut>,
}

impl Artifact {
    pub fn to_json(&self, version: Version) -> Value {
        json!({
            "artifactId": self.artifact_id,
            "parts": self.parts.iter().map(|p| p.to_json(version)).collect::<Vec<_>>(),
        })
    }
}

/// What of a task a reply shows.
#[derive(Debug, Clone, Copy)]
pub struct Shown {
    /// At most this many of the most recent history messages (`None`: all).
    pub history_length: Option<usize>,
    pub artifacts: bool,
}

impl Shown {
    pub const ALL: Shown = Shown {
        history_length: None,
        artifacts: true,
    };
}

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: Status,
    pub artifacts: Vec<Artifact>,
    pub history: Vec<MessageOut>,
}

impl Task {
    pub fn to_json(&self, version: Version, shown: Shown) -> Value {
        let mut out = Map::new();
        if version == Version::V03 {
            out.insert("kind".into(), json!("task"));
        }
        out.insert("id".into(), json!(self.id));
        out.insert("contextId".into(), json!(self.context_id));
        out.insert("status".into(), self.status.to_json(version));
        if shown.artifacts && !self.artifacts.is_empty() {
            let artifacts = self.artifacts.iter().map(|a| a.to_json(version)).collect();
            out.insert("artifacts".into(), Value::Array(artifacts));
        }
        let skip = shown
            .history_length
            .map_or(0, |n| self.history.len().saturating_sub(n));
        let history: Vec<Value> = self.history[skip..]
            .iter()
            .map(|m| m.to_json(version))
            .collect();
        if !history.is_empty() {
            out.insert("history".into(), Value::Array(history));
        }
        Value::Object(out)
    }
}

/// One event of a task's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    Task(Box<Task>),
    Status {
        task_id: String,
        context_id: String,
        status: Status,
    },
    Artifact {
        task_id: String,
        context_id: String,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    },
}

impl StreamEvent {
    /// A `StreamResponse` (1.0) or the bare event with its `kind` (0.3).
    pub fn to_json(&self, version: Version) -> Value {
        match (self, version) {
            (StreamEvent::Task(task), Version::V03) => task.to_json(version, Shown::ALL),
            (StreamEvent::Task(task), _) => {
                json!({ "task": task.to_json(version, Shown::ALL) })
            }
            (
                StreamEvent::Status {
                    task_id,
                    context_id,
                    status,
                },
                _,
            ) => {
                let mut event = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "status": status.to_json(version),
                });
                match version {
                    Version::V1 => json!({ "statusUpdate": event }),
                    Version::V03Rest => {
                        event["final"] = json!(status.state.ends_stream());
                        json!({ "statusUpdate": event })
                    }
                    Version::V03 => {
                        event["kind"] = json!("status-update");
                        event["final"] = json!(status.state.ends_stream());
                        event
                    }
                }
            }
            (
                StreamEvent::Artifact {
                    task_id,
                    context_id,
                    artifact,
                    append,
                    last_chunk,
                },
                _,
            ) => {
                let mut event = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "artifact": artifact.to_json(version),
                });
                if *append || version == Version::V03 {
                    event["append"] = json!(append);
                }
                if *last_chunk || version == Version::V03 {
                    event["lastChunk"] = json!(last_chunk);
                }
                match version {
                    Version::V1 | Version::V03Rest => json!({ "artifactUpdate": event }),
                    Version::V03 => {
                        event["kind"] = json!("artifact-update");
                        event
                    }
                }
            }
        }
    }
}

/// Data as 0.3 holds it, an object: any other value as `{"value": …}`.
fn object_data(data: &Value) -> Value {
    match data {
        Value::Object(_) => data.clone(),
        other => json!({ "value": other }),
    }
}

/// RFC 3339 in UTC with milliseconds, as A2A writes timestamps.
pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_events_are_written_in_each_versions_shape() {
        let file = PartOut {
            body: Body::Raw("aGk=".into()),
            media_type: Some("text/plain".into()),
            filename: Some("a.txt".into()),
            metadata: None,
        };
        assert_eq!(
            file.to_json(Version::V1),
            json!({"raw": "aGk=", "mediaType": "text/plain", "filename": "a.txt"})
        );
        assert_eq!(
            file.to_json(Version::V03),
            json!({"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}})
        );
        assert_eq!(
            PartOut::data(json!([1])).to_json(Version::V03),
            json!({"kind": "data", "data": {"value": [1]}})
        );
        let at = DateTime::from_timestamp_millis(1_700_000_000_123).unwrap();
        let event = StreamEvent::Status {
            task_id: "t".into(),
            context_id: "c".into(),
            status: Status {
                state: State::Completed,
                message: None,
                timestamp: at,
            },
        };
        assert_eq!(
            event.to_json(Version::V1),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2023-11-14T22:13:20.123Z"}}})
        );
        assert_eq!(
            event.to_json(Version::V03),
            json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": true,
                "status": {"state": "completed", "timestamp": "2023-11-14T22:13:20.123Z"}})
        );
        let chunk = StreamEvent::Artifact {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Artifact {
                artifact_id: "a".into(),
                parts: vec![PartOut::text("Hel")],
            },
            append: false,
            last_chunk: false,
        };
        assert_eq!(
            chunk.to_json(Version::V1),
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}}})
        );
        assert_eq!(
            chunk.to_json(Version::V03)["append"],
            json!(false),
            "0.3 writes the flags"
        );
        assert_eq!(State::parse("input-required"), Some(State::InputRequired));
        assert_eq!(State::parse("TASK_STATE_CANCELED"), Some(State::Canceled));
        assert_eq!(State::parse("rejected"), None);
    }
}
