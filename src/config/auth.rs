//! `[auth]` and `[secrets]`: who may call, for how long, and the key that seals stored secrets.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Deserialize;

use super::{ConfigError, Secret};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    pub admin_secret: Secret,
    pub jwt_secret: Secret,
    pub jwt_previous_secrets: Vec<Secret>,
    pub token_ttl_seconds: u64,
    pub api_key_ttl_seconds: u64,
    pub issuer: String,
    pub audience: String,
    pub public_meta: bool,
    /// Password verifications (argon2) running at once, over all clients.
    pub login_max_concurrent_checks: usize,
    /// How long a login waits for a verification slot before 429 (milliseconds).
    pub login_queue_timeout_ms: u64,
    /// Failed logins per `client_id`, and per client address, within the window.
    pub login_max_failures_per_client: u32,
    pub login_max_failures_per_address: u32,
    pub login_failure_window_seconds: u64,
    /// Most client ids and addresses the failure counters remember.
    pub login_tracked_keys: usize,
    /// How long a token's state (revoked, tenant suspended) read from the database is
    /// trusted without asking again (milliseconds; 0 asks on every request).
    pub state_cache_ttl_ms: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsSettings {
    pub key: Secret,
}

/// Ten years: no token outlives this.
pub const MAX_TOKEN_TTL_SECONDS: u64 = 10 * 365 * 24 * 3600;

impl AuthSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !self.jwt_secret.is_empty() && self.jwt_secret.expose().len() < 32 {
            return Err(ConfigError::new(
                "auth.jwt_secret",
                "must be at least 32 bytes long",
            ));
        }
        if let Some(i) = self
            .jwt_previous_secrets
            .iter()
            .position(|s| s.expose().len() < 32)
        {
            return Err(ConfigError::new(
                format!("auth.jwt_previous_secrets[{i}]"),
                "must be at least 32 bytes long",
            ));
        }
        for (key, value) in [
            ("auth.token_ttl_seconds", self.token_ttl_seconds),
            ("auth.api_key_ttl_seconds", self.api_key_ttl_seconds),
        ] {
            if value == 0 || value > MAX_TOKEN_TTL_SECONDS {
                return Err(ConfigError::new(
                    key,
                    format!("must be between 1 and {MAX_TOKEN_TTL_SECONDS}"),
                ));
            }
        }
        if self.issuer.is_empty() {
            return Err(ConfigError::new("auth.issuer", "must not be empty"));
        }
        if self.audience.is_empty() {
            return Err(ConfigError::new("auth.audience", "must not be empty"));
        }
        for (key, value) in [
            (
                "auth.login_max_concurrent_checks",
                self.login_max_concurrent_checks as u64,
            ),
            (
                "auth.login_max_failures_per_client",
                u64::from(self.login_max_failures_per_client),
            ),
            (
                "auth.login_max_failures_per_address",
                u64::from(self.login_max_failures_per_address),
            ),
            (
                "auth.login_failure_window_seconds",
                self.login_failure_window_seconds,
            ),
            ("auth.login_tracked_keys", self.login_tracked_keys as u64),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        if self.state_cache_ttl_ms > 60_000 {
            return Err(ConfigError::new(
                "auth.state_cache_ttl_ms",
                "must be at most 60000",
            ));
        }
        Ok(())
    }
}

/// Parses a `secrets.key` value: 32 bytes, base64 (standard or URL-safe).
pub fn parse_key(value: &str) -> Result<[u8; 32], String> {
    let value = value.trim();
    let bytes = STANDARD
        .decode(value)
        .or_else(|_| URL_SAFE_NO_PAD.decode(value.trim_end_matches('=')))
        .map_err(|_| "must be base64 (generate one with `openssl rand -base64 32`)".to_owned())?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("must decode to 32 bytes, not {}", b.len()))
}
