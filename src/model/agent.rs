//! A tenant's own agent: a name, its immutable versions, the published one.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::AgentId;

/// A tenant agent as listed and read: where its versions stand.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TenantAgent {
    #[schema(value_type = String)]
    pub id: AgentId,
    pub name: String,
    /// The newest version's number (versions count from 1).
    pub latest_version: i64,
    /// The version new sessions run; `null` until one is published.
    pub published_version: Option<i64>,
    /// An archived agent refuses new sessions; its sessions go on.
    pub archived: bool,
    /// Changes with every write; the agent's `ETag`.
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl TenantAgent {
    /// The entity tag `If-Match` compares.
    pub fn etag(&self) -> String {
        format!("\"{}\"", self.revision)
    }
}

/// One immutable version of a tenant agent.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AgentVersion {
    pub version: i64,
    /// The agent as it was sent (the body of the create or update).
    #[schema(value_type = Object)]
    pub spec: Value,
    /// The token that made it (`tok_…`), or `admin`.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}
