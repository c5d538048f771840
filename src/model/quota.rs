//! Per-tenant quotas: what each one bounds, a tenant's own values, and the values in force.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One of the quotas a tenant is held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Quota {
    /// Authenticated requests per minute, over every route a tenant token reaches.
    RequestsPerMinute,
    /// Turns admitted per minute, over every face.
    TurnsPerMinute,
    /// Turns running at once; more wait in the queue.
    ConcurrentTurns,
    /// Turns waiting for a slot; one more is refused.
    QueuedTurns,
    /// Model tokens (input and output) of the turns created since 00:00 UTC.
    TokensPerDay,
    /// Sessions the tenant keeps.
    StoredSessions,
}

impl Quota {
    pub const ALL: [Quota; 6] = [
        Quota::RequestsPerMinute,
        Quota::TurnsPerMinute,
        Quota::ConcurrentTurns,
        Quota::QueuedTurns,
        Quota::TokensPerDay,
        Quota::StoredSessions,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Quota::RequestsPerMinute => "requests_per_minute",
            Quota::TurnsPerMinute => "turns_per_minute",
            Quota::ConcurrentTurns => "concurrent_turns",
            Quota::QueuedTurns => "queued_turns",
            Quota::TokensPerDay => "tokens_per_day",
            Quota::StoredSessions => "stored_sessions",
        }
    }

    /// The window a rate quota counts over, in seconds; `None` for a quota on a level
    /// (running, queued or stored things).
    pub fn window_seconds(self) -> Option<u64> {
        match self {
            Quota::RequestsPerMinute | Quota::TurnsPerMinute => Some(60),
            Quota::TokensPerDay => Some(86_400),
            Quota::ConcurrentTurns | Quota::QueuedTurns | Quota::StoredSessions => None,
        }
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Quota {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Quota::ALL
            .into_iter()
            .find(|q| q.as_str() == s)
            .ok_or_else(|| format!("unknown quota `{s}`"))
    }
}

/// A tenant's own quota values; `None` takes the configured default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaOverrides {
    pub requests_per_minute: Option<u64>,
    pub turns_per_minute: Option<u64>,
    pub concurrent_turns: Option<u64>,
    pub queued_turns: Option<u64>,
    pub tokens_per_day: Option<u64>,
    pub stored_sessions: Option<u64>,
}

impl QuotaOverrides {
    pub fn get(&self, quota: Quota) -> Option<u64> {
        match quota {
            Quota::RequestsPerMinute => self.requests_per_minute,
            Quota::TurnsPerMinute => self.turns_per_minute,
            Quota::ConcurrentTurns => self.concurrent_turns,
            Quota::QueuedTurns => self.queued_turns,
            Quota::TokensPerDay => self.tokens_per_day,
            Quota::StoredSessions => self.stored_sessions,
        }
    }

    pub fn set(&mut self, quota: Quota, value: Option<u64>) {
        let slot = match quota {
            Quota::RequestsPerMinute => &mut self.requests_per_minute,
            Quota::TurnsPerMinute => &mut self.turns_per_minute,
            Quota::ConcurrentTurns => &mut self.concurrent_turns,
            Quota::QueuedTurns => &mut self.queued_turns,
            Quota::TokensPerDay => &mut self.tokens_per_day,
            Quota::StoredSessions => &mut self.stored_sessions,
        };
        *slot = value;
    }
}

impl QuotaOverrides {
    /// Applies a change as clients send it: each key a quota's name, each value a
    /// non-negative integer (0: unlimited, for the rate and stored quotas) or `null` (back
    /// to the configured default). Keys left out keep their value.
    pub fn apply(
        &mut self,
        changes: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), super::FieldError> {
        use super::FieldError;
        for (key, value) in changes {
            let quota: Quota = key.parse().map_err(|_| {
                FieldError::new(
                    key.as_str(),
                    format!(
                        "is not a quota (quotas: {})",
                        Quota::ALL.map(Quota::as_str).join(", ")
                    ),
                )
            })?;
            let value = match value {
                serde_json::Value::Null => None,
                value => Some(value.as_u64().ok_or_else(|| {
                    FieldError::new(key.as_str(), "must be a non-negative integer or null")
                })?),
            };
            if quota == Quota::ConcurrentTurns && value == Some(0) {
                return Err(FieldError::new(key.as_str(), "must be at least 1"));
            }
            if value.is_some_and(|v| v > i64::MAX as u64) {
                return Err(FieldError::new(key.as_str(), "is too large"));
            }
            self.set(quota, value);
        }
        Ok(())
    }
}

/// The quotas in force for a tenant: its own values over the configured defaults. For the
/// rate and stored quotas 0 means unlimited; concurrent and queued turns always have a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    values: [u64; 6],
}

impl Quotas {
    pub fn resolve(defaults: &QuotaOverrides, own: &QuotaOverrides) -> Quotas {
        Quotas {
            values: Quota::ALL.map(|q| own.get(q).or(defaults.get(q)).unwrap_or(0)),
        }
    }

    /// Every quota's limit (`None`: unlimited), as the admin API shows them.
    pub fn to_map(&self) -> serde_json::Map<String, serde_json::Value> {
        Quota::ALL
            .into_iter()
            .map(|q| (q.as_str().to_owned(), serde_json::json!(self.limit(q))))
            .collect()
    }

    /// The limit, or `None` when the quota does not bound this tenant.
    pub fn limit(&self, quota: Quota) -> Option<u64> {
        let value = self.values[quota as usize];
        let unbounded = value == 0 && !matches!(quota, Quota::ConcurrentTurns | Quota::QueuedTurns);
        (!unbounded).then_some(value)
    }
}

/// A refusal: the quota, its limit, and when a retry may succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaExceeded {
    pub quota: Quota,
    pub limit: u64,
    /// Seconds until the quota may admit again (the next unit of a per-minute quota, the
    /// end of the day for tokens, a guess for a quota on a level).
    pub retry_after: u64,
}

impl fmt::Display for QuotaExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the tenant's {} quota ({}) is used up; retry in {} s",
            self.quota, self.limit, self.retry_after
        )
    }
}

/// Where a rate quota stands after a request counted against it, for the `RateLimit` and
/// `RateLimit-Policy` response headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaStanding {
    pub quota: Quota,
    pub limit: u64,
    /// Units that may be used now.
    pub remaining: u64,
    /// Seconds until all of the quota's units are back (the day's end for tokens).
    pub reset: u64,
    /// The length in seconds of the window the limit is given for.
    pub window: u64,
}

/// The configured defaults of every quota, and how the per-minute ones pace a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaDefaults {
    pub values: QuotaOverrides,
    /// A per-minute quota of `L` lets a tenant use at most `L × burst_seconds / 60` units at
    /// once (at least 10, or `L` when smaller); beyond that, one unit every `60 / L` s.
    pub burst_seconds: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_own_value_wins_and_zero_is_unlimited_for_rates_only() {
        let defaults = QuotaOverrides {
            requests_per_minute: Some(60),
            concurrent_turns: Some(16),
            queued_turns: Some(0),
            tokens_per_day: Some(0),
            ..QuotaOverrides::default()
        };
        let own = QuotaOverrides {
            requests_per_minute: Some(5),
            ..QuotaOverrides::default()
        };
        let quotas = Quotas::resolve(&defaults, &own);
        assert_eq!(quotas.limit(Quota::RequestsPerMinute), Some(5));
        assert_eq!(quotas.limit(Quota::ConcurrentTurns), Some(16));
        assert_eq!(quotas.limit(Quota::QueuedTurns), Some(0));
        assert_eq!(quotas.limit(Quota::TokensPerDay), None);
        assert_eq!(quotas.limit(Quota::TurnsPerMinute), None);
        for quota in Quota::ALL {
            assert_eq!(quota.as_str().parse::<Quota>(), Ok(quota));
        }
    }

    #[test]
    fn a_change_sets_resets_and_refuses_by_name() {
        let mut own = QuotaOverrides {
            turns_per_minute: Some(3),
            ..QuotaOverrides::default()
        };
        let change = serde_json::json!({"requests_per_minute": 10, "turns_per_minute": null});
        own.apply(change.as_object().unwrap()).unwrap();
        assert_eq!(own.requests_per_minute, Some(10));
        assert_eq!(own.turns_per_minute, None);
        for (bad, field) in [
            (serde_json::json!({"tokens": 1}), "tokens"),
            (serde_json::json!({"queued_turns": -1}), "queued_turns"),
            (
                serde_json::json!({"concurrent_turns": 0}),
                "concurrent_turns",
            ),
            (
                serde_json::json!({"stored_sessions": "5"}),
                "stored_sessions",
            ),
        ] {
            let error = own.clone().apply(bad.as_object().unwrap()).unwrap_err();
            assert_eq!(error.field, field);
        }
        assert_eq!(own.requests_per_minute, Some(10));
    }
}
