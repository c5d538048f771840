//! Webhooks: the endpoints tenants register, and the sender that delivers the messages the
//! event writer queues for them (in the transaction of the event that causes them).
//!
//! Protocol-neutral: a delivery is a JSON body sent with the `webhook-id`,
//! `webhook-timestamp` and `webhook-signature` headers of Standard Webhooks, or with the
//! endpoint's secret as a bearer token, as the endpoint's auth mode says.

mod sender;
mod sign;
mod target;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::WebhooksSettings;
use crate::crypto::SecretBox;
use crate::model::{
    DeliveryAuth, Endpoint, EndpointId, FieldError, MessageId, ProcessId, TenantId,
    WebhookDelivery, WebhookEvent,
};
use crate::store::{EndpointChange, Page, Store, StoreError};

/// The longest description accepted.
const MAX_DESCRIPTION_CHARS: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error(transparent)]
    Invalid(#[from] FieldError),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("the endpoint is disabled: enable it with PATCH {{\"enabled\": true}} first")]
    Disabled,
    #[error("a tenant may register at most {0} webhook endpoints")]
    TooMany(u32),
    #[error(transparent)]
    Store(StoreError),
    #[error("the endpoint's secret cannot be decrypted: {0}")]
    Sealed(#[from] crate::crypto::SealError),
}

impl From<StoreError> for WebhookError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => WebhookError::NotFound("webhook endpoint"),
            other => WebhookError::Store(other),
        }
    }
}

/// An endpoint as a tenant asks for it.
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    pub url: String,
    pub description: Option<String>,
    /// Names of event types; `None`: all of them.
    pub event_types: Option<Vec<String>>,
}

/// What a PATCH asks to change.
#[derive(Debug, Clone, Default)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub description: Option<Option<String>>,
    pub event_types: Option<Vec<String>>,
    pub enabled: Option<bool>,
}

/// A new endpoint with its secret: the only time the secret is shown.
#[derive(Debug, Serialize)]
pub struct CreatedEndpoint {
    #[serde(flatten)]
    pub endpoint: Endpoint,
    pub secret: String,
}

/// A rotation's new secret: the only time it is shown.
#[derive(Debug, Serialize)]
pub struct RotatedSecret {
    pub secret: String,
    /// Until when deliveries are signed with the replaced secret too.
    pub previous_secret_expires_at: DateTime<Utc>,
}

/// The endpoints' operations and their sender.
#[derive(Debug)]
pub struct Webhooks {
    store: Store,
    secrets: SecretBox,
    settings: WebhooksSettings,
    /// The process sending: the holder of the endpoints' leases it takes.
    process: ProcessId,
    /// Wakes the sender: the event writer queued deliveries, or a replay did.
    wake: Arc<Notify>,
    stop: CancellationToken,
    tracker: TaskTracker,
}

impl Webhooks {
    pub fn new(
        store: Store,
        secrets: SecretBox,
        settings: WebhooksSettings,
        process: ProcessId,
        wake: Arc<Notify>,
    ) -> Arc<Webhooks> {
        Arc::new(Webhooks {
            store,
            secrets,
            settings,
            process,
            wake,
            stop: CancellationToken::new(),
            tracker: TaskTracker::new(),
        })
    }

    pub async fn create_endpoint(
        &self,
        tenant: &TenantId,
        request: NewEndpoint,
    ) -> Result<CreatedEndpoint, WebhookError> {
        let url = self.checked_url(&request.url).await?;
        let description = checked_description(request.description)?;
        let mask = match &request.event_types {
            Some(names) => event_mask(names)?,
            None => WebhookEvent::all_mask(),
        };
        let limit = self.settings.max_endpoints_per_tenant;
        if self.store.count_webhook_endpoints(tenant).await? >= i64::from(limit) {
            return Err(WebhookError::TooMany(limit));
        }
        let now = crate::model::now();
        let endpoint = Endpoint {
            id: EndpointId::generate(),
            tenant_id: *tenant,
            url,
            description,
            event_types: WebhookEvent::of_mask(mask),
            auth: DeliveryAuth::Signature,
            enabled: true,
            disabled_reason: None,
            previous_secret_expires_at: None,
            created_at: now,
            updated_at: now,
        };
        let secret = sign::new_secret();
        let sealed = self
            .secrets
            .seal(secret.as_bytes(), &seal_context(tenant, &endpoint.id));
        self.store
            .insert_webhook_endpoint(tenant, &endpoint, mask, &sealed)
            .await?;
        Ok(CreatedEndpoint { endpoint, secret })
    }

    pub async fn list_endpoints(
        &self,
        tenant: &TenantId,
        page: Page,
    ) -> Result<(Vec<Endpoint>, bool), WebhookError> {
        Ok(self.store.list_webhook_endpoints(tenant, page).await?)
    }

    pub async fn get_endpoint(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
    ) -> Result<Endpoint, WebhookError> {
        Ok(self.store.get_webhook_endpoint(tenant, id).await?)
    }

    pub async fn update_endpoint(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
        patch: EndpointPatch,
    ) -> Result<Endpoint, WebhookError> {
        let url = match &patch.url {
            Some(url) => Some(self.checked_url(url).await?),
            None => None,
        };
        let description = match patch.description {
            Some(description) => Some(checked_description(description)?),
            None => None,
        };
        let event_mask = patch.event_types.as_deref().map(event_mask).transpose()?;
        let change = EndpointChange {
            url,
            description,
            event_mask,
            enabled: patch.enabled,
        };
        let endpoint = self
            .store
            .update_webhook_endpoint(tenant, id, &change)
            .await?;
        if patch.enabled == Some(true) {
            self.wake.notify_one();
        }
        Ok(endpoint)
    }

    pub async fn delete_endpoint(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
    ) -> Result<(), WebhookError> {
        Ok(self.store.delete_webhook_endpoint(tenant, id).await?)
    }

    /// A new secret; the replaced one keeps signing for `webhooks.secret_overlap_seconds`.
    pub async fn rotate_secret(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
    ) -> Result<RotatedSecret, WebhookError> {
        let stored = self.store.get_webhook_secrets(tenant, id).await?;
        let context = seal_context(tenant, id);
        let previous = self.secrets.open(&stored.secret, &context)?;
        let secret = sign::new_secret();
        let until = crate::model::now()
            + chrono::Duration::seconds(self.settings.secret_overlap_seconds as i64);
        self.store
            .rotate_webhook_secret(
                tenant,
                id,
                &stored.secret,
                &self.secrets.seal(secret.as_bytes(), &context),
                &self.secrets.seal(&previous, &context),
                until,
            )
            .await
            .map_err(|error| match error {
                // Rotated by another request meanwhile: this one's secret was never valid.
                StoreError::Stale => WebhookError::Store(StoreError::Conflict(
                    "the secret was rotated concurrently".into(),
                )),
                other => other.into(),
            })?;
        Ok(RotatedSecret {
            secret,
            previous_secret_expires_at: until,
        })
    }

    pub async fn list_deliveries(
        &self,
        tenant: &TenantId,
        endpoint: &EndpointId,
        page: Page,
    ) -> Result<(Vec<WebhookDelivery>, bool), WebhookError> {
        self.store.get_webhook_endpoint(tenant, endpoint).await?;
        Ok(self
            .store
            .list_webhook_deliveries(tenant, endpoint, page)
            .await?)
    }

    /// Queues a delivery's message again: a new attempt with the same message id.
    pub async fn replay_delivery(
        &self,
        tenant: &TenantId,
        endpoint: &EndpointId,
        message: &MessageId,
    ) -> Result<WebhookDelivery, WebhookError> {
        if !self
            .store
            .get_webhook_endpoint(tenant, endpoint)
            .await?
            .enabled
        {
            return Err(WebhookError::Disabled);
        }
        let delivery = self
            .store
            .replay_webhook_delivery(tenant, endpoint, message)
            .await
            .map_err(|error| match error {
                StoreError::NotFound => WebhookError::NotFound("delivery"),
                other => other.into(),
            })?;
        self.wake.notify_one();
        Ok(delivery)
    }

    async fn checked_url(&self, url: &str) -> Result<String, WebhookError> {
        let target = target::check_target(url.trim(), &self.settings)
            .await
            .map_err(|message| FieldError::new("url", message))?;
        Ok(target.url.to_string())
    }
}

/// What an endpoint's sealed secrets are bound to.
fn seal_context(tenant: &TenantId, endpoint: &EndpointId) -> String {
    format!("webhook-secret:{tenant}:{endpoint}")
}

fn checked_description(description: Option<String>) -> Result<Option<String>, FieldError> {
    match description {
        Some(text) if text.chars().count() > MAX_DESCRIPTION_CHARS => Err(FieldError::new(
            "description",
            format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
        )),
        Some(text) if text.contains('\0') => Err(FieldError::new(
            "description",
            "must not contain NUL characters",
        )),
        other => Ok(other),
    }
}

fn event_mask(names: &[String]) -> Result<i64, FieldError> {
    if names.is_empty() {
        return Err(FieldError::new(
            "event_types",
            "name at least one event type (omit the field for all of them)",
        ));
    }
    let mut mask = 0;
    for (i, name) in names.iter().enumerate() {
        let event: WebhookEvent = name.parse().map_err(|_| {
            let known: Vec<&str> = WebhookEvent::ALL.iter().map(|e| e.as_str()).collect();
            FieldError::new(
                format!("event_types[{i}]"),
                format!("unknown event type `{name}`; one of {}", known.join(", ")),
            )
        })?;
        mask |= event.bit();
    }
    Ok(mask)
}
