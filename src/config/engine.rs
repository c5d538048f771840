//! `[engine]`: how many turns run at once, and how their events reach subscribers.

use serde::Deserialize;

use super::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSettings {
    pub max_concurrent_turns: usize,
    pub max_concurrent_turns_per_tenant: usize,
    pub max_queued_turns: usize,
    /// One tenant's share of the queue: over it, that tenant is refused while others queue.
    pub max_queued_turns_per_tenant: usize,
    /// The most messages one request may bring as a new session's history.
    pub max_seed_messages: usize,
    /// Message text of the in-memory session histories, in KiB.
    pub history_cache_kib: usize,
    pub shutdown_grace_seconds: u64,
    pub sse_keep_alive_seconds: u64,
    pub max_batch_events: usize,
    pub subscriber_buffer: usize,
    /// Inline part contents larger than this are stored once and passed as a URL.
    pub inline_part_max_bytes: usize,
    /// How long a process's claim on its turns lasts without a heartbeat, in milliseconds.
    pub lease_ms: u64,
    /// How often a process looks for turns whose owner's lease expired, in milliseconds.
    pub lease_sweep_ms: u64,
}

impl EngineSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("engine.max_concurrent_turns", self.max_concurrent_turns),
            (
                "engine.max_concurrent_turns_per_tenant",
                self.max_concurrent_turns_per_tenant,
            ),
            ("engine.max_batch_events", self.max_batch_events),
            ("engine.subscriber_buffer", self.subscriber_buffer),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        if self.sse_keep_alive_seconds == 0 {
            return Err(ConfigError::new(
                "engine.sse_keep_alive_seconds",
                "must be at least 1",
            ));
        }
        if self.lease_ms < 500 {
            return Err(ConfigError::new(
                "engine.lease_ms",
                "must be at least 500 (a process renews its lease five times per lease)",
            ));
        }
        if self.lease_sweep_ms < 50 {
            return Err(ConfigError::new(
                "engine.lease_sweep_ms",
                "must be at least 50",
            ));
        }
        Ok(())
    }

    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lease_ms)
    }

    /// The part of a lease a process does not rely on (one renewal interval): it stops
    /// writing `lease - margin` after its last renewal was sent, on its own clock.
    pub fn lease_margin(&self) -> std::time::Duration {
        self.heartbeat()
    }

    /// How often a process renews its lease: five times per lease, so a database that is
    /// slow for a moment does not cost it its turns.
    pub fn heartbeat(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lease_ms / 5)
    }
}
