//! Tenants' own quota values, and the buckets that pace their per-minute quotas.

use chrono::{DateTime, Utc};

use super::usage::{tokens_pg, tokens_sqlite};
use super::{Db, Stamp, Store, StoreError, with_db, with_writer};
use crate::model::{QuotaOverrides, TenantId};

/// The columns of `tenant_quotas`, in [`QuotaOverrides`]' order.
pub(super) const QUOTA_COLUMNS: &str = "requests_per_minute, turns_per_minute, \
     concurrent_turns, queued_turns, tokens_per_day, stored_sessions";

#[derive(sqlx::FromRow, Default)]
pub(super) struct QuotaRow {
    requests_per_minute: Option<i64>,
    turns_per_minute: Option<i64>,
    concurrent_turns: Option<i64>,
    queued_turns: Option<i64>,
    tokens_per_day: Option<i64>,
    stored_sessions: Option<i64>,
}

impl From<QuotaRow> for QuotaOverrides {
    fn from(row: QuotaRow) -> Self {
        let value = |v: Option<i64>| v.map(|v| v.max(0) as u64);
        QuotaOverrides {
            requests_per_minute: value(row.requests_per_minute),
            turns_per_minute: value(row.turns_per_minute),
            concurrent_turns: value(row.concurrent_turns),
            queued_turns: value(row.queued_turns),
            tokens_per_day: value(row.tokens_per_day),
            stored_sessions: value(row.stored_sessions),
        }
    }
}

/// Rounding the bucket's level may leave: a take that fits but for this still fits.
const LEVEL_SLACK: f64 = 1e-6;

fn column(value: Option<u64>) -> Option<i64> {
    value.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}

impl Store {
    /// The tenant's own quota values (all `None` when it has none).
    pub async fn get_quota_overrides(
        &self,
        tenant: &TenantId,
    ) -> Result<QuotaOverrides, StoreError> {
        let row: Option<QuotaRow> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {QUOTA_COLUMNS} FROM tenant_quotas WHERE tenant_id = $1"
            )))
            .bind(tenant)
            .fetch_optional(pool)
            .await
        })?;
        Ok(row.unwrap_or_default().into())
    }

    /// Replaces the tenant's own quota values.
    pub async fn put_quota_overrides(
        &self,
        tenant: &TenantId,
        quotas: &QuotaOverrides,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO tenant_quotas (tenant_id, {QUOTA_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (tenant_id) DO UPDATE SET \
                 requests_per_minute = excluded.requests_per_minute, \
                 turns_per_minute = excluded.turns_per_minute, \
                 concurrent_turns = excluded.concurrent_turns, \
                 queued_turns = excluded.queued_turns, \
                 tokens_per_day = excluded.tokens_per_day, \
                 stored_sessions = excluded.stored_sessions"
            )))
            .bind(tenant)
            .bind(column(quotas.requests_per_minute))
            .bind(column(quotas.turns_per_minute))
            .bind(column(quotas.concurrent_turns))
            .bind(column(quotas.queued_turns))
            .bind(column(quotas.tokens_per_day))
            .bind(column(quotas.stored_sessions))
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    /// Puts up to `want` units into the tenant's bucket of `quota` at `now_us` (unix
    /// microseconds), never filling it over `burst`: the bucket drains `drain_per_us` units
    /// per microsecond. Returns the units granted (0 when not even one fits) and the bucket's
    /// level at `now_us` after the take. One conditional upsert, tried again with what is left
    /// when the whole take does not fit (another process may take that first: a few times at
    /// most).
    pub async fn take_from_bucket(
        &self,
        tenant: &TenantId,
        quota: &str,
        now_us: i64,
        want: u64,
        drain_per_us: f64,
        burst: u64,
    ) -> Result<(u64, f64), StoreError> {
        // The level drained to `now_us`, from at most a full bucket (a level over the burst is
        // left by a quota since lowered); a process whose clock is behind the last writer's
        // drains nothing.
        const ELAPSED: &str = "(CASE WHEN $3 > quota_buckets.updated_us \
             THEN $3 - quota_buckets.updated_us ELSE 0 END)";
        const CAPPED: &str = "(CASE WHEN quota_buckets.level > $7 THEN $7 \
             ELSE quota_buckets.level END)";
        let drained = format!(
            "(CASE WHEN {CAPPED} - {ELAPSED} * $5 > 0 THEN {CAPPED} - {ELAPSED} * $5 ELSE 0 END)"
        );
        let burst = burst as f64;
        let mut want = (want as f64).min(burst);
        for _ in 0..4 {
            if want < 1.0 {
                break;
            }
            let level: Option<f64> = with_writer!(self, |pool| {
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO quota_buckets (tenant_id, quota, level, updated_us) \
                     VALUES ($1, $2, $4, $3) \
                     ON CONFLICT (tenant_id, quota) DO UPDATE \
                     SET level = {drained} + $4, \
                     updated_us = CASE WHEN $3 > quota_buckets.updated_us THEN $3 \
                     ELSE quota_buckets.updated_us END \
                     WHERE {drained} + $4 <= $6 \
                     RETURNING level"
                )))
                .bind(tenant)
                .bind(quota)
                .bind(now_us)
                .bind(want)
                .bind(drain_per_us)
                .bind(burst + LEVEL_SLACK)
                .bind(burst)
                .fetch_optional(pool)
                .await
            })?;
            if let Some(level) = level {
                return Ok((want as u64, level));
            }
            let row: Option<(f64, i64)> = with_writer!(self, |pool| {
                sqlx::query_as(
                    "SELECT level, updated_us FROM quota_buckets \
                     WHERE tenant_id = $1 AND quota = $2",
                )
                .bind(tenant)
                .bind(quota)
                .fetch_optional(pool)
                .await
            })?;
            let level = row.map_or(0.0, |(level, updated)| {
                (level.min(burst) - (now_us.max(updated) - updated) as f64 * drain_per_us).max(0.0)
            });
            want = want.min((burst - level + LEVEL_SLACK).floor());
            if want < 1.0 {
                return Ok((0, level));
            }
        }
        Ok((0, burst))
    }

    /// Model tokens (input and output) the tenant's turns created since `from` reported.
    pub async fn tokens_since(
        &self,
        tenant: &TenantId,
        from: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let sum: Option<i64> = match &self.db {
            Db::Sqlite(pools) => {
                sqlx::query_scalar(concat!(
                    "SELECT SUM(",
                    tokens_sqlite!(),
                    ") FROM turns WHERE tenant_id = $1 AND created_at >= $2"
                ))
                .bind(tenant)
                .bind(Stamp(from))
                .fetch_one(&pools.read)
                .await?
            }
            Db::Postgres(pool) => {
                sqlx::query_scalar(concat!(
                    "SELECT SUM(",
                    tokens_pg!(),
                    ")::bigint FROM turns WHERE tenant_id = $1 AND created_at >= $2"
                ))
                .bind(tenant)
                .bind(Stamp(from))
                .fetch_one(pool)
                .await?
            }
        };
        Ok(sum.unwrap_or(0).max(0) as u64)
    }
}
