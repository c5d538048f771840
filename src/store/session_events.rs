//! Events of a session itself, written between its turns (in no turn), in the transaction
//! that makes the change they record. Their rows carry the nil turn id.

use super::events::session_event_turn;
use super::notify::{event_payloads, notify_events};
use super::{AppendGroup, Db, Stamp, Store, StoreError};
use crate::model::{AgentId, Event, EventData, ProcessId, SessionId, TenantId};

/// What a session event records, made in its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionChange {
    /// The session runs `version` of its tenant agent `agent` from its next turn on.
    AgentVersion { agent: AgentId, version: i64 },
}

const LOCK_SQLITE: &str = "SELECT id FROM sessions WHERE tenant_id = $1 AND id = $2";
const LOCK_PG: &str = "SELECT id FROM sessions WHERE tenant_id = $1 AND id = $2 FOR UPDATE";
const ACTIVE_TURN: &str = "SELECT COUNT(*) FROM turns \
     WHERE tenant_id = $1 AND session_id = $2 AND status IN ('queued', 'running')";
const MOVE: &str = "UPDATE sessions SET agent_version = $4, updated_at = $5 \
     WHERE tenant_id = $1 AND id = $2 AND agent_id = $3";
const NEXT_SEQ: &str = "SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE session_id = $1";
const INSERT_SQLITE: &str = "INSERT INTO events (session_id, seq, turn_id, kind, data, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";
const INSERT_PG: &str = "INSERT INTO events (session_id, seq, turn_id, kind, data, created_at) \
     VALUES ($1, $2, $3, $4, $5::jsonb, $6)";

/// Locks the session, checks it has no active turn, makes the change and appends the event
/// at the session's next seq; evaluates to the event's seq.
macro_rules! write_session_event {
    ($tx:ident, $tenant:expr, $session:expr, $change:expr, $data:expr, $now:expr, $lock:expr, $insert:expr) => {{
        let found: Option<SessionId> = sqlx::query_scalar($lock)
            .bind($tenant)
            .bind($session)
            .fetch_optional(&mut *$tx)
            .await?;
        if found.is_none() {
            return Err(StoreError::NotFound);
        }
        let active: i64 = sqlx::query_scalar(ACTIVE_TURN)
            .bind($tenant)
            .bind($session)
            .fetch_one(&mut *$tx)
            .await?;
        if active > 0 {
            return Err(StoreError::Conflict(super::Conflict::ActiveTurn));
        }
        match $change {
            SessionChange::AgentVersion { agent, version } => {
                let moved = sqlx::query(MOVE)
                    .bind($tenant)
                    .bind($session)
                    .bind(agent)
                    .bind(version)
                    .bind(Stamp($now))
                    .execute(&mut *$tx)
                    .await?
                    .rows_affected();
                if moved == 0 {
                    return Err(StoreError::NotFound);
                }
            }
        }
        let seq: i64 = sqlx::query_scalar(NEXT_SEQ)
            .bind($session)
            .fetch_one(&mut *$tx)
            .await?;
        sqlx::query($insert)
            .bind($session)
            .bind(seq)
            .bind(session_event_turn())
            .bind($data.kind())
            .bind($data.to_data())
            .bind(Stamp($now))
            .execute(&mut *$tx)
            .await?;
        seq
    }};
}

impl Store {
    /// Makes `change` to the tenant's session and appends `data`, an event of the session
    /// itself, at its next seq, in one transaction; on PostgreSQL the commit tells the other
    /// processes. `Conflict(ActiveTurn)` while the session has a queued or
    /// running turn (its events take the next seqs; the session row is locked first, so a
    /// turn admitted meanwhile on PostgreSQL waits for this commit); `NotFound` when the
    /// session is not the tenant's or not on the change's agent. For the event writer,
    /// whose next seqs it must know.
    pub async fn append_session_event(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        change: SessionChange,
        data: &EventData,
        origin: &ProcessId,
    ) -> Result<Event, StoreError> {
        debug_assert!(data.is_session_event());
        let now = crate::model::now();
        let seq = match &self.db {
            Db::Sqlite(pools) => {
                let mut tx = pools.write.begin().await?;
                let seq = write_session_event!(
                    tx,
                    tenant,
                    session,
                    change,
                    data,
                    now,
                    LOCK_SQLITE,
                    INSERT_SQLITE
                );
                tx.commit().await?;
                seq
            }
            Db::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let seq = write_session_event!(
                    tx, tenant, session, change, data, now, LOCK_PG, INSERT_PG
                );
                let event = Event {
                    session_id: *session,
                    seq,
                    turn_id: None,
                    data: data.clone(),
                    created_at: now,
                };
                let group = AppendGroup {
                    tenant: *tenant,
                    session: *session,
                    turn: session_event_turn(),
                    run: None,
                    events: vec![event],
                    coalesced: Vec::new(),
                    history: Vec::new(),
                    transition: None,
                };
                notify_events(&mut tx, &event_payloads(origin, &[group])).await?;
                tx.commit().await?;
                seq
            }
        };
        Ok(Event {
            session_id: *session,
            seq,
            turn_id: None,
            data: data.clone(),
            created_at: now,
        })
    }
}
