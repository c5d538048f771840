//! `[webhooks]`: where deliveries may go, how long they are retried, and how secrets rotate.

use serde::Deserialize;

use super::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksSettings {
    /// Hosts (or host:port) endpoints may target although they are internal addresses.
    pub allow_targets: Vec<String>,
    /// Whether `http://` endpoint URLs are accepted (else only `https://`).
    pub allow_http: bool,
    /// Longest an attempt may take, in seconds.
    pub timeout_seconds: u64,
    /// The delay before the first retry; each later one doubles, up to `retry_max_delay_ms`,
    /// and the actual wait is drawn uniformly below it (full jitter).
    pub retry_initial_delay_ms: u64,
    pub retry_max_delay_ms: u64,
    /// How long a message is retried before it fails and its endpoint is disabled.
    pub retry_for_seconds: u64,
    /// How long a rotated-out secret still signs deliveries.
    pub secret_overlap_seconds: u64,
    /// How often a process looks for due deliveries (those other processes enqueued, and
    /// retries), in milliseconds.
    pub poll_interval_ms: u64,
    /// Endpoints this process sends to at once (each one delivery at a time).
    pub max_concurrent_endpoints: usize,
    /// Endpoints one tenant's deliveries use at once, in this process.
    pub max_concurrent_endpoints_per_tenant: usize,
    /// Endpoints a tenant may register.
    pub max_endpoints_per_tenant: u32,
    /// Run endpoints (push notification configs) a tenant may have over all its runs.
    pub max_run_endpoints_per_tenant: u32,
}

impl WebhooksSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("webhooks.timeout_seconds", self.timeout_seconds),
            (
                "webhooks.retry_initial_delay_ms",
                self.retry_initial_delay_ms,
            ),
            ("webhooks.poll_interval_ms", self.poll_interval_ms),
            ("webhooks.retry_for_seconds", self.retry_for_seconds),
            (
                "webhooks.max_concurrent_endpoints",
                self.max_concurrent_endpoints as u64,
            ),
            (
                "webhooks.max_concurrent_endpoints_per_tenant",
                self.max_concurrent_endpoints_per_tenant as u64,
            ),
            (
                "webhooks.max_endpoints_per_tenant",
                u64::from(self.max_endpoints_per_tenant),
            ),
            (
                "webhooks.max_run_endpoints_per_tenant",
                u64::from(self.max_run_endpoints_per_tenant),
            ),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        if self.retry_max_delay_ms < self.retry_initial_delay_ms {
            return Err(ConfigError::new(
                "webhooks.retry_max_delay_ms",
                "must be at least webhooks.retry_initial_delay_ms",
            ));
        }
        Ok(())
    }

    /// Whether `host` (or `host:port`) is one the operator allows although internal.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.allow_targets
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host) || *a == format!("{host}:{port}"))
    }
}
