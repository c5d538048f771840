//! Sessions and the seed messages they are created with.

use std::collections::BTreeMap;

use sqlx::types::Json;

use super::Stamp;
use super::keyset::Keyset;
use super::{Page, Store, StoreError, with_db, with_writer};
use crate::model::{
    AgentId, HistoryMessage, ServerToolRef, Session, SessionId, TenantId, ToolSpec, scrub_nul,
};

#[derive(sqlx::FromRow)]
pub(super) struct SessionRow {
    id: SessionId,
    tenant_id: TenantId,
    agent: String,
    agent_id: Option<AgentId>,
    agent_version: Option<i64>,
    server_tools: Json<Vec<ServerToolRef>>,
    options: Json<BTreeMap<String, String>>,
    sealed_options: Json<BTreeMap<String, String>>,
    client_tools: Json<Vec<ToolSpec>>,
    alias: Option<String>,
    created_at: Stamp,
    updated_at: Stamp,
}

impl From<SessionRow> for Session {
    fn from(row: SessionRow) -> Self {
        Session {
            id: row.id,
            tenant_id: row.tenant_id,
            agent: row.agent,
            agent_version: row.agent_id.zip(row.agent_version),
            server_tools: row.server_tools.0,
            options: row.options.0,
            sealed_options: row.sealed_options.0,
            client_tools: row.client_tools.0,
            alias: row.alias,
            created_at: row.created_at.into(),
            updated_at: row.updated_at.into(),
        }
    }
}

pub(super) const SESSION_COLUMNS: &str = "id, tenant_id, agent, agent_id, agent_version, server_tools, options, sealed_options, \
                               client_tools, alias, created_at, updated_at";

impl Store {
    /// Records a new session and its seed messages atomically, unless the tenant already
    /// keeps `max_sessions` sessions (`false`).
    pub async fn insert_session(
        &self,
        tenant: &TenantId,
        session: &Session,
        seed: &[HistoryMessage],
        max_sessions: Option<u64>,
    ) -> Result<bool, StoreError> {
        let postgres = matches!(self.db, super::Db::Postgres(_));
        let created = with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            if let Some(max) = max_sessions {
                if postgres {
                    // Two processes creating the tenant's last allowed session take turns.
                    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 8))")
                        .bind(tenant.to_uuid().to_string())
                        .execute(&mut *tx)
                        .await?;
                }
                let count: i64 =
                    sqlx::query_scalar("SELECT COUNT(*) FROM sessions WHERE tenant_id = $1")
                        .bind(tenant)
                        .fetch_one(&mut *tx)
                        .await?;
                if count as u64 >= max {
                    tx.rollback().await?;
                    return Ok(false);
                }
            }
            sqlx::query(
                "INSERT INTO sessions (id, tenant_id, agent, server_tools, options, \
                 sealed_options, client_tools, alias, created_at, updated_at, agent_id, \
                 agent_version) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11)",
            )
            .bind(session.id)
            .bind(tenant)
            .bind(&session.agent)
            .bind(Json(&session.server_tools))
            .bind(Json(&session.options))
            .bind(Json(&session.sealed_options))
            .bind(Json(&session.client_tools))
            .bind(&session.alias)
            .bind(Stamp(session.created_at))
            .bind(session.agent_version.map(|(id, _)| id))
            .bind(session.agent_version.map(|(_, v)| v))
            .execute(&mut *tx)
            .await?;
            for (position, message) in seed.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO history (session_id, position, message, created_at) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind(session.id)
                .bind(position as i64)
                .bind(Json(scrub_nul(message.clone())))
                .bind(Stamp(session.created_at))
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(true)
        })?;
        Ok(created)
    }

    pub async fn get_session(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Session, StoreError> {
        let row: SessionRow = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant_id = $1 AND id = $2"
            )))
            .bind(tenant)
            .bind(session)
            .fetch_one(pool)
            .await
        })?;
        Ok(row.into())
    }

    /// The session a client knows by its own key.
    pub async fn find_session_by_alias(
        &self,
        tenant: &TenantId,
        alias: &str,
    ) -> Result<Option<Session>, StoreError> {
        let row: Option<SessionRow> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant_id = $1 AND alias = $2"
            )))
            .bind(tenant)
            .bind(alias)
            .fetch_optional(pool)
            .await
        })?;
        Ok(row.map(Session::from))
    }

    /// The tenant's sessions, newest first.
    pub async fn list_sessions(
        &self,
        tenant: &TenantId,
        page: Page,
    ) -> Result<(Vec<Session>, bool), StoreError> {
        let keyset = Keyset {
            columns: SESSION_COLUMNS,
            table: "sessions",
            scope: &[("tenant_id", tenant.to_uuid())],
            key: "id",
        };
        let (rows, more): (Vec<SessionRow>, bool) = self.keyset_page(keyset, page).await?;
        Ok((rows.into_iter().map(Session::from).collect(), more))
    }

    /// The ids of every session of the tenant.
    pub async fn list_session_ids(&self, tenant: &TenantId) -> Result<Vec<SessionId>, StoreError> {
        let ids = with_db!(self, |pool| {
            sqlx::query_scalar("SELECT id FROM sessions WHERE tenant_id = $1")
                .bind(tenant)
                .fetch_all(pool)
                .await
        })?;
        Ok(ids)
    }

    /// Deletes the session and, by cascade, its histories.
    pub async fn delete_session(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<(), StoreError> {
        let result = with_writer!(self, |pool| {
            sqlx::query("DELETE FROM sessions WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(session)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if result == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }
}
