//! A run's own webhook endpoints: rows of `webhook_endpoints` with a `run_id`, named by a
//! key unique within the run, told only of their run's status changes (see
//! `webhook_outbox.rs`), sent by the same sender as a tenant's.

use super::Stamp;
use super::{Store, StoreError, with_db, with_writer};
use crate::model::{EndpointId, RunEndpoint, RunId, TenantId, WebhookEvent};

const RUN_ENDPOINT_COLUMNS: &str =
    "id, run_id, run_key, url, authorization_scheme, format, created_at";

#[derive(sqlx::FromRow)]
struct RunEndpointRow {
    id: EndpointId,
    run_id: RunId,
    run_key: String,
    url: String,
    authorization_scheme: Option<String>,
    format: String,
    created_at: Stamp,
}

impl From<RunEndpointRow> for RunEndpoint {
    fn from(row: RunEndpointRow) -> Self {
        RunEndpoint {
            id: row.id,
            run: row.run_id,
            key: row.run_key,
            url: row.url,
            authorization_scheme: row.authorization_scheme,
            format: row.format,
            created_at: row.created_at.into(),
        }
    }
}

/// A run's endpoint as written: its secrets sealed for its id.
#[derive(Debug, Clone)]
pub struct RunEndpointRecord {
    pub endpoint: RunEndpoint,
    pub sealed_token: String,
    pub sealed_credentials: Option<String>,
}

/// How many run endpoints a new key may join.
#[derive(Debug, Clone, Copy)]
pub struct RunEndpointLimits {
    pub per_run: u32,
    pub per_tenant: u32,
}

/// What writing a run's endpoint did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunEndpointWrite {
    /// Written; when it was first created.
    Written(Stamp),
    /// The key belongs to another id (written meanwhile): nothing was written.
    Taken,
    /// The run has its most endpoints: nothing was written.
    RunFull,
    /// The tenant has its most run endpoints: nothing was written.
    TenantFull,
}

impl Store {
    /// The id of the run's endpoint under `key`, if there is one.
    pub async fn find_run_webhook_endpoint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &str,
    ) -> Result<Option<EndpointId>, StoreError> {
        Ok(with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT id FROM webhook_endpoints \
                 WHERE tenant_id = $1 AND run_id = $2 AND run_key = $3",
            )
            .bind(tenant)
            .bind(run)
            .bind(key)
            .fetch_optional(pool)
            .await
        })?)
    }

    /// The tenant's run endpoints over all its runs.
    pub async fn count_run_webhook_endpoints_of_tenant(
        &self,
        tenant: &TenantId,
    ) -> Result<i64, StoreError> {
        Ok(with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM webhook_endpoints WHERE tenant_id = $1 AND run_id IS NOT NULL",
            )
            .bind(tenant)
            .fetch_one(pool)
            .await
        })?)
    }

    /// Writes the run's endpoint under its key: a new row, or the row of that key when it
    /// has the record's id (enabled again, its retry delay cleared). A new key is written
    /// only while the run has fewer than `limits.per_run` other keys and the tenant fewer
    /// than `limits.per_tenant` run endpoints, counted in the same transaction (on
    /// PostgreSQL under a lock of the tenant's), so concurrent writes stop at the limits.
    pub async fn upsert_run_webhook_endpoint(
        &self,
        tenant: &TenantId,
        record: &RunEndpointRecord,
        limits: RunEndpointLimits,
    ) -> Result<RunEndpointWrite, StoreError> {
        if let super::Db::Sqlite(pools) = &self.db {
            // Before the endpoint exists: no stop after it may miss it.
            self.webhook_tenants.loaded(&pools.read).await?.add(tenant);
        }
        let postgres = matches!(self.db, super::Db::Postgres(_));
        let endpoint = &record.endpoint;
        Ok(with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            if postgres {
                sqlx::query(super::webhooks::ENDPOINTS_LOCK)
                    .bind(tenant.to_uuid().to_string())
                    .execute(&mut *tx)
                    .await?;
            }
            let existing: Option<EndpointId> = sqlx::query_scalar(
                "SELECT id FROM webhook_endpoints \
                 WHERE tenant_id = $1 AND run_id = $2 AND run_key = $3",
            )
            .bind(tenant)
            .bind(endpoint.run)
            .bind(&endpoint.key)
            .fetch_optional(&mut *tx)
            .await?;
            if existing.is_none() {
                let (of_run, of_tenant): (i64, i64) = sqlx::query_as(
                    "SELECT (SELECT COUNT(*) FROM webhook_endpoints \
                             WHERE tenant_id = $1 AND run_id = $2), \
                            (SELECT COUNT(*) FROM webhook_endpoints \
                             WHERE tenant_id = $1 AND run_id IS NOT NULL)",
                )
                .bind(tenant)
                .bind(endpoint.run)
                .fetch_one(&mut *tx)
                .await?;
                if of_run >= i64::from(limits.per_run) {
                    return Ok(RunEndpointWrite::RunFull);
                }
                if of_tenant >= i64::from(limits.per_tenant) {
                    return Ok(RunEndpointWrite::TenantFull);
                }
            }
            let written: Option<Stamp> = sqlx::query_scalar(
                "INSERT INTO webhook_endpoints (id, tenant_id, url, event_mask, auth, secret, \
                 enabled, run_id, run_key, format, authorization_scheme, \
                 authorization_credentials, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, 'signature', $5, $6, $7, $8, $9, $10, $11, $12, $12) \
                 ON CONFLICT (run_id, run_key) DO UPDATE SET url = excluded.url, \
                 event_mask = excluded.event_mask, secret = excluded.secret, \
                 previous_secret = NULL, previous_until = NULL, enabled = excluded.enabled, \
                 disabled_reason = NULL, retry_at = NULL, format = excluded.format, \
                 authorization_scheme = excluded.authorization_scheme, \
                 authorization_credentials = excluded.authorization_credentials, \
                 updated_at = excluded.updated_at \
                 WHERE webhook_endpoints.id = excluded.id \
                 AND webhook_endpoints.tenant_id = excluded.tenant_id \
                 RETURNING created_at",
            )
            .bind(endpoint.id)
            .bind(tenant)
            .bind(&endpoint.url)
            .bind(WebhookEvent::RunStatusChanged.bit())
            .bind(&record.sealed_token)
            .bind(true)
            .bind(endpoint.run)
            .bind(&endpoint.key)
            .bind(&endpoint.format)
            .bind(&endpoint.authorization_scheme)
            .bind(&record.sealed_credentials)
            .bind(Stamp(endpoint.created_at))
            .fetch_optional(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(match written {
                Some(at) => RunEndpointWrite::Written(at),
                None => RunEndpointWrite::Taken,
            })
        })?)
    }

    pub async fn get_run_webhook_endpoint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &str,
    ) -> Result<RunEndpoint, StoreError> {
        let row: RunEndpointRow = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_ENDPOINT_COLUMNS} FROM webhook_endpoints \
                 WHERE tenant_id = $1 AND run_id = $2 AND run_key = $3"
            )))
            .bind(tenant)
            .bind(run)
            .bind(key)
            .fetch_one(pool)
            .await
        })?;
        Ok(row.into())
    }

    /// The run's endpoints, oldest first.
    pub async fn list_run_webhook_endpoints(
        &self,
        tenant: &TenantId,
        run: &RunId,
    ) -> Result<Vec<RunEndpoint>, StoreError> {
        let rows: Vec<RunEndpointRow> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_ENDPOINT_COLUMNS} FROM webhook_endpoints \
                 WHERE tenant_id = $1 AND run_id = $2 ORDER BY id"
            )))
            .bind(tenant)
            .bind(run)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(RunEndpoint::from).collect())
    }

    /// Deletes the run's endpoint under `key` and its deliveries: whether there was one.
    pub async fn delete_run_webhook_endpoint(
        &self,
        tenant: &TenantId,
        run: &RunId,
        key: &str,
    ) -> Result<bool, StoreError> {
        let deleted = with_writer!(self, |pool| {
            sqlx::query(
                "DELETE FROM webhook_endpoints \
                 WHERE tenant_id = $1 AND run_id = $2 AND run_key = $3",
            )
            .bind(tenant)
            .bind(run)
            .bind(key)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(deleted > 0)
    }
}
