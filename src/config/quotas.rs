//! `[quotas]`: the per-tenant limits a tenant without values of its own is held to.

use serde::Deserialize;

use super::EngineSettings;
use crate::model::{QuotaDefaults, QuotaOverrides};

/// Rate and storage quotas; 0 means unlimited. The concurrent and queued turn quotas default
/// to `engine.max_concurrent_turns_per_tenant` and `engine.max_queued_turns_per_tenant`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaSettings {
    pub requests_per_minute: u64,
    pub turns_per_minute: u64,
    pub tokens_per_day: u64,
    pub stored_sessions: u64,
    /// How many seconds' worth of a per-minute quota a tenant may use at once.
    pub burst_seconds: u64,
}

impl QuotaSettings {
    /// Every quota's default, as one set of values.
    pub fn defaults(&self, engine: &EngineSettings) -> QuotaOverrides {
        QuotaOverrides {
            requests_per_minute: Some(self.requests_per_minute),
            turns_per_minute: Some(self.turns_per_minute),
            concurrent_turns: Some(engine.max_concurrent_turns_per_tenant as u64),
            queued_turns: Some(engine.max_queued_turns_per_tenant as u64),
            tokens_per_day: Some(self.tokens_per_day),
            stored_sessions: Some(self.stored_sessions),
        }
    }

    /// The defaults with the pacing of the per-minute quotas, as the engine applies them.
    pub fn policy(&self, engine: &EngineSettings) -> QuotaDefaults {
        QuotaDefaults {
            values: self.defaults(engine),
            burst_seconds: self.burst_seconds,
        }
    }
}
