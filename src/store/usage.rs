//! A tenant's consumption day by day, and how many sessions it keeps: what its usage and
//! quota reports show.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::types::Json;

use super::{Stamp, Store, StoreError, UsageTotals, with_db};
use crate::model::{TenantId, Usage};

/// What the turns created on one UTC day consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DayUsage {
    pub date: NaiveDate,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

impl Store {
    /// The usage of the tenant's turns created in `[from, to)`, summed per UTC day; days
    /// without a turn are left out. Oldest first.
    pub async fn usage_by_day(
        &self,
        tenant: &TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DayUsage>, StoreError> {
        let rows: Vec<(Json<Usage>, Stamp)> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT usage, created_at FROM turns WHERE tenant_id = $1 \
                 AND created_at >= $2 AND created_at < $3 ORDER BY created_at",
            )
            .bind(tenant)
            .bind(Stamp(from))
            .bind(Stamp(to))
            .fetch_all(pool)
            .await
        })?;
        let mut days: Vec<DayUsage> = Vec::new();
        for (Json(usage), Stamp(at)) in rows {
            let date = at.date_naive();
            if days.last().is_none_or(|day| day.date != date) {
                days.push(DayUsage {
                    date,
                    totals: UsageTotals::default(),
                });
            }
            let day = &mut days.last_mut().expect("pushed above").totals;
            day.turns += 1;
            day.input_tokens += usage.input_tokens;
            day.output_tokens += usage.output_tokens;
            day.tool_calls += usage.tool_calls;
            day.wall_ms += usage.wall_ms;
        }
        Ok(days)
    }

    /// How many sessions the tenant keeps.
    pub async fn count_sessions(&self, tenant: &TenantId) -> Result<u64, StoreError> {
        let count: i64 = with_db!(self, |pool| {
            sqlx::query_scalar("SELECT COUNT(*) FROM sessions WHERE tenant_id = $1")
                .bind(tenant)
                .fetch_one(pool)
                .await
        })?;
        Ok(count.max(0) as u64)
    }
}
