//! Per-tenant quotas: the values in force for each tenant, and the counting of the rate
//! quotas (requests and turns per minute, tokens per day).
//!
//! A per-minute quota is paced by a leaky bucket (GCRA): a quota of `L` a minute drains one
//! unit every `60 / L` s from a bucket that holds a burst of units (`quotas.burst_seconds`'
//! worth of the quota, at least 10 or `L`); a request that does not fit is refused, and a
//! retry fits as soon as one unit has drained. A tenant far over its quota is thus admitted
//! evenly at its quota, never in a burst of a minute's worth, and does not slow the others.
//!
//! The database holds each bucket (`quota_buckets`), over every process: a process puts a
//! few units in at a time (an eighth of the burst, at least 1) with one conditional write and
//! counts them down in memory, so a request costs a write only once per take, and the
//! processes together never admit more than the bucket allows. Units taken and not used
//! within the time they stand for are dropped. A bucket found full is remembered until a
//! unit should have drained: a tenant far over its quota is refused from memory, without a
//! query. Tokens per day are the tokens the tenant's turns of the day reported, read from the
//! usage ledger at most once a second per tenant.
//!
//! A tenant's own values arrive with its token's state (read with it, at most
//! `auth.state_cache_ttl_ms` old) and at once when this process changes them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::EngineError;
use crate::model::{
    Quota, QuotaDefaults, QuotaExceeded, QuotaOverrides, QuotaStanding, Quotas, TenantId,
};
use crate::store::{Store, TokenBudget};

/// How long the day's token count of a tenant is believed.
const TOKENS_FRESH: Duration = Duration::from_secs(1);

/// Takes a process makes of a bucket's burst: the burst over this, at least 1.
const TAKES_PER_BURST: u64 = 8;

/// The smallest burst of a per-minute quota (the whole quota when it is smaller).
const MIN_BURST: u64 = 10;

/// Most tenants whose counts are kept; a full book forgets drained buckets, then everything.
const MAX_TENANTS: usize = 100_000;

const MICROS: i64 = 1_000_000;

#[derive(Debug)]
pub struct QuotaBook {
    store: Store,
    defaults: QuotaOverrides,
    burst_seconds: u64,
    own: Mutex<HashMap<TenantId, QuotaOverrides>>,
    buckets: Mutex<HashMap<(TenantId, Quota), Bucket>>,
    tokens: Mutex<HashMap<TenantId, (Instant, u64)>>,
}

/// How a per-minute quota paces a tenant.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pace {
    limit: u64,
    /// Units the bucket holds.
    burst: u64,
    /// Microseconds for one unit to drain.
    interval: f64,
}

impl Pace {
    fn new(limit: u64, window_seconds: u64, burst_seconds: u64) -> Pace {
        let share = (limit as u128 * burst_seconds as u128).div_ceil(window_seconds as u128);
        let burst = u64::try_from(share)
            .unwrap_or(u64::MAX)
            .max(MIN_BURST.min(limit))
            .min(limit)
            .max(1);
        Pace {
            limit,
            burst,
            interval: (window_seconds as i64 * MICROS) as f64 / limit.max(1) as f64,
        }
    }

    /// The bucket's level at `now`, from `level` at `at` (at most a full bucket: a level over
    /// the burst is left by a quota since lowered).
    fn drained(&self, level: f64, at: i64, now: i64) -> f64 {
        (level.min(self.burst as f64) - (now - at).max(0) as f64 / self.interval).max(0.0)
    }

    /// Whole units that fit into a bucket at `level`.
    fn room(&self, level: f64) -> u64 {
        (self.burst as f64 - level + 1e-6).floor().max(0.0) as u64
    }

    /// Microseconds until a bucket at `level` has drained to `to`.
    fn until(&self, level: f64, to: f64) -> i64 {
        ((level - to).max(0.0) * self.interval).ceil() as i64
    }
}

/// This process's view of one tenant's bucket of one per-minute quota.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// The pace the view was taken under.
    pace: Pace,
    /// Units taken from the database and not yet used here, usable until `expires`.
    local: u64,
    expires: i64,
    /// The bucket's level over every process at this process's last take, and its time.
    level: f64,
    at: i64,
    /// The bucket was full at the last take: refused from memory until then.
    full_until: i64,
}

impl Bucket {
    fn new(pace: Pace) -> Bucket {
        Bucket {
            pace,
            local: 0,
            expires: 0,
            level: 0.0,
            at: 0,
            full_until: 0,
        }
    }

    fn standing(&self, quota: Quota, now: i64, window: u64) -> QuotaStanding {
        let local = if now < self.expires { self.local } else { 0 };
        let level = self.pace.drained(self.level, self.at, now);
        let remaining = if now < self.full_until {
            local
        } else {
            (local + self.pace.room(level)).min(self.pace.burst)
        };
        QuotaStanding {
            quota,
            limit: self.pace.limit,
            remaining,
            reset: seconds(self.pace.until(level, 0.0)),
            window,
        }
    }

    fn refusal(&self, quota: Quota, now: i64) -> QuotaExceeded {
        QuotaExceeded {
            quota,
            limit: self.pace.limit,
            retry_after: seconds(self.full_until - now).max(1),
        }
    }
}

/// Whole seconds covering `micros`.
fn seconds(micros: i64) -> u64 {
    (micros.max(0) as u64).div_ceil(MICROS as u64)
}

impl QuotaBook {
    pub fn new(store: Store, defaults: QuotaDefaults) -> Self {
        Self {
            store,
            defaults: defaults.values,
            burst_seconds: defaults.burst_seconds,
            own: Mutex::new(HashMap::new()),
            buckets: Mutex::new(HashMap::new()),
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

    /// The pace of a per-minute quota that bounds the tenant.
    fn pace(&self, tenant: &TenantId, quota: Quota) -> Option<(Pace, u64)> {
        let limit = self.of(tenant).limit(quota)?;
        let window = quota.window_seconds()?;
        Some((Pace::new(limit, window, self.burst_seconds), window))
    }

    /// Counts one unit against a per-minute quota: where the quota stands after it, `None`
    /// when the quota does not bound the tenant, or the refusal.
    pub async fn charge(
        &self,
        tenant: &TenantId,
        quota: Quota,
    ) -> Result<Option<QuotaStanding>, EngineError> {
        let Some((pace, window)) = self.pace(tenant, quota) else {
            return Ok(None);
        };
        let now = Utc::now().timestamp_micros();
        let key = (*tenant, quota);
        {
            let mut buckets = self.buckets.lock().expect("quota lock");
            if buckets.len() >= MAX_TENANTS && !buckets.contains_key(&key) {
                buckets.retain(|_, b| b.pace.drained(b.level, b.at, now) > 0.0);
                if buckets.len() >= MAX_TENANTS {
                    buckets.clear();
                }
            }
            let bucket = buckets.entry(key).or_insert(Bucket::new(pace));
            if bucket.pace != pace {
                // The quota changed: what was found full may fit the new one.
                bucket.pace = pace;
                bucket.full_until = 0;
            }
            if bucket.local > 0 && now < bucket.expires {
                bucket.local -= 1;
                return Ok(Some(bucket.standing(quota, now, window)));
            }
            bucket.local = 0;
            if now < bucket.full_until {
                return Err(EngineError::QuotaExceeded(bucket.refusal(quota, now)));
            }
        }
        let want = (pace.burst / TAKES_PER_BURST).max(1);
        let (granted, level) = self
            .store
            .take_from_bucket(
                tenant,
                quota.as_str(),
                now,
                want,
                1.0 / pace.interval,
                pace.burst,
            )
            .await?;
        let mut buckets = self.buckets.lock().expect("quota lock");
        let bucket = buckets.entry(key).or_insert(Bucket::new(pace));
        bucket.pace = pace;
        bucket.level = level;
        bucket.at = now;
        if granted == 0 {
            // Full: one unit must drain before a take can fit.
            bucket.full_until = now + pace.until(level, pace.burst as f64 - 1.0).max(1);
            return Err(EngineError::QuotaExceeded(bucket.refusal(quota, now)));
        }
        // The units stand for the time they take to drain; unused by then, they are dropped.
        bucket.local = granted - 1;
        bucket.expires = now + (granted as f64 * pace.interval) as i64;
        Ok(Some(bucket.standing(quota, now, window)))
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

    /// What a turn's admission reserves of the tenant's daily token quota: `None` when the
    /// quota does not bound the tenant.
    pub fn token_budget(&self, tenant: &TenantId, reserve: u64) -> Option<TokenBudget> {
        let limit = self.of(tenant).limit(Quota::TokensPerDay)?;
        Some(TokenBudget {
            limit,
            reserve,
            since: day_start(Utc::now()),
        })
    }

    /// The refusal of a turn that found the day's tokens used (retry tomorrow) or reserved
    /// by turns still running (retry when they end).
    pub fn tokens_refusal(&self, tenant: &TenantId, used: u64) -> EngineError {
        let limit = self.of(tenant).limit(Quota::TokensPerDay).unwrap_or(0);
        let retry_after = if used >= limit {
            86_400 - Utc::now().timestamp().rem_euclid(86_400)
        } else {
            1
        };
        EngineError::QuotaExceeded(QuotaExceeded {
            quota: Quota::TokensPerDay,
            limit,
            retry_after: retry_after.max(1) as u64,
        })
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
        let now = Utc::now();
        let micros = now.timestamp_micros();
        let buckets = self.buckets.lock().expect("quota lock");
        let tokens = self.tokens.lock().expect("quota lock");
        Quota::ALL
            .into_iter()
            .filter_map(|quota| {
                let limit = quotas.limit(quota)?;
                let window = quota.window_seconds()?;
                if quota == Quota::TokensPerDay {
                    let used = tokens.get(tenant).map_or(0, |(_, used)| *used);
                    return Some(QuotaStanding {
                        quota,
                        limit,
                        remaining: limit.saturating_sub(used),
                        reset: (86_400 - now.timestamp().rem_euclid(86_400)) as u64,
                        window,
                    });
                }
                let pace = Pace::new(limit, window, self.burst_seconds);
                let bucket = match buckets.get(&(*tenant, quota)) {
                    Some(bucket) if bucket.pace == pace => *bucket,
                    _ => Bucket::new(pace),
                };
                Some(bucket.standing(quota, micros, window))
            })
            .collect()
    }
}

fn day_start(now: DateTime<Utc>) -> DateTime<Utc> {
    let seconds = now.timestamp();
    DateTime::from_timestamp(seconds - seconds.rem_euclid(86_400), 0).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_burst_is_the_configured_seconds_of_the_quota_at_least_ten_or_the_quota() {
        assert_eq!(Pace::new(600, 60, 10).burst, 100);
        assert_eq!(Pace::new(600, 60, 60).burst, 600);
        assert_eq!(Pace::new(40, 60, 10).burst, 10);
        assert_eq!(Pace::new(3, 60, 10).burst, 3);
        assert_eq!(Pace::new(1, 60, 1).burst, 1);
        assert_eq!(Pace::new(u64::MAX, 60, 60).burst, u64::MAX);
        assert_eq!(Pace::new(60, 60, 10).interval, 1_000_000.0);
    }

    #[test]
    fn a_bucket_drains_at_the_pace_and_a_full_one_waits_for_one_unit() {
        let pace = Pace::new(60, 60, 10);
        assert_eq!(pace.room(0.0), 10);
        assert_eq!(pace.room(9.5), 0);
        assert_eq!(pace.room(9.0), 1);
        assert_eq!(pace.drained(10.0, 0, 2_500_000), 7.5);
        assert_eq!(pace.drained(1.0, 0, 60_000_000), 0.0);
        // A clock behind the last take drains nothing.
        assert_eq!(pace.drained(4.0, 1_000, 0), 4.0);
        // A level left over the burst by a lowered quota counts as a full bucket.
        assert_eq!(pace.drained(1e6, 0, 1_000_000), 9.0);
        assert_eq!(pace.until(10.0, 9.0), 1_000_000);
        assert_eq!(pace.until(3.0, 0.0), 3_000_000);
    }

    #[test]
    fn a_standing_counts_local_units_and_what_fits_and_a_refusal_the_wait() {
        let pace = Pace::new(60, 60, 10);
        let bucket = Bucket {
            pace,
            local: 2,
            expires: 5_000_000,
            level: 8.0,
            at: 0,
            full_until: 0,
        };
        let standing = bucket.standing(Quota::RequestsPerMinute, 1_000_000, 60);
        assert_eq!((standing.remaining, standing.reset), (5, 7));
        // Expired local units are gone.
        let standing = bucket.standing(Quota::RequestsPerMinute, 6_000_000, 60);
        assert_eq!((standing.remaining, standing.reset), (8, 2));
        let full = Bucket {
            full_until: 1_500_000,
            ..bucket
        };
        assert_eq!(full.refusal(Quota::RequestsPerMinute, 0).retry_after, 2);
        assert_eq!(
            full.refusal(Quota::RequestsPerMinute, 1_400_000)
                .retry_after,
            1
        );
    }
}
