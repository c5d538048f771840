//! How a turn's stop queues its webhook messages, in the event log's transaction: on
//! PostgreSQL inside the statement that stops the turn, on SQLite by one more statement for
//! the tenants that may have endpoints. The tenant's endpoints get the messages their mask
//! takes; a run's own endpoints get only their run's status change.

use std::collections::HashSet;
use std::sync::Mutex;

use sqlx::SqlitePool;

use super::StoreError;
use crate::model::{MessageId, TenantId, WebhookEvent};
/// A turn's stop, as the event log writes it on SQLite: `(1, 0)` when it stopped the turn.
pub(super) const STOP_TURN: &str = "UPDATE turns SET status = $2, stop_reason = $3, error = $4, \
     usage = $5, finished_at = $6, last_seq = $7, \
     first_seq = COALESCE(first_seq, $10, $7), started_at = COALESCE(started_at, $9) \
     WHERE tenant_id = $8 AND id = $1 AND status IN ('queued', 'running') RETURNING 1, 0";

/// The stops of several turns on SQLite (for tenants without endpoints: nothing to queue),
/// in one statement: [`STOP_TURNS`], the `VALUES` rows (`id, tenant, status, stop_reason,
/// error, usage, finished_at, last_seq, started_at, first_seq`), [`STOP_TURNS_WHERE`], the
/// turns' ids and `)`. The `id IN (…)` finds the turns by their key (a join with a `VALUES`
/// list alone is planned as a scan of turns). Its changed rows are the turns it stopped.
pub(super) const STOP_TURNS: &str = "UPDATE turns SET status = v.column3, \
     stop_reason = v.column4, error = v.column5, usage = v.column6, finished_at = v.column7, \
     last_seq = v.column8, first_seq = COALESCE(turns.first_seq, v.column10, v.column8), \
     started_at = COALESCE(turns.started_at, v.column9) FROM (";
pub(super) const STOP_TURNS_WHERE: &str = ") AS v WHERE turns.id = v.column1 \
     AND turns.tenant_id = v.column2 AND turns.status IN ('queued', 'running') AND turns.id IN (";

/// The same stop on PostgreSQL, queueing its webhook messages (`$12`–`$15` for the turn,
/// `$16`–`$19` for its run, a bit of 0 when there is none) in one statement: to each
/// enabled endpoint of the tenant that takes their type, and the run's message to the run's
/// (`$20`) own enabled endpoints. `(turns stopped, deliveries queued)`.
pub(super) const STOP_AND_ENQUEUE_PG: &str = "WITH stopped AS (\
     UPDATE turns SET status = $2, stop_reason = $3, error = $4, \
     usage = $5, finished_at = $6, last_seq = $7, \
     first_seq = COALESCE(first_seq, $10, $7), started_at = COALESCE(started_at, $9) \
     WHERE tenant_id = $8 AND id = $1 AND status IN ('queued', 'running') RETURNING id), \
     queued AS (INSERT INTO webhook_deliveries (endpoint_id, message_id, tenant_id, \
     event_type, agent, data, status, attempts, queued_at, next_attempt_at, created_at) \
     SELECT e.id, m.id, e.tenant_id, m.event_type, s.agent, m.data, 'pending', 0, $6, $6, $6 \
     FROM stopped, webhook_endpoints e \
     JOIN sessions s ON s.id = $11 AND s.tenant_id = e.tenant_id \
     CROSS JOIN (VALUES ($12::uuid, $13::text, $14::text, $15::bigint), \
     ($16::uuid, $17::text, $18::text, $19::bigint)) AS m (id, event_type, data, bit) \
     WHERE e.tenant_id = $8 AND e.run_id IS NULL AND e.enabled \
     AND (e.event_mask & m.bit) <> 0 \
     UNION ALL \
     SELECT e.id, $16::uuid, e.tenant_id, $17::text, s.agent, $18::text, 'pending', 0, \
     $6, $6, $6 FROM stopped, webhook_endpoints e \
     JOIN sessions s ON s.id = $11 AND s.tenant_id = e.tenant_id \
     WHERE e.run_id = $20 AND e.tenant_id = $8 AND e.enabled AND $16::uuid IS NOT NULL \
     RETURNING 1) \
     SELECT (SELECT COUNT(*) FROM stopped), (SELECT COUNT(*) FROM queued)";

/// On SQLite, after the stop: the same messages (`$1`–`$4` for the turn, `$5`–`$8` for its
/// run) to the tenant's (`$11`) endpoints, and the run's message to the run's (`$12`) own,
/// naming the session's (`$10`) agent.
pub(super) const ENQUEUE_SQLITE: &str = "INSERT INTO webhook_deliveries (endpoint_id, \
     message_id, tenant_id, event_type, agent, data, status, attempts, queued_at, \
     next_attempt_at, created_at) \
     SELECT e.id, m.id, e.tenant_id, m.event_type, s.agent, m.data, 'pending', 0, $9, $9, $9 \
     FROM webhook_endpoints e JOIN sessions s ON s.id = $10 AND s.tenant_id = e.tenant_id \
     CROSS JOIN (SELECT $1 AS id, $2 AS event_type, $3 AS data, $4 AS bit \
     UNION ALL SELECT $5, $6, $7, $8) AS m \
     WHERE e.tenant_id = $11 AND e.run_id IS NULL AND e.enabled \
     AND (e.event_mask & m.bit) <> 0 \
     UNION ALL \
     SELECT e.id, $5, e.tenant_id, $6, s.agent, $7, 'pending', 0, $9, $9, $9 \
     FROM webhook_endpoints e JOIN sessions s ON s.id = $10 AND s.tenant_id = e.tenant_id \
     WHERE e.run_id = $12 AND e.tenant_id = $11 AND e.enabled AND $5 IS NOT NULL";

/// One webhook message of a turn's stop.
pub(super) struct StopMessage {
    pub id: MessageId,
    pub event: WebhookEvent,
    /// JSON: the event's data, without the agent (added from the session when sent).
    pub data: String,
}

/// The messages of a turn's stop: its own, and its run's status change.
pub(super) struct StopMessages {
    pub turn: StopMessage,
    pub run: Option<StopMessage>,
}

impl StopMessages {
    pub fn new(group: &super::AppendGroup, end: &super::TurnEnd) -> Self {
        let mut data = serde_json::json!({
            "tenant_id": group.tenant,
            "session_id": group.session,
            "turn_id": group.turn,
            "status": end.status.as_str(),
            "stop_reason": end.stop_reason,
            "usage": end.usage,
            "finished_at": end.at,
        });
        if let Some(error) = &end.error {
            data["error"] = serde_json::json!(error);
        }
        if let Some(run) = group.run {
            data["run_id"] = serde_json::json!(run);
        }
        // Generated in order: the turn's message is sent before its run's.
        let turn = StopMessage {
            id: MessageId::generate(),
            event: end.event,
            data: data.to_string(),
        };
        let run = group.run.zip(end.run_status).map(|(_, run_status)| {
            data["turn_status"] = data["status"].clone();
            data["status"] = serde_json::json!(run_status.as_str());
            // Whether the run can change again: its last message when not.
            data["terminal"] = serde_json::json!(run_status.is_terminal());
            StopMessage {
                id: MessageId::generate(),
                event: WebhookEvent::RunStatusChanged,
                data: data.to_string(),
            }
        });
        StopMessages { turn, run }
    }
}

/// On SQLite (served by one process, the only one that registers endpoints), the tenants
/// that may have webhook endpoints: a stop of any other tenant's turn queues nothing and
/// costs no statement. Read once from the database, then a tenant is added before its
/// first endpoint is written (and never removed while the process lives).
#[derive(Debug, Default)]
pub(crate) struct WebhookTenants {
    tenants: Mutex<Option<HashSet<TenantId>>>,
}

impl WebhookTenants {
    /// The set, read from the database the first time.
    pub(super) async fn loaded(&self, pool: &SqlitePool) -> Result<&Self, StoreError> {
        if self.tenants.lock().expect("webhook tenants lock").is_some() {
            return Ok(self);
        }
        let stored: Vec<TenantId> =
            sqlx::query_scalar("SELECT DISTINCT tenant_id FROM webhook_endpoints")
                .fetch_all(pool)
                .await?;
        let mut tenants = self.tenants.lock().expect("webhook tenants lock");
        tenants.get_or_insert_with(HashSet::new).extend(stored);
        Ok(self)
    }

    pub(super) fn add(&self, tenant: &TenantId) {
        if let Some(tenants) = self.tenants.lock().expect("webhook tenants lock").as_mut() {
            tenants.insert(*tenant);
        }
    }

    pub(super) fn may_have_endpoints(&self, tenant: &TenantId) -> bool {
        self.tenants
            .lock()
            .expect("webhook tenants lock")
            .as_ref()
            .is_none_or(|tenants| tenants.contains(tenant))
    }
}
