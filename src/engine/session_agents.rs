//! Which agent a name or a session means: a configured (platform) agent the caller sees, or
//! the tenant's own agent at its published version (or the version a session pinned),
//! built once by the catalog.

use std::sync::Arc;

use super::error::EngineError;
use super::runner::Engine;
use crate::agents::Agent;
use crate::model::{AgentId, FieldError, Session, TenantAgent, TenantId};
use crate::store::StoreError;

impl Engine {
    /// The configured agent of this name the caller sees.
    pub(super) fn platform_agent(
        &self,
        tenant: Option<&TenantId>,
        name: &str,
    ) -> Option<&Arc<Agent>> {
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
}
