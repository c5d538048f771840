//! A page of runs read as a whole: their rows, their sessions, their events and the history
//! messages their turns brought, each in one statement whatever the page's size (a list
//! never reads run by run).

use sqlx::QueryBuilder;
use sqlx::types::Json;

use super::events::EventRow;
use super::run_list::RunMessage;
use super::runs::RunRow;
use super::sessions::{SESSION_COLUMNS, SessionRow};
use super::{Deltas, Store, StoreError, with_db};
use crate::model::{Event, HistoryMessage, Run, RunId, Session, SessionId, TenantId, TurnId};

impl Store {
    /// The tenant's runs of `ids` with their turns (two statements), in no particular order;
    /// an id that names none of the tenant's runs is left out.
    pub async fn get_runs(&self, tenant: &TenantId, ids: &[RunId]) -> Result<Vec<Run>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (rows, turns): (Vec<RunRow>, Vec<(RunId, TurnId)>) = with_db!(self, |pool| {
            let mut select = QueryBuilder::new(
                "SELECT id, tenant_id, session_id, status, cancelled_at, cancel_turn_id, \
                 created_at, updated_at FROM runs WHERE tenant_id = ",
            );
            select.push_bind(tenant).push(" AND id IN (");
            let mut list = select.separated(", ");
            for id in ids {
                list.push_bind(id);
            }
            select.push(")");
            let rows: Vec<RunRow> = select.build_query_as().fetch_all(pool).await?;
            let mut select = QueryBuilder::new("SELECT run_id, id FROM turns WHERE tenant_id = ");
            select.push_bind(tenant).push(" AND run_id IN (");
            let mut list = select.separated(", ");
            for id in ids {
                list.push_bind(id);
            }
            select.push(") ORDER BY created_at, id");
            let turns: Vec<(RunId, TurnId)> = select.build_query_as().fetch_all(pool).await?;
            Ok::<_, sqlx::Error>((rows, turns))
        })?;
        let mut of_run: std::collections::HashMap<RunId, Vec<TurnId>> = Default::default();
        for (run, turn) in turns {
            of_run.entry(run).or_default().push(turn);
        }
        rows.into_iter()
            .map(|row| {
                let turns = of_run.remove(&row.id).unwrap_or_default();
                row.into_run(turns)
            })
            .collect()
    }

    /// The tenant's sessions of `ids` (one statement), in no particular order.
    pub async fn get_sessions(
        &self,
        tenant: &TenantId,
        ids: &[SessionId],
    ) -> Result<Vec<Session>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<SessionRow> = with_db!(self, |pool| {
            let mut select = QueryBuilder::new(format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant_id = "
            ));
            select.push_bind(tenant).push(" AND id IN (");
            let mut list = select.separated(", ");
            for id in ids {
                list.push_bind(id);
            }
            select.push(")");
            select.build_query_as().fetch_all(pool).await
        })?;
        Ok(rows.into_iter().map(Session::from).collect())
    }

    /// Every stored event of the turns of the runs `ids` (one statement), by session then
    /// seq; a run's are those of its turns.
    pub async fn list_events_of_runs(
        &self,
        tenant: &TenantId,
        ids: &[RunId],
        deltas: Deltas,
    ) -> Result<Vec<Event>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<EventRow> = with_db!(self, |pool| {
            // Each turn's events lie between its first and last seq.
            let mut select = QueryBuilder::new(
                "SELECT e.session_id, e.seq, e.turn_id, e.kind, e.data, e.created_at \
                 FROM turns t JOIN events e ON e.session_id = t.session_id \
                 AND e.seq >= COALESCE(t.first_seq, 0) \
                 AND e.seq <= COALESCE(t.last_seq, 9223372036854775807) \
                 AND e.turn_id = t.id WHERE t.tenant_id = ",
            );
            select.push_bind(tenant).push(" AND t.run_id IN (");
            let mut list = select.separated(", ");
            for id in ids {
                list.push_bind(id);
            }
            select.push(") ORDER BY e.session_id, e.seq");
            select.build_query_as().fetch_all(pool).await
        })?;
        let replies = self.replies(tenant, &rows).await?;
        let mut events = Vec::with_capacity(rows.len());
        for row in rows {
            row.push_events(-1, deltas, &replies, &mut events)?;
        }
        Ok(events)
    }

    /// The history messages the turns of the runs `ids` brought and wrote (one statement),
    /// each with its run, in order of each session's history.
    pub async fn list_history_of_runs(
        &self,
        tenant: &TenantId,
        ids: &[RunId],
    ) -> Result<Vec<(RunId, RunMessage)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        type Row = (RunId, i64, TurnId, Option<String>, Json<HistoryMessage>);
        let rows: Vec<Row> = with_db!(self, |pool| {
            let mut select = QueryBuilder::new(
                "SELECT t.run_id, h.position, h.turn_id, t.idempotency_key, h.message \
                 FROM history h JOIN turns t ON t.id = h.turn_id AND t.session_id = h.session_id \
                 WHERE t.tenant_id = ",
            );
            select.push_bind(tenant).push(" AND t.run_id IN (");
            let mut list = select.separated(", ");
            for id in ids {
                list.push_bind(id);
            }
            select.push(") ORDER BY h.session_id, h.position");
            select.build_query_as().fetch_all(pool).await
        })?;
        Ok(rows
            .into_iter()
            .map(|(run, position, turn_id, turn_key, Json(message))| {
                let message = RunMessage {
                    position,
                    turn_id,
                    turn_key,
                    message,
                };
                (run, message)
            })
            .collect())
    }
}
