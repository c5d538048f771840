//! A tenant's consumption day by day, and how many sessions it keeps: what its usage and
//! quota reports show.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::types::Json;

use super::{Stamp, Store, StoreError, UsageTotals, with_db};
use crate::model::{TenantId, Usage};

/// A turn's usage as its row keeps it: `[input_tokens, output_tokens, tool_calls, wall_ms]`.
/// Rows written before name the fields in an object; both read alike. SQL reads the tokens
/// with `tokens_sqlite!` and `tokens_pg!`, which take either form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StoredUsage(pub Usage);

impl serde::Serialize for StoredUsage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Usage {
            input_tokens,
            output_tokens,
            tool_calls,
            wall_ms,
        } = self.0;
        [input_tokens, output_tokens, tool_calls, wall_ms].serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for StoredUsage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Form {
            Counts([u64; 4]),
            Named(Usage),
        }
        Ok(StoredUsage(match Form::deserialize(deserializer)? {
            Form::Counts([input_tokens, output_tokens, tool_calls, wall_ms]) => Usage {
                input_tokens,
                output_tokens,
                tool_calls,
                wall_ms,
            },
            Form::Named(usage) => usage,
        }))
    }
}

/// A turn row's input plus output tokens in SQLite, whichever form its usage has: an SQL
/// expression, for `concat!`.
macro_rules! tokens_sqlite {
    () => {
        "(COALESCE(json_extract(usage, '$.input_tokens'), json_extract(usage, '$[0]'), 0) \
         + COALESCE(json_extract(usage, '$.output_tokens'), json_extract(usage, '$[1]'), 0))"
    };
}
pub(super) use tokens_sqlite;

/// The same in PostgreSQL.
macro_rules! tokens_pg {
    () => {
        "(COALESCE((usage->>'input_tokens')::bigint, (usage->>0)::bigint, 0) \
         + COALESCE((usage->>'output_tokens')::bigint, (usage->>1)::bigint, 0))"
    };
}
pub(super) use tokens_pg;

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
        let rows: Vec<(Json<StoredUsage>, Stamp)> = with_db!(self, |pool| {
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
        for (Json(StoredUsage(usage)), Stamp(at)) in rows {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::{running_turn, tenant, test_store};
    use crate::model::ProcessId;
    use crate::store::with_writer;

    #[test]
    fn usage_is_stored_as_counts_and_read_in_either_form() {
        let usage = Usage {
            input_tokens: 12,
            output_tokens: 7,
            tool_calls: 1,
            wall_ms: 30,
        };
        assert_eq!(
            serde_json::to_string(&StoredUsage(usage)).unwrap(),
            "[12,7,1,30]"
        );
        for text in [
            "[12,7,1,30]",
            r#"{"input_tokens":12,"output_tokens":7,"tool_calls":1,"wall_ms":30}"#,
        ] {
            assert_eq!(
                serde_json::from_str::<StoredUsage>(text).unwrap(),
                StoredUsage(usage)
            );
        }
    }

    /// A turn row written before usage was kept as counts names its fields: the sums, the
    /// day's report and the token quota count it as they count a row of counts.
    #[tokio::test]
    async fn turns_usage_in_either_form_is_summed() {
        let (store, _dir) = test_store().await;
        let tenant = tenant(&store).await;
        let process = ProcessId::generate();
        let from = crate::model::now() - chrono::Duration::hours(1);
        let named = running_turn(&store, tenant, &process).await;
        let counts = running_turn(&store, tenant, &process).await;
        for (turn, usage) in [
            (
                named.id,
                serde_json::json!({"input_tokens": 100, "output_tokens": 20, "tool_calls": 1, "wall_ms": 5}),
            ),
            (counts.id, serde_json::json!([3, 4, 2, 6])),
        ] {
            with_writer!(store, |pool| {
                sqlx::query("UPDATE turns SET usage = $1 WHERE id = $2")
                    .bind(Json(usage))
                    .bind(turn)
                    .execute(pool)
                    .await
                    .map(|done| done.rows_affected())
            })
            .unwrap();
        }
        let to = crate::model::now() + chrono::Duration::hours(1);
        let totals = store.sum_usage(&tenant, from, to).await.unwrap();
        assert_eq!(
            (totals.turns, totals.input_tokens, totals.output_tokens),
            (2, 103, 24)
        );
        assert_eq!((totals.tool_calls, totals.wall_ms), (3, 11));
        let days = store.usage_by_day(&tenant, from, to).await.unwrap();
        assert_eq!(
            days.iter().map(|day| day.totals).collect::<Vec<_>>(),
            [totals]
        );
        assert_eq!(store.tokens_since(&tenant, from).await.unwrap(), 127);
    }
}
