//! A tenant's own agents: created, updated (a new version each time), published,
//! archived and deleted, each checked against the operator's policy; and a session moved to
//! another kept version of its agent.

use serde_json::Value;

use super::catalog::{AgentError, AgentWithVersion};
use super::error::EngineError;
use super::runner::Engine;
use crate::config::AgentSpec;
use crate::model::{AgentId, AgentVersion, EventData, FieldError, Session, TenantAgent, TenantId};
use crate::store::{AgentChange, Conflict, Page, SessionChange, StoreError};

impl Engine {
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
            Err(StoreError::Conflict(Conflict::ActiveTurn)) => {
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
        let AgentWithVersion { agent, version } =
            self.get_agent_version(tenant, name, number).await?;
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
