//! The agents the engine runs: the configured (platform) agents, visible to every tenant,
//! and each tenant's own agents, made of immutable versions kept in the store. A session
//! names its agent, and for a tenant agent the version it was opened on; new sessions take
//! the published version read at admission, so a publish through any process is used by
//! the next session of every process. Built versions are cached: a version never changes.
//!
//! Longer than most files here on purpose: both kinds of agents answer the same questions
//! (which one a name means, who sees it, which version a session runs) through one cache,
//! and the answers only read right side by side.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{Engine, EngineError};
use crate::agents::{Agent, Agents};
use crate::config::{
    AgentPolicy, AgentSpec, ConnectionSettings, McpServerSettings, TenantAgentSettings,
};
use crate::model::{AgentId, AgentVersion, EventData, FieldError, Session, TenantAgent, TenantId};
use crate::store::{AgentChange, Page, SESSION_HAS_ACTIVE_TURN, SessionChange, StoreError};
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
    platform: Agents,
    policy: TenantAgentPolicy,
    mcp: Arc<McpRegistry>,
    built: Mutex<HashMap<(AgentId, i64), Arc<Agent>>>,
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

    fn policy(&self) -> AgentPolicy<'_> {
        AgentPolicy {
            connections: &self.policy.connections,
            limits: &self.policy.limits,
            mcp_servers: &self.policy.mcp_servers,
        }
    }

    /// A version's agent, built once.
    fn build(
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

impl Engine {
    /// The configured agent of this name the caller sees.
    fn platform_agent(&self, tenant: Option<&TenantId>, name: &str) -> Option<&Arc<Agent>> {
        self.catalog
            .platform
            .get(name)
            .filter(|agent| agent.visible_to(tenant))
    }

    /// The configured agents the caller sees, for a message: `the agents here: `echo``.
    pub fn agents_listed(&self, tenant: Option<&TenantId>) -> String {
        let names: Vec<String> = self
            .catalog
            .platform
            .iter()
            .filter(|a| a.visible_to(tenant))
            .map(|a| format!("`{}`", a.name()))
            .collect();
        if names.is_empty() {
            "this server serves no agents".to_owned()
        } else {
            format!("the agents here: {}", names.join(", "))
        }
    }

    /// The agent a session runs: its configured agent, or the tenant agent's version it
    /// is pinned to; `None` when that no longer exists.
    pub async fn agent_of(&self, session: &Session) -> Result<Option<Arc<Agent>>, EngineError> {
        let Some((id, number)) = session.agent_version else {
            return Ok(self.catalog.platform.get(&session.agent).cloned());
        };
        let version = match self
            .store
            .get_tenant_agent_version(&session.tenant_id, &id, number)
            .await
        {
            Ok(version) => version,
            Err(StoreError::NotFound) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        Ok(self.catalog.build(&id, &session.agent, &version).ok())
    }

    /// The session's agent when it is at hand without the database: its configured agent,
    /// or its tenant agent's version if this process built it (else `None`; see
    /// [`Engine::agent_of`]).
    pub fn agent_at_hand(&self, session: &Session) -> Option<Arc<Agent>> {
        match session.agent_version {
            None => self.catalog.platform.get(&session.agent).cloned(),
            Some(key) => self
                .catalog
                .built
                .lock()
                .expect("catalog lock")
                .get(&key)
                .cloned(),
        }
    }

    /// The agents the tenant may open sessions on (`None`: an anonymous caller, who sees
    /// the configured agents): the configured ones, then its published, unarchived ones.
    pub async fn visible_agents(
        &self,
        tenant: Option<&TenantId>,
    ) -> Result<Vec<Arc<Agent>>, EngineError> {
        let mut agents: Vec<Arc<Agent>> = self
            .catalog
            .platform
            .iter()
            .filter(|a| a.visible_to(tenant))
            .cloned()
            .collect();
        let Some(tenant) = tenant else {
            return Ok(agents);
        };
        for agent in self.store.list_published_tenant_agents(tenant).await? {
            if let Some(found) = self.published_agent(tenant, &agent).await? {
                agents.push(found);
            }
        }
        Ok(agents)
    }

    /// The agent of this name the tenant may open a session on: a configured one, or its
    /// own published, unarchived one.
    pub async fn find_agent(
        &self,
        tenant: Option<&TenantId>,
        name: &str,
    ) -> Result<Option<Arc<Agent>>, EngineError> {
        if let Some(agent) = self.platform_agent(tenant, name) {
            return Ok(Some(agent.clone()));
        }
        let Some(tenant) = tenant else {
            return Ok(None);
        };
        let agent = match self.store.get_tenant_agent(tenant, name).await {
            Ok(agent) if !agent.archived => agent,
            Ok(_) | Err(StoreError::NotFound) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        self.published_agent(tenant, &agent).await
    }

    async fn published_agent(
        &self,
        tenant: &TenantId,
        agent: &TenantAgent,
    ) -> Result<Option<Arc<Agent>>, EngineError> {
        let Some(number) = agent.published_version else {
            return Ok(None);
        };
        let version = match self
            .store
            .get_tenant_agent_version(tenant, &agent.id, number)
            .await
        {
            Ok(version) => version,
            Err(StoreError::NotFound) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        Ok(self.catalog.build(&agent.id, &agent.name, &version).ok())
    }

    /// The agent a new session of `name` runs, and the tenant agent's version it pins:
    /// the published version, or `version` when named (a draft may be tried so).
    pub(super) async fn agent_for_new_session(
        &self,
        tenant: &TenantId,
        name: &str,
        version: Option<i64>,
    ) -> Result<(Arc<Agent>, Option<(AgentId, i64)>), EngineError> {
        if let Some(agent) = self.platform_agent(Some(tenant), name) {
            if version.is_some() {
                return Err(FieldError::new(
                    "agent.version",
                    format!("`{name}` is a configured agent: it has no versions to choose"),
                )
                .into());
            }
            return Ok((agent.clone(), None));
        }
        let agent = match self.store.get_tenant_agent(tenant, name).await {
            Ok(agent) => agent,
            Err(StoreError::NotFound) => {
                return Err(FieldError::new(
                    "agent.name",
                    format!(
                        "unknown agent `{name}`; {}",
                        self.agents_listed(Some(tenant))
                    ),
                )
                .into());
            }
            Err(error) => return Err(error.into()),
        };
        if agent.archived {
            return Err(FieldError::new(
                "agent.name",
                format!("agent `{name}` is archived: it takes no new sessions"),
            )
            .into());
        }
        let Some(number) = version.or(agent.published_version) else {
            return Err(FieldError::new(
                "agent.version",
                format!("agent `{name}` has no published version: publish one, or name a version"),
            )
            .into());
        };
        let found = match self
            .store
            .get_tenant_agent_version(tenant, &agent.id, number)
            .await
        {
            Ok(found) => found,
            Err(StoreError::NotFound) => {
                return Err(FieldError::new(
                    "agent.version",
                    format!("agent `{name}` keeps no version {number}"),
                )
                .into());
            }
            Err(error) => return Err(error.into()),
        };
        let built = self
            .catalog
            .build(&agent.id, name, &found)
            .map_err(|error| {
                FieldError::new(
                    "agent.name",
                    format!(
                        "version {number} of agent `{name}` no longer passes the operator's \
                         rules ({}: {})",
                        error.field, error.message
                    ),
                )
            })?;
        Ok((built, Some((agent.id, number))))
    }

    /// Moves a session on a tenant agent to another kept version of it: its next turns run
    /// that version.
    pub async fn move_session(
        &self,
        session: &Session,
        number: i64,
    ) -> Result<Session, EngineError> {
        let Some((id, from)) = session.agent_version else {
            return Err(FieldError::new(
                "agent.version",
                format!(
                    "`{}` is a configured agent: it has no versions to choose",
                    session.agent
                ),
            )
            .into());
        };
        let tenant = &session.tenant_id;
        let version = match self
            .store
            .get_tenant_agent_version(tenant, &id, number)
            .await
        {
            Ok(version) => version,
            Err(StoreError::NotFound) => {
                return Err(FieldError::new(
                    "agent.version",
                    format!("agent `{}` keeps no version {number}", session.agent),
                )
                .into());
            }
            Err(error) => return Err(error.into()),
        };
        self.catalog.build(&id, &session.agent, &version)?;
        // The move and its event in the session's log, in one transaction, between turns.
        let written = self
            .writer
            .append_session(super::writer::SessionAppend {
                tenant: *tenant,
                session: session.id,
                change: SessionChange::AgentVersion {
                    agent: id,
                    version: number,
                },
                event: EventData::AgentVersionChange {
                    agent: session.agent.clone(),
                    from,
                    to: number,
                },
            })
            .await;
        match written {
            Ok(_) => {}
            Err(StoreError::Conflict(why)) if why == SESSION_HAS_ACTIVE_TURN => {
                return Err(EngineError::SessionBusy);
            }
            Err(error) => return Err(error.into()),
        }
        tracing::info!(session_id = %session.id, from, to = number, "session moved to another agent version");
        let mut moved = session.clone();
        moved.agent_version = Some((id, number));
        Ok(moved)
    }

    /// Checks a tenant agent's body as `[[agents]]` is checked, then against what the
    /// operator allows tenants; `name` is the agent's (on an update, the body may repeat it).
    fn check_agent_spec(
        &self,
        tenant: &TenantId,
        name: Option<&str>,
        body: &Value,
    ) -> Result<String, AgentError> {
        let spec = AgentSpec::parse(body.clone())?;
        let name = match (name, spec.name.as_deref()) {
            (Some(path), Some(body)) if path != body => {
                return Err(FieldError::new(
                    "/name",
                    format!("an agent's name cannot change (this agent's is `{path}`)"),
                )
                .into());
            }
            (Some(name), _) | (None, Some(name)) => name.to_owned(),
            (None, None) => return Err(FieldError::missing("/name").into()),
        };
        spec.settings(&name, self.catalog.policy())?;
        if self.platform_agent(Some(tenant), &name).is_some() {
            return Err(AgentError::Conflict(format!(
                "`{name}` is the name of a configured agent: a tenant agent cannot take it"
            )));
        }
        Ok(name)
    }

    /// Creates the tenant's agent with its first version (a draft: publish it to serve it).
    pub async fn create_agent(
        &self,
        tenant: &TenantId,
        body: Value,
        by: &str,
    ) -> Result<AgentWithVersion, AgentError> {
        let name = self.check_agent_spec(tenant, None, &body)?;
        let now = crate::model::now();
        let agent = TenantAgent {
            id: AgentId::generate(),
            name: name.clone(),
            latest_version: 1,
            published_version: None,
            archived: false,
            revision: 1,
            created_at: now,
            updated_at: now,
        };
        let version = AgentVersion {
            version: 1,
            spec: body,
            created_by: by.to_owned(),
            created_at: now,
        };
        let max = self.catalog.policy.limits.max_per_tenant;
        match self
            .store
            .insert_tenant_agent(tenant, &agent, &version, max)
            .await
        {
            Ok(true) => Ok(AgentWithVersion { agent, version }),
            Ok(false) => Err(AgentError::TooMany(max)),
            Err(StoreError::Conflict(_)) => Err(AgentError::Conflict(format!(
                "this tenant has an agent named `{name}`"
            ))),
            Err(error) => Err(error.into()),
        }
    }

    pub async fn list_agents(
        &self,
        tenant: &TenantId,
        page: Page,
    ) -> Result<(Vec<TenantAgent>, bool), AgentError> {
        Ok(self.store.list_tenant_agents(tenant, page).await?)
    }

    /// The tenant's agent and its newest version.
    pub async fn get_agent(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<AgentWithVersion, AgentError> {
        let agent = self.store.get_tenant_agent(tenant, name).await?;
        let version = self
            .store
            .get_tenant_agent_version(tenant, &agent.id, agent.latest_version)
            .await?;
        Ok(AgentWithVersion { agent, version })
    }

    pub async fn get_agent_version(
        &self,
        tenant: &TenantId,
        name: &str,
        number: i64,
    ) -> Result<AgentWithVersion, AgentError> {
        let agent = self.store.get_tenant_agent(tenant, name).await?;
        let version = match self
            .store
            .get_tenant_agent_version(tenant, &agent.id, number)
            .await
        {
            Err(StoreError::NotFound) => return Err(AgentError::VersionNotFound(number)),
            other => other?,
        };
        Ok(AgentWithVersion { agent, version })
    }

    pub async fn list_agent_versions(
        &self,
        tenant: &TenantId,
        name: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<(TenantAgent, Vec<AgentVersion>, bool), AgentError> {
        let agent = self.store.get_tenant_agent(tenant, name).await?;
        let (versions, more) = self
            .store
            .list_tenant_agent_versions(tenant, &agent.id, after, limit)
            .await?;
        Ok((agent, versions, more))
    }

    /// A new version of the tenant's agent (a draft until published), if the agent's
    /// revision is still `expected` (when given).
    pub async fn update_agent(
        &self,
        tenant: &TenantId,
        name: &str,
        body: Value,
        expected: Option<i64>,
        by: &str,
    ) -> Result<AgentWithVersion, AgentError> {
        // An agent of another tenant, or none: not found before any word on the body.
        self.store.get_tenant_agent(tenant, name).await?;
        self.check_agent_spec(tenant, Some(name), &body)?;
        let now = crate::model::now();
        let mut made = None;
        let agent = self
            .store
            .insert_tenant_agent_version(
                tenant,
                name,
                expected,
                |number| {
                    let version = AgentVersion {
                        version: number,
                        spec: body,
                        created_by: by.to_owned(),
                        created_at: now,
                    };
                    made = Some(version.clone());
                    version
                },
                self.catalog.policy.limits.max_versions,
            )
            .await?;
        Ok(AgentWithVersion {
            agent,
            version: made.expect("the version was made"),
        })
    }

    /// Publishes a kept version (an older one: a rollback): new sessions run it.
    pub async fn publish_agent(
        &self,
        tenant: &TenantId,
        name: &str,
        number: i64,
        expected: Option<i64>,
    ) -> Result<TenantAgent, AgentError> {
        let agent = self.store.get_tenant_agent(tenant, name).await?;
        let version = match self
            .store
            .get_tenant_agent_version(tenant, &agent.id, number)
            .await
        {
            Err(StoreError::NotFound) => return Err(AgentError::VersionNotFound(number)),
            other => other?,
        };
        // A version made under rules since tightened is not served.
        self.catalog.build(&agent.id, name, &version)?;
        match self
            .store
            .update_tenant_agent(tenant, name, expected, AgentChange::Publish(number))
            .await
        {
            Err(StoreError::NotFound) => Err(AgentError::VersionNotFound(number)),
            other => Ok(other?),
        }
    }

    /// Archives the agent (no new sessions; its sessions go on), or restores it.
    pub async fn archive_agent(
        &self,
        tenant: &TenantId,
        name: &str,
        archived: bool,
        expected: Option<i64>,
    ) -> Result<TenantAgent, AgentError> {
        Ok(self
            .store
            .update_tenant_agent(tenant, name, expected, AgentChange::Archive(archived))
            .await?)
    }

    /// Deletes the agent and its versions; its sessions end with `agent_unavailable` at
    /// their next turn.
    pub async fn delete_agent(&self, tenant: &TenantId, name: &str) -> Result<(), AgentError> {
        self.store.delete_tenant_agent(tenant, name).await?;
        // Its schedules stop (paused, saying why) rather than fail at each occurrence.
        self.store
            .pause_agent_schedules(tenant, name, "agent_missing", crate::model::now())
            .await?;
        Ok(())
    }
}
