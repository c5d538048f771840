//! Tenants' own agents: `tenant_agents` (where an agent's versions stand) and
//! `tenant_agent_versions` (each version as sent, never changed). Every write raises the
//! agent's `revision`, which a caller may require (`expected`) to be unchanged.

use super::Stamp;
use super::keyset::Keyset;
use super::{Page, Store, StoreError, with_db, with_writer};
use crate::model::{AgentId, AgentVersion, TenantAgent, TenantId};

const AGENT_COLUMNS: &str = "id, name, latest_version, published_version, archived, revision, \
                             created_at, updated_at";

#[derive(sqlx::FromRow)]
struct AgentRow {
    id: AgentId,
    name: String,
    latest_version: i64,
    published_version: Option<i64>,
    archived: bool,
    revision: i64,
    created_at: Stamp,
    updated_at: Stamp,
}

impl From<AgentRow> for TenantAgent {
    fn from(row: AgentRow) -> Self {
        TenantAgent {
            id: row.id,
            name: row.name,
            latest_version: row.latest_version,
            published_version: row.published_version,
            archived: row.archived,
            revision: row.revision,
            created_at: row.created_at.into(),
            updated_at: row.updated_at.into(),
        }
    }
}

#[derive(sqlx::FromRow)]
struct VersionRow {
    version: i64,
    spec: String,
    created_by: String,
    created_at: Stamp,
}

impl TryFrom<VersionRow> for AgentVersion {
    type Error = StoreError;

    fn try_from(row: VersionRow) -> Result<Self, StoreError> {
        Ok(AgentVersion {
            version: row.version,
            spec: serde_json::from_str(&row.spec)
                .map_err(|e| StoreError::Corrupt(format!("an agent version's spec: {e}")))?,
            created_by: row.created_by,
            created_at: row.created_at.into(),
        })
    }
}

/// A change of where an agent stands, short of a new version.
#[derive(Debug, Clone, Copy)]
pub enum AgentChange {
    Publish(i64),
    Archive(bool),
}

/// The agent's row, locked until the transaction ends (SQLite's single writer needs no
/// lock).
macro_rules! lock_agent {
    ($tx:expr, $tenant:expr, $name:expr, $postgres:expr) => {
        sqlx::query_as::<_, AgentRow>(sqlx::AssertSqlSafe(format!(
            "SELECT {AGENT_COLUMNS} FROM tenant_agents WHERE tenant_id = $1 AND name = $2{}",
            if $postgres { " FOR UPDATE" } else { "" }
        )))
        .bind($tenant)
        .bind($name)
        .fetch_optional(&mut *$tx)
        .await?
    };
}

macro_rules! insert_version {
    ($tx:expr, $agent:expr, $version:expr) => {
        sqlx::query(
            "INSERT INTO tenant_agent_versions (agent_id, version, spec, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind($agent)
        .bind($version.version)
        .bind($version.spec.to_string())
        .bind($version.created_by.clone())
        .bind(Stamp($version.created_at))
        .execute(&mut *$tx)
        .await?
    };
}

impl Store {
    /// Records a new agent with its first version, unless the tenant keeps `max` agents
    /// already (`Ok(false)`); a name the tenant uses is a conflict.
    pub async fn insert_tenant_agent(
        &self,
        tenant: &TenantId,
        agent: &TenantAgent,
        first: &AgentVersion,
        max: u32,
    ) -> Result<bool, StoreError> {
        let postgres = matches!(self.db, super::Db::Postgres(_));
        Ok(with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            if postgres {
                sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 28))")
                    .bind(tenant.to_uuid().to_string())
                    .execute(&mut *tx)
                    .await?;
            }
            let count: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM tenant_agents WHERE tenant_id = $1")
                    .bind(tenant)
                    .fetch_one(&mut *tx)
                    .await?;
            if count >= i64::from(max) {
                tx.rollback().await?;
                return Ok(false);
            }
            sqlx::query(
                "INSERT INTO tenant_agents (id, tenant_id, name, latest_version, \
                 published_version, archived, revision, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
            )
            .bind(agent.id)
            .bind(tenant)
            .bind(&agent.name)
            .bind(agent.latest_version)
            .bind(agent.published_version)
            .bind(agent.archived)
            .bind(agent.revision)
            .bind(Stamp(agent.created_at))
            .execute(&mut *tx)
            .await?;
            insert_version!(tx, agent.id, first);
            tx.commit().await?;
            Ok::<_, sqlx::Error>(true)
        })?)
    }

    /// The tenant's agents, newest first, a page at a time.
    pub async fn list_tenant_agents(
        &self,
        tenant: &TenantId,
        page: Page,
    ) -> Result<(Vec<TenantAgent>, bool), StoreError> {
        let keyset = Keyset {
            columns: AGENT_COLUMNS,
            table: "tenant_agents",
            scope: &[("tenant_id", tenant.to_uuid())],
            key: "id",
        };
        let (rows, more): (Vec<AgentRow>, bool) = self.keyset_page(keyset, page).await?;
        Ok((rows.into_iter().map(TenantAgent::from).collect(), more))
    }

    /// Every agent of the tenant that is published and not archived.
    pub async fn list_published_tenant_agents(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<TenantAgent>, StoreError> {
        let rows: Vec<AgentRow> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {AGENT_COLUMNS} FROM tenant_agents WHERE tenant_id = $1 \
                 AND published_version IS NOT NULL AND NOT archived ORDER BY name"
            )))
            .bind(tenant)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(TenantAgent::from).collect())
    }

    pub async fn get_tenant_agent(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<TenantAgent, StoreError> {
        let row: AgentRow = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {AGENT_COLUMNS} FROM tenant_agents WHERE tenant_id = $1 AND name = $2"
            )))
            .bind(tenant)
            .bind(name)
            .fetch_one(pool)
            .await
        })?;
        Ok(row.into())
    }

    /// One version of the tenant's agent, by the agent's id.
    pub async fn get_tenant_agent_version(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        version: i64,
    ) -> Result<AgentVersion, StoreError> {
        let row: VersionRow = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT v.version, v.spec, v.created_by, v.created_at \
                 FROM tenant_agent_versions v JOIN tenant_agents a ON a.id = v.agent_id \
                 WHERE a.tenant_id = $1 AND v.agent_id = $2 AND v.version = $3",
            )
            .bind(tenant)
            .bind(agent)
            .bind(version)
            .fetch_one(pool)
            .await
        })?;
        row.try_into()
    }

    /// The versions kept of the tenant's agent, newest first, a page at a time (`after`:
    /// only versions below it).
    pub async fn list_tenant_agent_versions(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        after: Option<i64>,
        limit: u32,
    ) -> Result<(Vec<AgentVersion>, bool), StoreError> {
        let keyset = Keyset {
            columns: "v.version, v.spec, v.created_by, v.created_at",
            table: "tenant_agent_versions v JOIN tenant_agents a ON a.id = v.agent_id",
            scope: &[
                ("a.tenant_id", tenant.to_uuid()),
                ("v.agent_id", agent.to_uuid()),
            ],
            key: "v.version",
        };
        let (rows, more): (Vec<VersionRow>, bool) =
            self.keyset_page(keyset, Page { after, limit }).await?;
        let versions = rows
            .into_iter()
            .map(AgentVersion::try_from)
            .collect::<Result<_, _>>()?;
        Ok((versions, more))
    }

    /// Adds the next version of the tenant's agent, keeping at most `keep` versions (the
    /// published one always), if its revision is still `expected` (when given).
    pub async fn insert_tenant_agent_version(
        &self,
        tenant: &TenantId,
        name: &str,
        expected: Option<i64>,
        version: impl FnOnce(i64) -> AgentVersion,
        keep: u32,
    ) -> Result<TenantAgent, StoreError> {
        let now = crate::model::now();
        let postgres = matches!(self.db, super::Db::Postgres(_));
        let mut version = Some(version);
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let Some(row) = lock_agent!(tx, tenant, name, postgres) else {
                return Ok(Err(StoreError::NotFound));
            };
            if expected.is_some_and(|e| e != row.revision) {
                return Ok(Err(StoreError::Stale));
            }
            let number = row.latest_version + 1;
            let made = (version.take().expect("called once"))(number);
            insert_version!(tx, row.id, made);
            sqlx::query(
                "DELETE FROM tenant_agent_versions WHERE agent_id = $1 AND version <= $2 \
                 AND version <> COALESCE($3, 0)",
            )
            .bind(row.id)
            .bind(number - i64::from(keep))
            .bind(row.published_version)
            .execute(&mut *tx)
            .await?;
            let updated: AgentRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "UPDATE tenant_agents SET latest_version = $2, revision = revision + 1, \
                 updated_at = $3 WHERE id = $1 RETURNING {AGENT_COLUMNS}"
            )))
            .bind(row.id)
            .bind(number)
            .bind(Stamp(now))
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(Ok(updated.into()))
        })?
    }

    /// Publishes a kept version, or archives (restores) the agent, if its revision is still
    /// `expected` (when given).
    pub async fn update_tenant_agent(
        &self,
        tenant: &TenantId,
        name: &str,
        expected: Option<i64>,
        change: AgentChange,
    ) -> Result<TenantAgent, StoreError> {
        let now = crate::model::now();
        let postgres = matches!(self.db, super::Db::Postgres(_));
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let Some(row) = lock_agent!(tx, tenant, name, postgres) else {
                return Ok(Err(StoreError::NotFound));
            };
            if expected.is_some_and(|e| e != row.revision) {
                return Ok(Err(StoreError::Stale));
            }
            let (published, archived) = match change {
                AgentChange::Publish(version) => {
                    let kept: Option<i64> = sqlx::query_scalar(
                        "SELECT version FROM tenant_agent_versions \
                         WHERE agent_id = $1 AND version = $2",
                    )
                    .bind(row.id)
                    .bind(version)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if kept.is_none() {
                        return Ok(Err(StoreError::NotFound));
                    }
                    (Some(version), row.archived)
                }
                AgentChange::Archive(archived) => (row.published_version, archived),
            };
            let updated: AgentRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "UPDATE tenant_agents SET published_version = $2, archived = $3, \
                 revision = revision + 1, updated_at = $4 WHERE id = $1 RETURNING {AGENT_COLUMNS}"
            )))
            .bind(row.id)
            .bind(published)
            .bind(archived)
            .bind(Stamp(now))
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(Ok(updated.into()))
        })?
    }

    /// Deletes the tenant's agent and its versions; its sessions remain, without an agent.
    pub async fn delete_tenant_agent(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<(), StoreError> {
        let deleted = with_writer!(self, |pool| {
            sqlx::query("DELETE FROM tenant_agents WHERE tenant_id = $1 AND name = $2")
                .bind(tenant)
                .bind(name)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if deleted == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }
}
