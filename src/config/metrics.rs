//! `[metrics]`: whether `GET /metrics` is served, where, to whom, and with which labels.

use std::net::SocketAddr;

use serde::Deserialize;

use super::{ConfigError, Secret};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {
    /// Whether `GET /metrics` is served at all.
    pub enabled: bool,
    /// An address of its own for `/metrics` (the main port then answers 404 there);
    /// empty: served on `server.bind`.
    pub bind: String,
    /// When set, a scrape must send `Authorization: Bearer <token>`.
    pub bearer_token: Secret,
    /// Whether the turn, HTTP-request and provider families carry the tenant id.
    pub tenant_label: bool,
}

impl MetricsSettings {
    /// Whether the main port serves `/metrics`.
    pub fn on_main_port(&self) -> bool {
        self.enabled && self.bind.is_empty()
    }

    /// The address of a listener of its own, if one is configured.
    pub fn own_bind(&self) -> Option<&str> {
        (self.enabled && !self.bind.is_empty()).then_some(self.bind.as_str())
    }

    pub(super) fn validate(&self, server_bind: &str) -> Result<(), ConfigError> {
        if !self.bind.is_empty() {
            let address = self.bind.parse::<SocketAddr>().map_err(|e| {
                ConfigError::new("metrics.bind", format!("not a socket address: {e}"))
            })?;
            if address.port() != 0 && self.bind == server_bind {
                return Err(ConfigError::new(
                    "metrics.bind",
                    "must differ from server.bind (leave it empty to serve /metrics there)",
                ));
            }
        }
        let token = self.bearer_token.expose();
        if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ConfigError::new(
                "metrics.bearer_token",
                "must not contain spaces or control characters",
            ));
        }
        Ok(())
    }
}
