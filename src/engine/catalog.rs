//! The agents the engine runs: the configured (platform) agents, visible to every tenant,
//! and each tenant's own agents, made of immutable versions kept in the store. A session
//! names its agent, and for a tenant agent the version it was opened on; new sessions take
//! the published version read at admission, so a publish through any process is used by
//! the next session of every process. Built versions are cached: a version never changes.
//!
//! Which agent a name or a session means is answered in `session_agents.rs`; a tenant's
//! agents are written in `tenant_agents.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::agents::{Agent, Agents};
use crate::config::{
    AgentPolicy, AgentSpec, ConnectionSettings, McpServerSettings, TenantAgentSettings,
};
use crate::model::{AgentId, AgentVersion, FieldError, TenantAgent};
use crate::store::StoreError;
use crate::tools::mcp::McpRegistry;

/// Built versions kept before the cache starts over.
const CACHED_VERSIONS: usize = 4096;

/// What the operator lets tenants' agents use.
#[derive(Debug, Clone)]
pub struct TenantAgentPolicy {
    pub connections: Vec<ConnectionSettings>,
    pub limits: TenantAgentSettings,
    pub mcp_servers: Vec<McpServerSettings>,
}

#[derive(Debug)]
pub(super) struct Catalog {
    pub(super) platform: Agents,
    pub(super) policy: TenantAgentPolicy,
    mcp: Arc<McpRegistry>,
    pub(super) built: Mutex<HashMap<(AgentId, i64), Arc<Agent>>>,
}

/// Why a tenant agent operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error("agent not found")]
    NotFound,
    #[error("version {0} of the agent is not kept")]
    VersionNotFound(i64),
    #[error("{0}")]
    Conflict(String),
    #[error("the agent changed since the ETag named in If-Match")]
    Stale,
    #[error("the tenant keeps its most agents (tenant_agents.max_per_tenant = {0})")]
    TooMany(u32),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for AgentError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => AgentError::NotFound,
            StoreError::Stale => AgentError::Stale,
            other => AgentError::Store(other),
        }
    }
}

/// A tenant agent with one of its versions.
#[derive(Debug, Clone)]
pub struct AgentWithVersion {
    pub agent: TenantAgent,
    pub version: AgentVersion,
}

impl Catalog {
    pub(super) fn new(platform: Agents, policy: TenantAgentPolicy, mcp: Arc<McpRegistry>) -> Self {
        Self {
            platform,
            policy,
            mcp,
            built: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn policy(&self) -> AgentPolicy<'_> {
        AgentPolicy {
            connections: &self.policy.connections,
            limits: &self.policy.limits,
            mcp_servers: &self.policy.mcp_servers,
        }
    }

    /// A version's agent, built once.
    pub(super) fn build(
        &self,
        agent: &AgentId,
        name: &str,
        version: &AgentVersion,
    ) -> Result<Arc<Agent>, FieldError> {
        let key = (*agent, version.version);
        if let Some(built) = self.built.lock().expect("catalog lock").get(&key) {
            return Ok(built.clone());
        }
        let spec = AgentSpec::parse(version.spec.clone())?;
        let settings = spec.settings(name, self.policy())?;
        let built = Agent::from_settings(settings, &self.mcp);
        let mut cache = self.built.lock().expect("catalog lock");
        if cache.len() >= CACHED_VERSIONS {
            cache.clear();
        }
        cache.insert(key, built.clone());
        Ok(built)
    }
}
