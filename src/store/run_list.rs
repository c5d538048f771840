//! Reading runs across a tenant's sessions: a filtered list, newest status change first,
//! and the history messages a run's turns brought and wrote.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::{Stamp, Store, StoreError, with_db};
use crate::model::{HistoryMessage, RunId, RunStatus, SessionId, TenantId, TurnId};

/// Which runs a list takes.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    /// Runs of sessions of this agent.
    pub agent: Option<String>,
    pub session: Option<SessionId>,
    /// Runs in any of these statuses (at most two: a protocol's state may cover two).
    pub statuses: Vec<RunStatus>,
    /// Runs whose status changed at or after this time.
    pub updated_since: Option<DateTime<Utc>>,
}

/// Where a page of runs starts: after the run with this status time and id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunCursor {
    pub updated_at: DateTime<Utc>,
    pub id: RunId,
}

/// One run as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRun {
    pub id: RunId,
    pub session_id: SessionId,
    pub status: RunStatus,
    pub updated_at: DateTime<Utc>,
}

/// A history message a run's turn wrote, with its place in the session's history and the
/// idempotency key its turn was admitted with (a client's id for the message it sent).
#[derive(Debug, Clone, PartialEq)]
pub struct RunMessage {
    pub position: i64,
    pub turn_id: TurnId,
    pub turn_key: Option<String>,
    pub message: HistoryMessage,
}

const FILTER: &str = "FROM runs r JOIN sessions s ON s.id = r.session_id AND s.tenant_id = r.tenant_id \
     WHERE r.tenant_id = $1 AND ($2 IS NULL OR s.agent = $2) AND ($3 IS NULL OR r.session_id = $3) \
     AND ($4 IS NULL OR r.status = $4 OR r.status = $5) AND ($6 IS NULL OR r.updated_at >= $6)";

type RunRow = (RunId, SessionId, String, Stamp);

impl Store {
    /// A page of the tenant's runs that `filter` takes, newest status change first (then
    /// by id), after `cursor`; and how many runs the filter takes in all.
    pub async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        cursor: Option<RunCursor>,
        limit: u32,
    ) -> Result<(Vec<ListedRun>, i64), StoreError> {
        let first = filter.statuses.first().map(|s| s.as_str());
        let second = filter.statuses.get(1).map(|s| s.as_str()).or(first);
        let since = filter.updated_since.map(Stamp);
        let (rows, total): (Vec<RunRow>, i64) = with_db!(self, |pool| {
            let rows: Vec<RunRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT r.id, r.session_id, r.status, r.updated_at {FILTER} \
                 AND ($7 IS NULL OR r.updated_at < $7 OR (r.updated_at = $7 AND r.id < $8)) \
                 ORDER BY r.updated_at DESC, r.id DESC LIMIT $9"
            )))
            .bind(tenant)
            .bind(filter.agent.as_deref())
            .bind(filter.session)
            .bind(first)
            .bind(second)
            .bind(since)
            .bind(cursor.map(|c| Stamp(c.updated_at)))
            .bind(cursor.map(|c| c.id))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            let total: i64 =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) {FILTER}")))
                    .bind(tenant)
                    .bind(filter.agent.as_deref())
                    .bind(filter.session)
                    .bind(first)
                    .bind(second)
                    .bind(since)
                    .fetch_one(pool)
                    .await?;
            Ok::<_, sqlx::Error>((rows, total))
        })?;
        let runs = rows
            .into_iter()
            .map(|(id, session_id, status, updated_at)| {
                Ok(ListedRun {
                    id,
                    session_id,
                    status: status.parse().map_err(StoreError::Corrupt)?,
                    updated_at: updated_at.into(),
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok((runs, total))
    }

    /// The history messages the run's turns brought (user messages, answers) and wrote
    /// (the agent's messages, server tools' results), in order.
    pub async fn list_run_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        run: &RunId,
    ) -> Result<Vec<RunMessage>, StoreError> {
        let rows: Vec<(i64, TurnId, Option<String>, Json<HistoryMessage>)> =
            with_db!(self, |pool| {
                sqlx::query_as(
                    "SELECT h.position, h.turn_id, t.idempotency_key, h.message FROM history h \
                 JOIN turns t ON t.id = h.turn_id AND t.session_id = h.session_id \
                 WHERE t.tenant_id = $1 AND h.session_id = $2 AND t.run_id = $3 \
                 ORDER BY h.position",
                )
                .bind(tenant)
                .bind(session)
                .bind(run)
                .fetch_all(pool)
                .await
            })?;
        Ok(rows
            .into_iter()
            .map(|(position, turn_id, turn_key, Json(message))| RunMessage {
                position,
                turn_id,
                turn_key,
                message,
            })
            .collect())
    }
}
