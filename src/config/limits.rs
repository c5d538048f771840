//! `[limits]`: what one tenant or one client may hold of the server at once (history read
//! per request, a session's size, open event streams, file descriptors).

use serde::Deserialize;

use super::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSettings {
    /// Most message bytes (stored JSON) one page of a history read returns; a single
    /// message larger than this comes alone.
    pub history_page_bytes: u64,
    /// Most messages and stored bytes of one session's full history; a turn that would go
    /// beyond is refused (409 session_full).
    pub session_max_messages: u64,
    pub session_max_bytes: u64,
    /// Open event streams (SSE responses) per tenant and per client address; one more gets
    /// 429 too_many_streams with Retry-After.
    pub max_streams_per_tenant: usize,
    pub max_streams_per_address: usize,
    /// File descriptors kept free of streams so that /healthz, /readyz and the admin API
    /// always answer: streams may use the process's descriptor limit less this.
    pub fd_reserve: u64,
}

impl LimitsSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("limits.history_page_bytes", self.history_page_bytes),
            ("limits.session_max_messages", self.session_max_messages),
            ("limits.session_max_bytes", self.session_max_bytes),
            (
                "limits.max_streams_per_tenant",
                self.max_streams_per_tenant as u64,
            ),
            (
                "limits.max_streams_per_address",
                self.max_streams_per_address as u64,
            ),
            ("limits.fd_reserve", self.fd_reserve),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        if self.history_page_bytes < 1024 {
            return Err(ConfigError::new(
                "limits.history_page_bytes",
                "must be at least 1024",
            ));
        }
        Ok(())
    }
}
