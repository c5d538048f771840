//! The outbox of webhook deliveries: listing and replaying them, and what a sender needs to
//! send them. A sender leases an endpoint and sends its pending deliveries one at a time,
//! oldest message first.

use chrono::{DateTime, Utc};

use super::Stamp;
use super::keyset::Keyset;
use super::{Page, SealedSecrets, Store, StoreError, with_db, with_writer};
use crate::model::{DeliveryStatus, EndpointId, MessageId, ProcessId, TenantId, WebhookDelivery};

const DELIVERY_COLUMNS: &str = "message_id, endpoint_id, event_type, status, attempts, \
     next_attempt_at, last_attempt_at, last_status, last_error, created_at";

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    message_id: MessageId,
    endpoint_id: EndpointId,
    event_type: String,
    status: String,
    attempts: i32,
    next_attempt_at: Option<Stamp>,
    last_attempt_at: Option<Stamp>,
    last_status: Option<i32>,
    last_error: Option<String>,
    created_at: Stamp,
}

impl TryFrom<DeliveryRow> for WebhookDelivery {
    type Error = StoreError;

    fn try_from(row: DeliveryRow) -> Result<Self, StoreError> {
        Ok(WebhookDelivery {
            id: row.message_id,
            endpoint_id: row.endpoint_id,
            event_type: row.event_type,
            status: row.status.parse().map_err(StoreError::Corrupt)?,
            attempts: i64::from(row.attempts),
            next_attempt_at: row.next_attempt_at.map(Into::into),
            last_attempt_at: row.last_attempt_at.map(Into::into),
            last_status: row.last_status.map(i64::from),
            last_error: row.last_error,
            created_at: row.created_at.into(),
        })
    }
}

/// The next delivery of a leased endpoint, with what sending it takes.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Outbound {
    pub tenant_id: TenantId,
    pub endpoint_id: EndpointId,
    pub url: String,
    pub auth: String,
    #[sqlx(flatten)]
    pub secrets: SealedSecrets,
    /// A run's endpoint's payload format and `Authorization` (its credentials sealed).
    pub format: Option<String>,
    pub authorization_scheme: Option<String>,
    pub authorization_credentials: Option<String>,
    pub message_id: MessageId,
    pub event_type: String,
    pub agent: String,
    pub data: String,
    pub attempts: i32,
    pub queued_at: Stamp,
    pub next_attempt_at: Option<Stamp>,
    pub created_at: Stamp,
}

/// How an attempt ended, as the sender records it.
#[derive(Debug, Clone)]
pub enum AttemptOutcome {
    Delivered {
        status: u16,
    },
    /// Retried at `retry_at`.
    Retry {
        status: Option<u16>,
        error: String,
        retry_at: DateTime<Utc>,
    },
    /// Every attempt failed: the delivery fails and its endpoint is disabled.
    Exhausted {
        status: Option<u16>,
        error: String,
        disabled_reason: String,
    },
}

impl Store {
    /// An endpoint's deliveries, newest first.
    pub async fn list_webhook_deliveries(
        &self,
        tenant: &TenantId,
        endpoint: &EndpointId,
        page: Page,
    ) -> Result<(Vec<WebhookDelivery>, bool), StoreError> {
        let keyset = Keyset {
            columns: DELIVERY_COLUMNS,
            table: "webhook_deliveries",
            scope: &[
                ("tenant_id", tenant.to_uuid()),
                ("endpoint_id", endpoint.to_uuid()),
            ],
            key: "message_id",
        };
        let (rows, more): (Vec<DeliveryRow>, bool) = self.keyset_page(keyset, page).await?;
        let deliveries = rows
            .into_iter()
            .map(WebhookDelivery::try_from)
            .collect::<Result<_, _>>()?;
        Ok((deliveries, more))
    }

    /// Queues the message again for a new attempt now (its retry window starts again).
    pub async fn replay_webhook_delivery(
        &self,
        tenant: &TenantId,
        endpoint: &EndpointId,
        message: &MessageId,
    ) -> Result<WebhookDelivery, StoreError> {
        let now = Stamp(crate::model::now());
        let row: DeliveryRow = with_writer!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "UPDATE webhook_deliveries SET status = 'pending', queued_at = $4, \
                 next_attempt_at = $4 WHERE tenant_id = $1 AND endpoint_id = $2 \
                 AND message_id = $3 RETURNING {DELIVERY_COLUMNS}"
            )))
            .bind(tenant)
            .bind(endpoint)
            .bind(message)
            .bind(now)
            .fetch_one(pool)
            .await
        })?;
        // The replayed message is sent next: nothing waits for an earlier one's retry.
        with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE webhook_endpoints SET retry_at = NULL WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(endpoint)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        row.try_into()
    }

    /// Enabled endpoints with a pending delivery due and no living lease: candidates for
    /// [`Store::claim_webhook_endpoint`]. Found from the pending deliveries (their partial
    /// index), not by reading every endpoint: runs' endpoints are many and mostly idle.
    pub async fn due_webhook_endpoints(
        &self,
        limit: i64,
    ) -> Result<Vec<(EndpointId, TenantId)>, StoreError> {
        let now = Stamp(crate::model::now());
        Ok(with_db!(self, |pool| {
            // Round-robin over tenants: every tenant's oldest due endpoint, then every
            // tenant's second, and so on, so that one tenant's many cannot fill the page.
            sqlx::query_as(
                "SELECT id, tenant_id FROM (SELECT e.id, e.tenant_id, e.retry_at, \
                 ROW_NUMBER() OVER (PARTITION BY e.tenant_id ORDER BY e.retry_at) AS turn \
                 FROM webhook_endpoints e WHERE e.id IN (SELECT d.endpoint_id \
                 FROM webhook_deliveries d WHERE d.status = 'pending') AND e.enabled \
                 AND (e.retry_at IS NULL OR e.retry_at <= $1) \
                 AND (e.lease_until IS NULL OR e.lease_until < $1)) AS due \
                 ORDER BY turn, retry_at LIMIT $2",
            )
            .bind(now)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    /// Takes (or renews) the endpoint's lease for `process` until `until`: `false` if
    /// another process holds it.
    pub async fn claim_webhook_endpoint(
        &self,
        endpoint: &EndpointId,
        process: &ProcessId,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let now = Stamp(crate::model::now());
        let claimed = with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE webhook_endpoints SET lease_owner = $2, lease_until = $3 \
                 WHERE id = $1 AND enabled \
                 AND (lease_owner = $2 OR lease_until IS NULL OR lease_until < $4)",
            )
            .bind(endpoint)
            .bind(process)
            .bind(Stamp(until))
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(claimed == 1)
    }

    /// Gives the lease back; the endpoint's next try is at `retry_at` (none: at once).
    pub async fn release_webhook_endpoint(
        &self,
        endpoint: &EndpointId,
        process: &ProcessId,
        retry_at: Option<DateTime<Utc>>,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE webhook_endpoints SET lease_owner = NULL, lease_until = NULL, \
                 retry_at = $3 WHERE id = $1 AND lease_owner = $2",
            )
            .bind(endpoint)
            .bind(process)
            .bind(retry_at.map(Stamp))
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    /// The oldest pending delivery of an endpoint this process leases.
    pub async fn next_webhook_delivery(
        &self,
        endpoint: &EndpointId,
        process: &ProcessId,
    ) -> Result<Option<Outbound>, StoreError> {
        Ok(with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT e.tenant_id, e.id AS endpoint_id, e.url, e.auth, e.secret, \
                 e.previous_secret, e.previous_until, e.format, e.authorization_scheme, \
                 e.authorization_credentials, d.message_id, d.event_type, d.agent, \
                 d.data, d.attempts, d.queued_at, d.next_attempt_at, d.created_at \
                 FROM webhook_endpoints e JOIN webhook_deliveries d ON d.endpoint_id = e.id \
                 WHERE e.id = $1 AND e.lease_owner = $2 AND e.enabled \
                 AND d.tenant_id = e.tenant_id AND d.status = 'pending' \
                 ORDER BY d.message_id LIMIT 1",
            )
            .bind(endpoint)
            .bind(process)
            .fetch_optional(pool)
            .await
        })?)
    }

    /// Records an attempt of a delivery (and, when it exhausted its retries, disables its
    /// endpoint), in one transaction.
    pub async fn record_webhook_attempt(
        &self,
        delivery: &Outbound,
        at: DateTime<Utc>,
        outcome: &AttemptOutcome,
    ) -> Result<(), StoreError> {
        let (status, last_status, error, next, disabled) = match outcome {
            AttemptOutcome::Delivered { status } => {
                (DeliveryStatus::Delivered, Some(*status), None, None, None)
            }
            AttemptOutcome::Retry {
                status,
                error,
                retry_at,
            } => (
                DeliveryStatus::Pending,
                *status,
                Some(error.as_str()),
                Some(Stamp(*retry_at)),
                None,
            ),
            AttemptOutcome::Exhausted {
                status,
                error,
                disabled_reason,
            } => (
                DeliveryStatus::Failed,
                *status,
                Some(error.as_str()),
                None,
                Some(disabled_reason.as_str()),
            ),
        };
        macro_rules! record {
            ($tx:ident) => {
                sqlx::query(
                    "UPDATE webhook_deliveries SET status = $4, attempts = attempts + 1, \
                     last_attempt_at = $5, last_status = $6, last_error = $7, \
                     next_attempt_at = $8 \
                     WHERE tenant_id = $1 AND endpoint_id = $2 AND message_id = $3",
                )
                .bind(delivery.tenant_id)
                .bind(delivery.endpoint_id)
                .bind(delivery.message_id)
                .bind(status.as_str())
                .bind(Stamp(at))
                .bind(last_status.map(i32::from))
                .bind(error)
                .bind(next)
                .execute(&mut *$tx)
                .await?;
                if let Some(reason) = disabled {
                    sqlx::query(
                        "UPDATE webhook_endpoints SET enabled = $3, disabled_reason = $4, \
                         updated_at = $5 WHERE tenant_id = $1 AND id = $2",
                    )
                    .bind(delivery.tenant_id)
                    .bind(delivery.endpoint_id)
                    .bind(false)
                    .bind(reason)
                    .bind(Stamp(at))
                    .execute(&mut *$tx)
                    .await?;
                }
            };
        }
        match &self.db {
            super::Db::Sqlite(pools) => {
                let mut tx = pools.write.begin().await?;
                record!(tx);
                tx.commit().await?;
            }
            super::Db::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                record!(tx);
                tx.commit().await?;
            }
        }
        Ok(())
    }
}
