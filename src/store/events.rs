//! The event log: batched appends (events, history, turn state in one transaction) and
//! ordered reads after a cursor.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{QueryBuilder, Sqlite};

use super::runs::update_run_status;
use super::turns::APPEND_HISTORY;
use super::{Db, Store, StoreError, with_db};
use crate::model::{
    Event, EventData, HistoryMessage, RunId, RunStatus, SessionId, TenantId, TurnId, TurnStatus,
};

/// What one turn appends at once: events (seq already assigned) and the history messages
/// they complete.
#[derive(Debug, Clone)]
pub struct AppendGroup {
    pub tenant: TenantId,
    /// The run the turn belongs to: its status follows the turn's start and stop.
    pub run: Option<RunId>,
    pub events: Vec<Event>,
    pub history: Vec<HistoryMessage>,
}

#[derive(sqlx::FromRow)]
struct EventRow {
    session_id: SessionId,
    seq: i64,
    turn_id: TurnId,
    kind: String,
    data: Json<Value>,
    created_at: DateTime<Utc>,
}

impl TryFrom<EventRow> for Event {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<Self, StoreError> {
        Ok(Event {
            session_id: row.session_id,
            seq: row.seq,
            turn_id: row.turn_id,
            data: EventData::from_parts(&row.kind, row.data.0)?,
            created_at: row.created_at,
        })
    }
}

/// Rows per multi-row INSERT: well under both backends' bind-parameter limits.
const INSERT_CHUNK: usize = 256;

const INSERT_EVENTS: &str =
    "INSERT INTO events (tenant_id, session_id, seq, turn_id, kind, data, created_at) ";

/// A turn's state change implied by an event it appends.
enum TurnChange<'a> {
    Started {
        seq: i64,
        at: DateTime<Utc>,
    },
    Stopped {
        seq: i64,
        at: DateTime<Utc>,
        data: &'a EventData,
    },
}

fn turn_change(event: &Event) -> Option<TurnChange<'_>> {
    match &event.data {
        EventData::TurnStart {} => Some(TurnChange::Started {
            seq: event.seq,
            at: event.created_at,
        }),
        EventData::TurnStop { .. } => Some(TurnChange::Stopped {
            seq: event.seq,
            at: event.created_at,
            data: &event.data,
        }),
        _ => None,
    }
}

impl Store {
    /// The highest seq of the session's log (0 when empty). For the single writer.
    pub async fn max_event_seq(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<i64, StoreError> {
        let max: Option<i64> = with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT MAX(seq) FROM events WHERE tenant_id = $1 AND session_id = $2",
            )
            .bind(tenant)
            .bind(session)
            .fetch_one(pool)
            .await
        })?;
        Ok(max.unwrap_or(0))
    }

    /// Appends every group in one transaction: the events (multi-row inserts), the history
    /// messages, and the turn state that `turn_start` / `turn_stop` imply.
    pub async fn append_events(&self, groups: &[AppendGroup]) -> Result<(), StoreError> {
        let rows: Vec<(&TenantId, &Event)> = groups
            .iter()
            .flat_map(|g| g.events.iter().map(move |e| (&g.tenant, e)))
            .collect();
        match &self.db {
            Db::Sqlite(pools) => {
                let mut tx = pools.write.begin().await?;
                for chunk in rows.chunks(INSERT_CHUNK) {
                    let mut insert = QueryBuilder::<Sqlite>::new(INSERT_EVENTS);
                    insert.push_values(chunk, |mut row, (tenant, event)| {
                        row.push_bind((*tenant).clone())
                            .push_bind(event.session_id.clone())
                            .push_bind(event.seq)
                            .push_bind(event.turn_id.clone())
                            .push_bind(event.data.kind())
                            .push_bind(Json(event.data.to_data()))
                            .push_bind(event.created_at);
                    });
                    insert.build().execute(&mut *tx).await?;
                }
                append_rest!(tx, groups);
                tx.commit().await?;
            }
            Db::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                for chunk in rows.chunks(INSERT_CHUNK) {
                    let mut insert = QueryBuilder::<sqlx::Postgres>::new(INSERT_EVENTS);
                    insert.push_values(chunk, |mut row, (tenant, event)| {
                        row.push_bind((*tenant).clone())
                            .push_bind(event.session_id.clone())
                            .push_bind(event.seq)
                            .push_bind(event.turn_id.clone())
                            .push_bind(event.data.kind())
                            .push_bind(Json(event.data.to_data()))
                            .push_bind(event.created_at);
                    });
                    insert.build().execute(&mut *tx).await?;
                }
                append_rest!(tx, groups);
                tx.commit().await?;
            }
        }
        Ok(())
    }

    /// Up to `limit` events of the session after `after`, in order; only one turn's when
    /// `turn` is given.
    pub async fn list_events(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn: Option<&TurnId>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        let rows: Vec<EventRow> = with_db!(self, |pool| {
            match turn {
                None => {
                    sqlx::query_as(
                        "SELECT session_id, seq, turn_id, kind, data, created_at FROM events \
                         WHERE tenant_id = $1 AND session_id = $2 AND seq > $3 \
                         ORDER BY seq LIMIT $4",
                    )
                    .bind(tenant)
                    .bind(session)
                    .bind(after)
                    .bind(limit)
                    .fetch_all(pool)
                    .await
                }
                Some(turn) => {
                    sqlx::query_as(
                        "SELECT session_id, seq, turn_id, kind, data, created_at FROM events \
                         WHERE tenant_id = $1 AND session_id = $2 AND turn_id = $5 AND seq > $3 \
                         ORDER BY seq LIMIT $4",
                    )
                    .bind(tenant)
                    .bind(session)
                    .bind(after)
                    .bind(limit)
                    .bind(turn)
                    .fetch_all(pool)
                    .await
                }
            }
        })?;
        rows.into_iter().map(Event::try_from).collect()
    }
}

/// The history rows and turn updates of an append, on either backend's transaction.
macro_rules! append_rest {
    ($tx:ident, $groups:expr) => {
        for group in $groups {
            let Some(first) = group.events.first() else {
                continue;
            };
            for message in &group.history {
                sqlx::query(APPEND_HISTORY)
                    .bind(&group.tenant)
                    .bind(&first.session_id)
                    .bind(Json(message))
                    .bind(first.created_at)
                    .bind(&first.turn_id)
                    .execute(&mut *$tx)
                    .await?;
            }
            for change in group.events.iter().filter_map(turn_change) {
                match change {
                    TurnChange::Started { seq, at } => {
                        sqlx::query(
                            "UPDATE turns SET status = 'running', started_at = $2, \
                             first_seq = COALESCE(first_seq, $3) \
                             WHERE tenant_id = $4 AND id = $1 AND status = 'queued'",
                        )
                        .bind(&first.turn_id)
                        .bind(at)
                        .bind(seq)
                        .bind(&group.tenant)
                        .execute(&mut *$tx)
                        .await?;
                        if let Some(run) = &group.run {
                            update_run_status!($tx, &group.tenant, run, started, at);
                        }
                    }
                    TurnChange::Stopped { seq, at, data } => {
                        let EventData::TurnStop {
                            stop_reason,
                            error,
                            usage,
                        } = data
                        else {
                            unreachable!("a stop change comes from turn_stop")
                        };
                        let status = TurnStatus::after_stop(*stop_reason, error.as_ref());
                        sqlx::query(
                            "UPDATE turns SET status = $2, stop_reason = $3, error = $4, \
                             usage = $5, finished_at = $6, last_seq = $7, \
                             first_seq = COALESCE(first_seq, $7) WHERE tenant_id = $8 AND id = $1",
                        )
                        .bind(&first.turn_id)
                        .bind(status.as_str())
                        .bind(stop_reason.as_str())
                        .bind(error.as_ref().map(Json))
                        .bind(Json(usage))
                        .bind(at)
                        .bind(seq)
                        .bind(&group.tenant)
                        .execute(&mut *$tx)
                        .await?;
                        if let Some(run) = &group.run {
                            let status = RunStatus::after_stop(*stop_reason, error.as_ref());
                            update_run_status!($tx, &group.tenant, run, stopped, at, status.as_str());
                        }
                    }
                }
            }
        }
    };
}
use append_rest;
