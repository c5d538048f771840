//! What a response's request named that a turn does not, kept as the turn's labels (see
//! `Engine::set_turn_labels`): the model as the client wrote it, `background`, the
//! caller's `metadata`, and how the response continued a conversation.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ResponseLabels {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub background: bool,
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(default)]
    pub previous_response_id: Option<String>,
    #[serde(default)]
    pub conversation: Option<String>,
    /// `DELETE /v1/responses/{id}` hides the response from this face.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl ResponseLabels {
    pub fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }

    pub fn from_map(map: Map<String, Value>) -> Self {
        serde_json::from_value(Value::Object(map)).unwrap_or_default()
    }
}
