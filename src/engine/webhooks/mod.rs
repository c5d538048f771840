//! Webhooks: the endpoints tenants register (for everything, or for one run), and the
//! sender that delivers the messages the event writer queues for them (in the transaction
//! of the event that causes them).
//!
//! Protocol-neutral: a delivery to a tenant's endpoint is a JSON body sent with the
//! `webhook-id`, `webhook-timestamp` and `webhook-signature` headers of Standard Webhooks,
//! or with the endpoint's secret as a bearer token, as the endpoint's auth mode says. A
//! run's own endpoint gets the body of the payload format a face registered, signed with
//! its token.

mod endpoints;
mod payload;
mod run_endpoints;
mod sender;
mod sign;
mod target;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::WebhooksSettings;
use crate::crypto::SecretBox;
use crate::metrics::Metrics;
use crate::model::{Endpoint, EndpointId, FieldError, ProcessId, TenantId};
use crate::store::{Store, StoreError};

pub use crate::model::RunEndpoint;
pub use payload::{OutboundMessage, Payload, PayloadFormat};
pub use run_endpoints::{Authorization, CreatedRunEndpoint, NewRunEndpoint};

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
    #[error("a run may have at most {0} webhook endpoints")]
    TooManyForRun(u32),
    #[error(
        "a tenant may have at most {0} run endpoints (push notification configs) over all its runs"
    )]
    TooManyRunEndpoints(u32),
    #[error(
        "a run's endpoint signs with the token its client chose: register it again with a new \
         token instead"
    )]
    RunEndpointToken,
    /// Another request changed the endpoint meanwhile: this one was not applied.
    #[error("{0}")]
    Concurrent(&'static str),
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
    metrics: Arc<Metrics>,
    /// The payload formats faces registered, by name.
    formats: RwLock<HashMap<String, Arc<dyn PayloadFormat>>>,
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
        metrics: Arc<Metrics>,
    ) -> Arc<Webhooks> {
        Arc::new(Webhooks {
            store,
            secrets,
            settings,
            process,
            wake,
            metrics,
            formats: RwLock::default(),
            stop: CancellationToken::new(),
            tracker: TaskTracker::new(),
        })
    }
}

/// What an endpoint's sealed secrets (or a run's endpoint's token) are bound to.
fn seal_context(tenant: &TenantId, endpoint: &EndpointId) -> String {
    format!("webhook-secret:{tenant}:{endpoint}")
}

/// What a run's endpoint's sealed `Authorization` credentials are bound to.
fn credentials_context(tenant: &TenantId, endpoint: &EndpointId) -> String {
    format!("webhook-authorization:{tenant}:{endpoint}")
}
