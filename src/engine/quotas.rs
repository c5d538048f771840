//! Per-tenant quotas: the values in force for each tenant, and the counting of the rate
//! quotas (requests and turns per minute, tokens per day).
//!
//! A rate quota counts over fixed windows (a minute starting on the minute, a day starting at
//! 00:00 UTC). The database holds what each window has handed out over every process
//! (`quota_windows`); a process takes a share of the window at a time (a sixteenth of the
//! quota, at least 1) and counts it down in memory, so a request costs a write only once per
//! share, and the processes together never admit more than the quota. A window found used up
//! is remembered until it ends: a tenant far over its quota is refused from memory, without a
//! query, and does not slow the others. Tokens per day are the tokens the tenant's turns of
//! the day reported, read from the usage ledger at most once a second per tenant.
//!
//! A tenant's own values arrive with its token's state (read with it, at most
//! `auth.state_cache_ttl_ms` old) and at once when this process changes them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::EngineError;
use crate::model::{Quota, QuotaExceeded, QuotaOverrides, QuotaStanding, Quotas, TenantId};
use crate::store::Store;

/// How long the day's token count of a tenant is believed.
const TOKENS_FRESH: Duration = Duration::from_secs(1);

/// Shares a process takes of a window at a time: the quota over this, at least 1.
const SHARES_PER_WINDOW: u64 = 16;

/// Most tenants whose counts are kept; a full book forgets ended windows, then everything.
const MAX_TENANTS: usize = 100_000;

#[derive(Debug)]
pub struct QuotaBook {
    store: Store,
    defaults: QuotaOverrides,
    own: Mutex<HashMap<TenantId, QuotaOverrides>>,
    windows: Mutex<HashMap<(TenantId, Quota), Window>>,
    tokens: Mutex<HashMap<TenantId, (Instant, u64)>>,
}

/// This process's view of one tenant's current window of one rate quota.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: i64,
    /// The limit the counts below were taken under.
    limit: u64,
    /// Units taken from the database and not yet used here.
    local: u64,
    /// What the window had handed out over every process at this process's last take.
    used: u64,
    /// The database had nothing left for this window at the last take.
    exhausted: bool,
}

impl QuotaBook {
    pub fn new(store: Store, defaults: QuotaOverrides) -> Self {
        Self {
            store,
            defaults,
            own: Mutex::new(HashMap::new()),
            windows: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// The quotas in force for the tenant.
    pub fn of(&self, tenant: &TenantId) -> Quotas {
        let own = self
            .own
            .lock()
            .expect("quota lock")
            .get(tenant)
            .copied()
            .unwrap_or_default();
        Quotas::resolve(&self.defaults, &own)
    }

    /// Records the tenant's own values as last read from the database.
    pub fn observe(&self, tenant: &TenantId, own: QuotaOverrides) {
        let mut values = self.own.lock().expect("quota lock");
        if values.get(tenant) == Some(&own) {
            return;
        }
        if values.len() >= MAX_TENANTS {
            values.clear();
        }
        values.insert(*tenant, own);
    }

    /// Counts one unit against a rate quota: where the quota stands after it, `None` when the
    /// quota does not bound the tenant, or the refusal.
    pub async fn charge(
        &self,
        tenant: &TenantId,
        quota: Quota,
    ) -> Result<Option<QuotaStanding>, EngineError> {
        let Some(limit) = self.of(tenant).limit(quota) else {
            return Ok(None);
        };
        let Some(length) = quota.window_seconds() else {
            return Ok(None);
        };
        let now = Utc::now().timestamp();
        let start = now - now.rem_euclid(length as i64);
        let reset = (start + length as i64 - now) as u64;
        let refusal = QuotaExceeded {
            quota,
            limit,
            retry_after: reset.max(1),
        };
        let key = (*tenant, quota);
        let fresh = {
            let mut windows = self.windows.lock().expect("quota lock");
            if windows.len() >= MAX_TENANTS && !windows.contains_key(&key) {
                windows.retain(|_, w| w.start == start);
                if windows.len() >= MAX_TENANTS {
                    windows.clear();
                }
            }
            let window = windows.entry(key).or_insert(Window {
                start,
                limit,
                local: 0,
                used: 0,
                exhausted: false,
            });
            let fresh = window.start != start;
            if fresh {
                *window = Window {
                    start,
                    limit,
                    local: 0,
                    used: 0,
                    exhausted: false,
                };
            } else if window.limit != limit {
                // The quota changed: what was found used up may fit the new one.
                window.limit = limit;
                window.exhausted = false;
            }
            if window.local > 0 {
                window.local -= 1;
                return Ok(Some(standing(quota, window, reset, length)));
            }
            if window.exhausted || limit == 0 {
                return Err(EngineError::QuotaExceeded(refusal));
            }
            fresh || window.used == 0
        };
        let want = (limit / SHARES_PER_WINDOW).max(1);
        let (granted, used) = self
            .store
            .take_from_window(tenant, quota.as_str(), start, want, limit)
            .await?;
        if fresh {
            self.store
                .delete_ended_windows(tenant, quota.as_str(), start)
                .await?;
        }
        let mut windows = self.windows.lock().expect("quota lock");
        let window = windows.entry(key).or_insert(Window {
            start,
            limit,
            local: 0,
            used: 0,
            exhausted: false,
        });
        if window.start != start {
            // The window ended meanwhile: what was taken counts for the old one.
            return Ok(Some(standing(quota, window, reset, length)));
        }
        window.used = window.used.max(used);
        if granted == 0 {
            window.exhausted = true;
            return Err(EngineError::QuotaExceeded(refusal));
        }
        window.local += granted - 1;
        Ok(Some(standing(quota, window, reset, length)))
    }

    /// Refuses a turn when the tenant's turns of the day already used its token quota.
    pub async fn check_tokens(&self, tenant: &TenantId) -> Result<(), EngineError> {
        let Some(limit) = self.of(tenant).limit(Quota::TokensPerDay) else {
            return Ok(());
        };
        let used = self.tokens_today(tenant).await?;
        if used < limit {
            return Ok(());
        }
        let now = Utc::now();
        let reset = 86_400 - now.timestamp().rem_euclid(86_400);
        Err(EngineError::QuotaExceeded(QuotaExceeded {
            quota: Quota::TokensPerDay,
            limit,
            retry_after: reset.max(1) as u64,
        }))
    }

    /// A turn of the tenant is ending: the day's tokens are read again at the next check.
    pub fn turn_ended(&self, tenant: &TenantId) {
        let mut tokens = self.tokens.lock().expect("quota lock");
        if !tokens.is_empty() {
            tokens.remove(tenant);
        }
    }

    async fn tokens_today(&self, tenant: &TenantId) -> Result<u64, EngineError> {
        if let Some((at, used)) = self.tokens.lock().expect("quota lock").get(tenant)
            && at.elapsed() < TOKENS_FRESH
        {
            return Ok(*used);
        }
        let asked = Instant::now();
        let used = self
            .store
            .tokens_since(tenant, day_start(Utc::now()))
            .await?;
        let mut tokens = self.tokens.lock().expect("quota lock");
        if tokens.len() >= MAX_TENANTS {
            tokens.clear();
        }
        tokens.insert(*tenant, (asked, used));
        Ok(used)
    }

    /// Where each rate quota that bounds the tenant stands, as far as this process knows,
    /// without counting anything.
    pub fn standings(&self, tenant: &TenantId) -> Vec<QuotaStanding> {
        let quotas = self.of(tenant);
        let now = Utc::now().timestamp();
        let windows = self.windows.lock().expect("quota lock");
        let tokens = self.tokens.lock().expect("quota lock");
        Quota::ALL
            .into_iter()
            .filter_map(|quota| {
                let limit = quotas.limit(quota)?;
                let length = quota.window_seconds()?;
                let start = now - now.rem_euclid(length as i64);
                let reset = (start + length as i64 - now) as u64;
                let remaining = match quota {
                    Quota::TokensPerDay => {
                        let used = tokens.get(tenant).map_or(0, |(_, used)| *used);
                        limit.saturating_sub(used)
                    }
                    _ => match windows.get(&(*tenant, quota)) {
                        Some(w) if w.start == start && w.exhausted && w.local == 0 => 0,
                        Some(w) if w.start == start => {
                            limit.saturating_sub(w.used.saturating_sub(w.local))
                        }
                        _ => limit,
                    },
                };
                Some(QuotaStanding {
                    quota,
                    limit,
                    remaining,
                    reset,
                    window: length,
                })
            })
            .collect()
    }
}

fn standing(quota: Quota, window: &Window, reset: u64, length: u64) -> QuotaStanding {
    QuotaStanding {
        quota,
        limit: window.limit,
        remaining: window
            .limit
            .saturating_sub(window.used.saturating_sub(window.local)),
        reset,
        window: length,
    }
}

fn day_start(now: DateTime<Utc>) -> DateTime<Utc> {
    let seconds = now.timestamp();
    DateTime::from_timestamp(seconds - seconds.rem_euclid(86_400), 0).unwrap_or(now)
}
