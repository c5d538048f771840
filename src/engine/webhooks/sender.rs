//! The sender: a task per process that leases endpoints with due deliveries and sends each
//! endpoint's deliveries one at a time, oldest message first. The lease lives in the
//! database, so two processes never send to one endpoint at once; a process that dies
//! mid-attempt leaves its lease to expire, and the message is sent again (same id).
//!
//! Fair over tenants: due endpoints are taken round-robin over tenants, and one tenant's
//! endpoints hold at most `webhooks.max_concurrent_endpoints_per_tenant` of the process's
//! slots, so a tenant whose receivers are slow (every attempt bounded by
//! `webhooks.timeout_seconds`) delays only its own deliveries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use super::{Webhooks, target};
use crate::model::{EndpointId, TenantId};
use crate::store::{AttemptOutcome, Outbound};

/// How long an endpoint's lease outlasts the longest attempt.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// The longest reason kept of a failed attempt.
const MAX_ERROR_CHARS: usize = 200;

/// The process's sending slots, and each tenant's share of them.
struct Slots {
    process: Arc<Semaphore>,
    per_tenant: usize,
    tenants: HashMap<TenantId, Arc<Semaphore>>,
}

impl Slots {
    fn of(&mut self, tenant: &TenantId) -> Arc<Semaphore> {
        let per_tenant = self.per_tenant;
        self.tenants
            .entry(*tenant)
            .or_insert_with(|| Arc::new(Semaphore::new(per_tenant)))
            .clone()
    }

    /// Tenants with nothing in flight need no semaphore kept.
    fn forget_idle(&mut self) {
        let per_tenant = self.per_tenant;
        self.tenants
            .retain(|_, slots| slots.available_permits() < per_tenant);
    }
}

/// How one attempt went.
struct Attempt {
    status: Option<u16>,
    /// Why it failed; `None` when it was delivered.
    error: Option<String>,
}

impl Webhooks {
    /// Starts the sender; it stops at [`Webhooks::shutdown`].
    pub fn start(self: &Arc<Self>) {
        let sender = self.clone();
        tokio::spawn(async move { sender.run().await });
    }

    /// Stops taking deliveries, ends attempts in flight (they are sent again later) and
    /// gives the endpoints' leases back.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }

    async fn run(self: Arc<Self>) {
        let mut slots = Slots {
            process: Arc::new(Semaphore::new(self.settings.max_concurrent_endpoints)),
            per_tenant: self.settings.max_concurrent_endpoints_per_tenant,
            tenants: HashMap::new(),
        };
        let mut tick = tokio::time::interval(Duration::from_millis(self.settings.poll_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = self.wake.notified() => {}
                _ = tick.tick() => {}
            }
            if let Err(error) = self.take_due(&mut slots).await {
                tracing::warn!(%error, "cannot look for due webhook deliveries");
            }
        }
    }

    /// Leases endpoints with due deliveries while slots are free, a task each.
    async fn take_due(self: &Arc<Self>, slots: &mut Slots) -> Result<(), crate::store::StoreError> {
        slots.forget_idle();
        loop {
            let free = slots.process.available_permits();
            if free == 0 {
                return Ok(());
            }
            let due = self.store.due_webhook_endpoints(free as i64 * 2).await?;
            let mut taken = 0;
            for (endpoint, tenant) in due {
                let Ok(slot) = slots.process.clone().try_acquire_owned() else {
                    return Ok(());
                };
                // A tenant using all its slots waits; the others go on.
                let Ok(tenant_slot) = slots.of(&tenant).try_acquire_owned() else {
                    continue;
                };
                if !self
                    .store
                    .claim_webhook_endpoint(&endpoint, &self.process, self.lease_until())
                    .await?
                {
                    continue;
                }
                taken += 1;
                let sender = self.clone();
                self.tracker
                    .spawn(async move { sender.drain(endpoint, (slot, tenant_slot)).await });
            }
            if taken == 0 {
                return Ok(());
            }
        }
    }

    fn lease_until(&self) -> DateTime<Utc> {
        let lease = Duration::from_secs(self.settings.timeout_seconds) + LEASE_MARGIN;
        crate::model::now() + chrono::Duration::from_std(lease).expect("a short lease")
    }

    /// Sends the endpoint's due deliveries in order until none is due, one fails, or the
    /// process stops; then gives the lease back.
    async fn drain(
        self: Arc<Self>,
        endpoint: EndpointId,
        _slots: (OwnedSemaphorePermit, OwnedSemaphorePermit),
    ) {
        let mut retry_at = None;
        loop {
            if self.stop.is_cancelled() {
                break;
            }
            let next = match self
                .store
                .next_webhook_delivery(&endpoint, &self.process)
                .await
            {
                Ok(Some(next)) => next,
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, endpoint_id = %endpoint, "cannot read the next webhook delivery");
                    break;
                }
            };
            let now = crate::model::now();
            if let Some(at) = next.next_attempt_at.map(DateTime::from)
                && at > now
            {
                retry_at = Some(at);
                break;
            }
            match self
                .store
                .claim_webhook_endpoint(&endpoint, &self.process, self.lease_until())
                .await
            {
                Ok(true) => {}
                Ok(false) => return,
                Err(error) => {
                    tracing::warn!(%error, endpoint_id = %endpoint, "cannot renew a webhook endpoint's lease");
                    break;
                }
            }
            let attempt = tokio::select! {
                _ = self.stop.cancelled() => break,
                attempt = self.attempt(&next) => attempt,
            };
            let at = crate::model::now();
            let outcome = self.outcome(&next, attempt, at);
            self.metrics.webhook_delivery(match outcome {
                AttemptOutcome::Delivered { .. } => "delivered",
                AttemptOutcome::Retry { .. } => "failed",
                AttemptOutcome::Exhausted { .. } => "disabled",
            });
            if let Err(error) = self.store.record_webhook_attempt(&next, at, &outcome).await {
                tracing::warn!(%error, endpoint_id = %endpoint, "cannot record a webhook attempt");
                break;
            }
            match outcome {
                AttemptOutcome::Delivered { .. } => {
                    tracing::info!(endpoint_id = %endpoint, message_id = %next.message_id, "webhook delivered");
                }
                AttemptOutcome::Retry {
                    retry_at: at,
                    error,
                    ..
                } => {
                    tracing::info!(endpoint_id = %endpoint, message_id = %next.message_id, %error, "webhook attempt failed");
                    retry_at = Some(at);
                    break;
                }
                AttemptOutcome::Exhausted {
                    disabled_reason, ..
                } => {
                    tracing::warn!(endpoint_id = %endpoint, reason = %disabled_reason, "webhook endpoint disabled");
                    break;
                }
            }
        }
        if let Err(error) = self
            .store
            .release_webhook_endpoint(&endpoint, &self.process, retry_at)
            .await
        {
            tracing::warn!(%error, endpoint_id = %endpoint, "cannot release a webhook endpoint");
        }
    }

    /// What an attempt means for its delivery: delivered, retried later (exponential
    /// backoff with full jitter), or failed for good once its retry window is over.
    fn outcome(&self, next: &Outbound, attempt: Attempt, at: DateTime<Utc>) -> AttemptOutcome {
        let Some(error) = attempt.error else {
            return AttemptOutcome::Delivered {
                status: attempt.status.unwrap_or_default(),
            };
        };
        let attempts = next.attempts as u32 + 1;
        let bound = self
            .settings
            .retry_initial_delay_ms
            .saturating_mul(1u64 << (attempts - 1).min(40))
            .min(self.settings.retry_max_delay_ms);
        let delay = u64::from_le_bytes(crate::crypto::random_bytes::<8>()) % (bound + 1);
        let retry_at = at + chrono::Duration::milliseconds(delay as i64);
        let window = chrono::Duration::seconds(self.settings.retry_for_seconds as i64);
        let queued_at: DateTime<Utc> = next.queued_at.into();
        if retry_at > queued_at + window {
            let disabled_reason = format!(
                "message {} was not delivered within {} seconds ({attempts} attempts); last \
                 error: {error}",
                next.message_id, self.settings.retry_for_seconds
            );
            return AttemptOutcome::Exhausted {
                status: attempt.status,
                error,
                disabled_reason,
            };
        }
        AttemptOutcome::Retry {
            status: attempt.status,
            error,
            retry_at,
        }
    }

    async fn attempt(&self, next: &Outbound) -> Attempt {
        let span = tracing::info_span!(
            target: crate::traces::TARGET,
            parent: None,
            "webhook delivery",
            otel.kind = "client",
            tenant_id = %next.tenant_id,
            agentry.webhook.endpoint_id = %next.endpoint_id,
            agentry.webhook.message_id = %next.message_id,
            agentry.webhook.event_type = %next.event_type,
            agentry.webhook.attempt = next.attempts + 1,
            http.response.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let attempt = self.attempt_once(next).instrument(span.clone()).await;
        if let Some(status) = attempt.status {
            span.record("http.response.status_code", status);
        }
        if attempt.error.is_some() {
            span.record(
                "error.type",
                if attempt.status.is_some() {
                    "http_status"
                } else {
                    "request_failed"
                },
            );
        }
        attempt
    }

    async fn attempt_once(&self, next: &Outbound) -> Attempt {
        // The whole attempt, resolving the target's name included, within the timeout.
        let limit = Duration::from_secs(self.settings.timeout_seconds);
        let sent = match tokio::time::timeout(limit, self.send(next)).await {
            Ok(sent) => sent,
            Err(_) => Err(format!(
                "timed out after {} seconds",
                self.settings.timeout_seconds
            )),
        };
        match sent {
            Ok(status) if (200..300).contains(&status) => Attempt {
                status: Some(status),
                error: None,
            },
            Ok(status) if (300..400).contains(&status) => Attempt {
                status: Some(status),
                error: Some(format!("HTTP {status}: redirects are not followed")),
            },
            Ok(status) => Attempt {
                status: Some(status),
                error: Some(format!("HTTP {status}")),
            },
            Err(error) => Attempt {
                status: None,
                error: Some(error.chars().take(MAX_ERROR_CHARS).collect()),
            },
        }
    }

    /// Sends one attempt; the response's status, or why there is none.
    async fn send(&self, next: &Outbound) -> Result<u16, String> {
        let target = target::parse_target(&next.url, &self.settings)?;
        let address = target::resolve_target(&target, &self.settings).await?;
        let id = next.message_id.to_string();
        let timestamp = crate::model::now().timestamp();
        let payload = self.payload(next, &id, timestamp)?;
        // No proxy: the connection goes to the address just checked, and nowhere else.
        let client = reqwest::Client::builder()
            .no_proxy()
            .resolve(&target.host, address)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(self.settings.timeout_seconds))
            .build()
            .map_err(|_| "the request could not be prepared".to_owned())?;
        let request = client
            .post(target.url)
            .header("content-type", payload.content_type)
            .header(
                "user-agent",
                concat!("agentry-webhooks/", env!("CARGO_PKG_VERSION")),
            )
            .header("webhook-id", &id);
        // Sent inside the attempt's span: the receiver's work joins its trace.
        let mut request =
            crate::traces::propagate(request, crate::traces::current_traceparent().as_deref())
                .header("webhook-timestamp", timestamp.to_string());
        for (name, value) in payload.headers {
            let header =
                HeaderName::try_from(name).map_err(|_| format!("`{name}` is not a header name"))?;
            let mut value = HeaderValue::try_from(value)
                .map_err(|_| format!("the header `{name}` has a value that cannot be sent"))?;
            value.set_sensitive(header == AUTHORIZATION);
            request = request.header(header, value);
        }
        let response = request.body(payload.body).send().await.map_err(|error| {
            if error.is_timeout() {
                format!("timed out after {} seconds", self.settings.timeout_seconds)
            } else if error.is_connect() {
                "the connection failed".to_owned()
            } else {
                "the request failed".to_owned()
            }
        })?;
        // The body is never read: a receiver's answer is not ours to keep.
        Ok(response.status().as_u16())
    }
}
