//! `[schedules]`: whether this process starts scheduled turns, and the limits of tenants'
//! schedules.

use serde::Deserialize;

use super::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulesSettings {
    /// Whether this process starts due occurrences.
    pub enabled: bool,
    /// The shortest time between two occurrences of one schedule, in seconds.
    pub min_interval_seconds: u64,
    /// Schedules a tenant may have.
    pub max_per_tenant: u32,
    /// How late an occurrence may be found before it counts as missed, in milliseconds.
    pub misfire_tolerance_ms: u64,
    /// Occurrences that may wait behind a running one.
    pub max_waiting: u32,
    /// On PostgreSQL, how often a process looks for other processes' changes, in
    /// milliseconds.
    pub poll_interval_ms: u64,
}

impl SchedulesSettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            ("schedules.min_interval_seconds", self.min_interval_seconds),
            ("schedules.max_per_tenant", u64::from(self.max_per_tenant)),
            ("schedules.poll_interval_ms", self.poll_interval_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        Ok(())
    }
}
