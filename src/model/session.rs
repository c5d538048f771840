//! Sessions: one conversation with one agent, its configuration and client tools.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{SessionId, TenantId};

/// A session as stored. Secret option values are sealed (see `crypto::SecretBox`) and
/// never leave the engine in plaintext.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: SessionId,
    pub tenant_id: TenantId,
    pub agent: String,
    /// The tenant agent and the version the session runs; `None` for a configured agent.
    pub agent_version: Option<(super::AgentId, i64)>,
    pub server_tools: Vec<ServerToolRef>,
    pub options: BTreeMap<String, String>,
    pub sealed_options: BTreeMap<String, String>,
    pub client_tools: Vec<ToolSpec>,
    /// The client's own key for the session (an AgentScope or ACP session id), if any.
    pub alias: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A tool declaration: a client tool in a request, or a server tool in `/meta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub parameters: Value,
}

/// A server tool enabled for a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerToolRef {
    pub name: String,
    #[serde(default)]
    pub trust: bool,
}
