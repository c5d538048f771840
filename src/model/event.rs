//! The engine's events: one log per session that every protocol face renders.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Content, SessionId, StopReason, TurnError, TurnId, Usage};

/// A stored event. `seq` is per session, strictly increasing and gap-free.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub session_id: SessionId,
    pub seq: i64,
    /// The turn that wrote it; `None` for an event of the session itself, written between
    /// its turns (a [`EventData::is_session_event`] kind).
    pub turn_id: Option<TurnId>,
    pub data: EventData,
    pub created_at: DateTime<Utc>,
}

/// What happened. Serialized with its `kind` as the tag; stored as `kind` + `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventData {
    TurnStart {},
    /// An assistant message begins; its blocks follow until `MessageStop`.
    MessageStart {},
    TextDelta {
        delta: String,
    },
    ThinkingDelta {
        delta: String,
    },
    /// A tool call the assistant message makes (inside the message it belongs to).
    ToolCall {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        name: String,
        input: Map<String, Value>,
    },
    MessageStop {},
    /// A server tool's result (a tool message of the history).
    ToolResult {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        content: Content,
    },
    Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
    /// The compacted history was rewritten: it now stands in for the full history up to
    /// position `through`.
    Compaction {
        strategy: super::CompactionStrategy,
        tokens_before: u64,
        tokens_after: u64,
        through: i64,
    },
    TurnStop {
        #[serde(rename = "stopReason")]
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<TurnError>,
        #[serde(default)]
        usage: Usage,
    },
    /// A session's event, in no turn: the session was moved from version `from` of its
    /// tenant agent `agent` to version `to`, which its next turns run.
    AgentVersionChange {
        agent: String,
        from: i64,
        to: i64,
    },
}

impl EventData {
    pub fn kind(&self) -> &'static str {
        match self {
            EventData::TurnStart {} => "turn_start",
            EventData::MessageStart {} => "message_start",
            EventData::TextDelta { .. } => "text_delta",
            EventData::ThinkingDelta { .. } => "thinking_delta",
            EventData::ToolCall { .. } => "tool_call",
            EventData::MessageStop {} => "message_stop",
            EventData::ToolResult { .. } => "tool_result",
            EventData::Usage { .. } => "usage",
            EventData::Compaction { .. } => "compaction",
            EventData::TurnStop { .. } => "turn_stop",
            EventData::AgentVersionChange { .. } => "agent_version_change",
        }
    }

    /// The stored form: the event's fields without its kind, as JSON text written in one
    /// pass (the tag is serialized first, and cut).
    pub fn to_data(&self) -> String {
        let mut text = serde_json::to_string(self).expect("events serialize");
        let tag = "{\"kind\":\"".len() + self.kind().len() + 1;
        debug_assert!(text[..tag].ends_with(&format!("\"{}\"", self.kind())));
        let cut = if text.as_bytes().get(tag) == Some(&b',') {
            tag + 1
        } else {
            tag
        };
        text.replace_range(1..cut, "");
        text
    }

    /// Rebuilds an event from its stored kind and data.
    pub fn from_parts(kind: &str, data: Value) -> Result<EventData, serde_json::Error> {
        let mut map = match data {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        map.insert("kind".into(), Value::String(kind.to_owned()));
        serde_json::from_value(Value::Object(map))
    }

    pub fn is_turn_stop(&self) -> bool {
        matches!(self, EventData::TurnStop { .. })
    }

    /// Whether this is an event of the session itself, written between turns (in none).
    pub fn is_session_event(&self) -> bool {
        matches!(self, EventData::AgentVersionChange { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_kind_and_data() {
        let events = [
            EventData::TurnStart {},
            EventData::TextDelta { delta: "hi".into() },
            EventData::ToolCall {
                tool_call_id: "c1".into(),
                name: "clock".into(),
                input: Map::new(),
            },
            EventData::TurnStop {
                stop_reason: StopReason::Error,
                error: Some(TurnError::new("cancelled", "stopped")),
                usage: Usage::default(),
            },
            EventData::AgentVersionChange {
                agent: "helper".into(),
                from: 1,
                to: 2,
            },
        ];
        for event in events {
            let data: Value = serde_json::from_str(&event.to_data()).unwrap();
            assert!(data.is_object() && data.get("kind").is_none(), "{data}");
            // The fields as a tagged serialization has them, the tag aside.
            let mut tagged = serde_json::to_value(&event).unwrap();
            tagged.as_object_mut().unwrap().remove("kind");
            assert_eq!(data, tagged);
            let back = EventData::from_parts(event.kind(), data).unwrap();
            assert_eq!(back, event);
        }
        assert_eq!(EventData::TurnStart {}.to_data(), "{}");
        assert_eq!(
            EventData::TextDelta { delta: "hi".into() }.to_data(),
            r#"{"delta":"hi"}"#
        );
    }
}
