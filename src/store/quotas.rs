//! Tenants' own quota values, and what the current window of each rate quota handed out.

use chrono::{DateTime, Utc};

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

    /// Takes up to `want` units of the window starting at `window_start` (unix seconds) of
    /// the tenant's `quota`, never handing out more than `limit` over every process: the
    /// units granted (0 when the window is used up) and what the window handed out in all.
    pub async fn take_from_window(
        &self,
        tenant: &TenantId,
        quota: &str,
        window_start: i64,
        want: u64,
        limit: u64,
    ) -> Result<(u64, u64), StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut want = i64::try_from(want).unwrap_or(i64::MAX).min(limit);
        // A take that does not fit asks for what is left; another process may take that
        // first, so ask again, a few times at most.
        for _ in 0..4 {
            if want <= 0 {
                break;
            }
            let used: Option<i64> = with_writer!(self, |pool| {
                sqlx::query_scalar(
                    "INSERT INTO quota_windows (tenant_id, quota, window_start, used) \
                     VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (tenant_id, quota, window_start) DO UPDATE \
                     SET used = quota_windows.used + excluded.used \
                     WHERE quota_windows.used + excluded.used <= $5 \
                     RETURNING used",
                )
                .bind(tenant)
                .bind(quota)
                .bind(window_start)
                .bind(want)
                .bind(limit)
                .fetch_optional(pool)
                .await
            })?;
            if let Some(used) = used {
                return Ok((want as u64, used.max(0) as u64));
            }
            let used: i64 = with_writer!(self, |pool| {
                sqlx::query_scalar(
                    "SELECT used FROM quota_windows WHERE tenant_id = $1 AND quota = $2 \
                     AND window_start = $3",
                )
                .bind(tenant)
                .bind(quota)
                .bind(window_start)
                .fetch_optional(pool)
                .await
            })?
            .unwrap_or(0);
            want = want.min(limit - used);
            if want <= 0 {
                return Ok((0, used.max(0) as u64));
            }
        }
        Ok((0, limit.max(0) as u64))
    }

    /// Forgets the tenant's windows of `quota` that ended before `window_start`.
    pub async fn delete_ended_windows(
        &self,
        tenant: &TenantId,
        quota: &str,
        window_start: i64,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query(
                "DELETE FROM quota_windows WHERE tenant_id = $1 AND quota = $2 \
                 AND window_start < $3",
            )
            .bind(tenant)
            .bind(quota)
            .bind(window_start)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    /// Model tokens (input and output) the tenant's turns created since `from` reported.
    pub async fn tokens_since(
        &self,
        tenant: &TenantId,
        from: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let sum: Option<i64> = match &self.db {
            Db::Sqlite(pools) => {
                sqlx::query_scalar(
                    "SELECT SUM(COALESCE(json_extract(usage, '$.input_tokens'), 0) \
                     + COALESCE(json_extract(usage, '$.output_tokens'), 0)) \
                     FROM turns WHERE tenant_id = $1 AND created_at >= $2",
                )
                .bind(tenant)
                .bind(Stamp(from))
                .fetch_one(&pools.read)
                .await?
            }
            Db::Postgres(pool) => {
                sqlx::query_scalar(
                    "SELECT SUM(COALESCE((usage->>'input_tokens')::bigint, 0) \
                     + COALESCE((usage->>'output_tokens')::bigint, 0))::bigint \
                     FROM turns WHERE tenant_id = $1 AND created_at >= $2",
                )
                .bind(tenant)
                .bind(Stamp(from))
                .fetch_one(pool)
                .await?
            }
        };
        Ok(sum.unwrap_or(0).max(0) as u64)
    }
}
