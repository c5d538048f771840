//! Webhook endpoints: what a tenant registered, and their sealed secrets. A run's own
//! endpoints are registered in `run_endpoints.rs`; deliveries are in
//! `webhook_deliveries.rs`, and how a turn's stop queues them in `webhook_outbox.rs`.

use chrono::{DateTime, Utc};

use super::Stamp;
use super::keyset::Keyset;
use super::{Page, Store, StoreError, with_db, with_writer};
use crate::model::{Endpoint, EndpointId, RunId, TenantId, WebhookEvent};

const ENDPOINT_COLUMNS: &str = "id, tenant_id, url, description, event_mask, auth, enabled, \
     disabled_reason, previous_until, run_id, format, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct EndpointRow {
    id: EndpointId,
    tenant_id: TenantId,
    url: String,
    description: Option<String>,
    event_mask: i64,
    auth: String,
    enabled: bool,
    disabled_reason: Option<String>,
    previous_until: Option<Stamp>,
    run_id: Option<RunId>,
    format: Option<String>,
    created_at: Stamp,
    updated_at: Stamp,
}

impl TryFrom<EndpointRow> for Endpoint {
    type Error = StoreError;

    fn try_from(row: EndpointRow) -> Result<Self, StoreError> {
        Ok(Endpoint {
            id: row.id,
            tenant_id: row.tenant_id,
            url: row.url,
            description: row.description,
            event_types: WebhookEvent::of_mask(row.event_mask),
            auth: row.auth.parse().map_err(StoreError::Corrupt)?,
            enabled: row.enabled,
            disabled_reason: row.disabled_reason,
            previous_secret_expires_at: row.previous_until.map(Into::into),
            run_id: row.run_id,
            format: row.format,
            created_at: row.created_at.into(),
            updated_at: row.updated_at.into(),
        })
    }
}

/// An endpoint's secrets as stored (sealed).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SealedSecrets {
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_until: Option<Stamp>,
}

/// What a PATCH changes of an endpoint.
#[derive(Debug, Clone, Default)]
pub struct EndpointChange {
    pub url: Option<String>,
    pub description: Option<Option<String>>,
    pub event_mask: Option<i64>,
    /// `Some(true)` enables it again (its reason and pending retry delay are cleared).
    pub enabled: Option<bool>,
}

/// Serializes the endpoint writes of one tenant over every process (PostgreSQL): the
/// limits are counted and the row added under it.
pub(super) const ENDPOINTS_LOCK: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 9))";

impl Store {
    /// The tenant's endpoints, not counting its runs' own.
    pub async fn count_webhook_endpoints(&self, tenant: &TenantId) -> Result<i64, StoreError> {
        Ok(with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM webhook_endpoints WHERE tenant_id = $1 AND run_id IS NULL",
            )
            .bind(tenant)
            .fetch_one(pool)
            .await
        })?)
    }

    /// Records a new tenant-wide endpoint unless the tenant already has `max` of them
    /// (`false`): counted and written in one transaction, so concurrent creations stop at
    /// the limit exactly (on PostgreSQL they take turns on a lock of the tenant's).
    pub async fn insert_webhook_endpoint(
        &self,
        tenant: &TenantId,
        endpoint: &Endpoint,
        event_mask: i64,
        sealed_secret: &str,
        max: u32,
    ) -> Result<bool, StoreError> {
        if let super::Db::Sqlite(pools) = &self.db {
            // Before the endpoint exists: no stop after it may miss it.
            self.webhook_tenants.loaded(&pools.read).await?.add(tenant);
        }
        let postgres = matches!(self.db, super::Db::Postgres(_));
        let inserted = with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            if postgres {
                sqlx::query(ENDPOINTS_LOCK)
                    .bind(tenant.to_uuid().to_string())
                    .execute(&mut *tx)
                    .await?;
            }
            let inserted = sqlx::query(
                "INSERT INTO webhook_endpoints (id, tenant_id, url, description, event_mask, \
                 auth, secret, enabled, created_at, updated_at) \
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9 \
                 WHERE (SELECT COUNT(*) FROM webhook_endpoints \
                        WHERE tenant_id = $2 AND run_id IS NULL) < $10",
            )
            .bind(endpoint.id)
            .bind(tenant)
            .bind(&endpoint.url)
            .bind(&endpoint.description)
            .bind(event_mask)
            .bind(endpoint.auth.as_str())
            .bind(sealed_secret)
            .bind(endpoint.enabled)
            .bind(Stamp(endpoint.created_at))
            .bind(i64::from(max))
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            Ok::<_, sqlx::Error>(inserted)
        })?;
        Ok(inserted == 1)
    }

    pub async fn list_webhook_endpoints(
        &self,
        tenant: &TenantId,
        page: Page,
    ) -> Result<(Vec<Endpoint>, bool), StoreError> {
        let keyset = Keyset {
            columns: ENDPOINT_COLUMNS,
            table: "webhook_endpoints",
            scope: &[("tenant_id", tenant.to_uuid())],
            key: "id",
        };
        let (rows, more): (Vec<EndpointRow>, bool) = self.keyset_page(keyset, page).await?;
        let endpoints = rows
            .into_iter()
            .map(Endpoint::try_from)
            .collect::<Result<_, _>>()?;
        Ok((endpoints, more))
    }

    pub async fn get_webhook_endpoint(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
    ) -> Result<Endpoint, StoreError> {
        let row: EndpointRow = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2"
            )))
            .bind(tenant)
            .bind(id)
            .fetch_one(pool)
            .await
        })?;
        row.try_into()
    }

    /// Applies a change; the endpoint as it is then.
    pub async fn update_webhook_endpoint(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
        change: &EndpointChange,
    ) -> Result<Endpoint, StoreError> {
        let now = Stamp(crate::model::now());
        let updated = with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE webhook_endpoints SET url = COALESCE($3, url), \
                 description = CASE WHEN $4 THEN $5 ELSE description END, \
                 event_mask = COALESCE($6, event_mask), \
                 enabled = COALESCE($7, enabled), \
                 disabled_reason = CASE WHEN $7 THEN NULL ELSE disabled_reason END, \
                 retry_at = CASE WHEN $7 THEN NULL ELSE retry_at END, \
                 updated_at = $8 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(id)
            .bind(&change.url)
            .bind(change.description.is_some())
            .bind(change.description.clone().flatten())
            .bind(change.event_mask)
            .bind(change.enabled)
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        if updated == 0 {
            return Err(StoreError::NotFound);
        }
        self.get_webhook_endpoint(tenant, id).await
    }

    /// Deletes the endpoint and its deliveries.
    pub async fn delete_webhook_endpoint(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
    ) -> Result<(), StoreError> {
        let deleted = with_writer!(self, |pool| {
            sqlx::query("DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if deleted == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    pub async fn get_webhook_secrets(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
    ) -> Result<SealedSecrets, StoreError> {
        Ok(with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT secret, previous_secret, previous_until FROM webhook_endpoints \
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(id)
            .fetch_one(pool)
            .await
        })?)
    }

    /// Replaces the secret if it is still `current`; the replaced one signs until `until`.
    pub async fn rotate_webhook_secret(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
        current: &str,
        new: &str,
        previous: &str,
        until: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let rotated = with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE webhook_endpoints SET secret = $4, previous_secret = $5, \
                 previous_until = $6, updated_at = $7 \
                 WHERE tenant_id = $1 AND id = $2 AND secret = $3",
            )
            .bind(tenant)
            .bind(id)
            .bind(current)
            .bind(new)
            .bind(previous)
            .bind(Stamp(until))
            .bind(Stamp(crate::model::now()))
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        if rotated == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
    }
}
