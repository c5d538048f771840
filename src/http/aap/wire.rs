//! AAP v3 request and response bodies, with the protocol's field names.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::OptionKind;
use crate::engine::SessionView;
use crate::model::{HistoryMessage, ServerToolRef, ToolSpec};

#[derive(Debug, Deserialize)]
pub struct CreateSessionRequest {
    pub agent: AgentConfigIn,
    #[serde(default)]
    pub messages: Option<Vec<Value>>,
    #[serde(default)]
    pub tools: Option<Vec<ToolSpec>>,
}

#[derive(Debug, Deserialize)]
pub struct AgentConfigIn {
    pub name: String,
    #[serde(default)]
    pub tools: Option<Vec<ServerToolRef>>,
    #[serde(default)]
    pub options: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateSessionResponse {
    pub session_id: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub agent: AgentConfigOut,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize)]
pub struct AgentConfigOut {
    pub name: String,
    pub tools: Vec<ServerToolRef>,
    pub options: BTreeMap<String, String>,
}

impl From<SessionView> for SessionInfo {
    fn from(view: SessionView) -> Self {
        SessionInfo {
            session_id: view.id.to_string(),
            agent: AgentConfigOut {
                name: view.agent,
                tools: view.server_tools,
                options: view.options,
            },
            tools: view.client_tools,
            created_at: view.created_at,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct HistoryResponse {
    pub history: BTreeMap<&'static str, Vec<HistoryMessage>>,
}

#[derive(Debug, Serialize)]
pub struct MetaResponse {
    pub version: u32,
    pub agents: Vec<AgentInfo>,
}

#[derive(Debug, Serialize)]
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

#[derive(Debug, Serialize)]
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
