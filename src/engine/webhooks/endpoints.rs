//! The endpoints' operations: registering (with its target checked), changing, rotating
//! the secret, listing and replaying deliveries.

use super::{
    CreatedEndpoint, EndpointPatch, NewEndpoint, RotatedSecret, WebhookError, Webhooks,
    seal_context, sign, target,
};
use crate::model::{
    DeliveryAuth, Endpoint, EndpointId, FieldError, MessageId, TenantId, WebhookDelivery,
    WebhookEvent,
};
use crate::store::{EndpointChange, Page, StoreError};

/// The longest description accepted.
const MAX_DESCRIPTION_CHARS: usize = 512;

impl Webhooks {
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
        // A quick refusal; the insert counts again in its own transaction.
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
            run_id: None,
            format: None,
            created_at: now,
            updated_at: now,
        };
        let secret = sign::new_secret();
        let sealed = self
            .secrets
            .seal(secret.as_bytes(), &seal_context(tenant, &endpoint.id));
        if !self
            .store
            .insert_webhook_endpoint(tenant, &endpoint, mask, &sealed, limit)
            .await?
        {
            return Err(WebhookError::TooMany(limit));
        }
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
        if event_mask.is_some()
            && self
                .store
                .get_webhook_endpoint(tenant, id)
                .await?
                .run_id
                .is_some()
        {
            return Err(FieldError::new(
                "event_types",
                "a run's endpoint is sent its run's status changes (run.status_changed) only",
            )
            .into());
        }
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
        if self
            .store
            .get_webhook_endpoint(tenant, id)
            .await?
            .run_id
            .is_some()
        {
            return Err(WebhookError::RunEndpointToken);
        }
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
                StoreError::Stale => {
                    WebhookError::Concurrent("the secret was rotated concurrently")
                }
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

    pub(super) async fn checked_url(&self, url: &str) -> Result<String, WebhookError> {
        let target = target::check_target(url.trim(), &self.settings)
            .map_err(|message| FieldError::new("url", message))?;
        Ok(target.url.to_string())
    }
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
