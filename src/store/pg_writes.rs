//! PostgreSQL: a turn's plain admission and a batch of the event writer as one call each
//! of a function of migrations V28 and V33 (`agentry_admit`, `agentry_append`). A statement alone is
//! its own transaction, so each is one round trip to the server where `BEGIN`, every
//! statement and `COMMIT` were one each. Rows go as arrays, one per column.

use sqlx::PgPool;
use uuid::Uuid;

use super::StoreError;
use super::events::{
    AppendGroup, NewRow, batch_turns, coalesced_ranges, history_rows, transitions,
};
use super::notify::event_payloads;
use super::turns::{Admitted, HistoryRow, Remembered};
use super::usage::StoredUsage;
use super::webhook_outbox::StopMessages;
use super::writes::stale_or;
use crate::model::{ProcessId, TenantId, Turn, TurnId};

const APPEND: &str = "SELECT fenced, queued FROM agentry_append($1, $2, $3, $4, $5, $6, $7, \
     $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, \
     $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36, $37)";

const ADMIT: &str = "SELECT started, last_seq FROM agentry_admit($1, $2, $3, $4, $5, $6, $7, \
     $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)";

/// Appends the groups (none of them in a run) as `origin`: the fence of their turns, the
/// single deltas their coalesced rows replace, their history messages, `rows` (after the
/// history, which a packed row may refer to), their turns' starts and stops (each queueing its webhook messages) and the notification of their
/// sessions' new events. [`StoreError::Fenced`] names the turns not held (nothing is
/// written then); returns the webhook deliveries queued.
pub(super) async fn append(
    pool: &PgPool,
    groups: &[AppendGroup],
    rows: &[NewRow<'_>],
    origin: &ProcessId,
) -> Result<u64, StoreError> {
    debug_assert!(groups.iter().all(|group| group.run.is_none()));
    let turns: Vec<Uuid> = batch_turns(groups).iter().map(|t| t.to_uuid()).collect();
    let unevents = coalesced_ranges(groups);
    let history = history_rows(groups);
    let (started, stopped) = transitions(groups);
    let mut starts = Starts::default();
    for (group, seq, at) in started {
        starts.turns.push(group.turn.to_uuid());
        starts.tenants.push(group.tenant.to_uuid());
        starts.times.push(at);
        starts.seqs.push(seq);
    }
    let mut stops = Stops::default();
    for (group, end) in stopped {
        let messages = StopMessages::new(group, end);
        stops.turns.push(group.turn.to_uuid());
        stops.tenants.push(group.tenant.to_uuid());
        stops.sessions.push(group.session.to_uuid());
        stops.statuses.push(end.status.as_str());
        stops.reasons.push(end.stop_reason.as_str());
        stops
            .errors
            .push(end.error.as_ref().map(serde_json::to_string).transpose()?);
        stops
            .usages
            .push(serde_json::to_string(&StoredUsage(end.usage))?);
        stops.times.push(end.at);
        stops.seqs.push(end.seq);
        stops.started_times.push(end.started.map(|(_, at)| at));
        stops.started_seqs.push(end.started.map(|(seq, _)| seq));
        stops.message_ids.push(messages.turn.id.to_uuid());
        stops.message_types.push(messages.turn.event.as_str());
        stops.message_bits.push(messages.turn.event.bit());
        stops.message_data.push(messages.turn.data);
    }
    let (fenced, queued): (Vec<Uuid>, i64) = sqlx::query_as(APPEND)
        .bind(origin.to_uuid())
        .bind(turns)
        .bind(unevents.iter().map(|u| u.0.to_uuid()).collect::<Vec<_>>())
        .bind(unevents.iter().map(|u| u.1).collect::<Vec<_>>())
        .bind(unevents.iter().map(|u| u.2).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.session.to_uuid()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.seq).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.turn.to_uuid()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.kind).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.data.as_str()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| *r.created_at).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.refers).collect::<Vec<_>>())
        .bind(
            history
                .iter()
                .map(|h| h.session.to_uuid())
                .collect::<Vec<_>>(),
        )
        .bind(
            history
                .iter()
                .map(|h| h.tenant.to_uuid())
                .collect::<Vec<_>>(),
        )
        .bind(history_texts(&history)?)
        .bind(history.iter().map(|h| h.created_at).collect::<Vec<_>>())
        .bind(history.iter().map(|h| h.turn.to_uuid()).collect::<Vec<_>>())
        .bind(starts.turns)
        .bind(starts.tenants)
        .bind(starts.times)
        .bind(starts.seqs)
        .bind(stops.turns)
        .bind(stops.tenants)
        .bind(stops.sessions)
        .bind(stops.statuses)
        .bind(stops.reasons)
        .bind(stops.errors)
        .bind(stops.usages)
        .bind(stops.times)
        .bind(stops.seqs)
        .bind(stops.started_times)
        .bind(stops.started_seqs)
        .bind(stops.message_ids)
        .bind(stops.message_types)
        .bind(stops.message_data)
        .bind(stops.message_bits)
        .bind(event_payloads(origin, groups))
        .fetch_one(pool)
        .await
        .map_err(stale_or)?;
    if !fenced.is_empty() {
        return Err(StoreError::Fenced(
            fenced.into_iter().map(TurnId::from_uuid).collect(),
        ));
    }
    Ok(queued.max(0) as u64)
}

/// The columns of a batch's turn starts.
#[derive(Default)]
struct Starts {
    turns: Vec<Uuid>,
    tenants: Vec<Uuid>,
    times: Vec<chrono::DateTime<chrono::Utc>>,
    seqs: Vec<i64>,
}

/// The columns of a batch's turn stops, with the webhook message each queues.
#[derive(Default)]
struct Stops {
    turns: Vec<Uuid>,
    tenants: Vec<Uuid>,
    sessions: Vec<Uuid>,
    statuses: Vec<&'static str>,
    reasons: Vec<&'static str>,
    errors: Vec<Option<String>>,
    usages: Vec<String>,
    times: Vec<chrono::DateTime<chrono::Utc>>,
    seqs: Vec<i64>,
    started_times: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    started_seqs: Vec<Option<i64>>,
    message_ids: Vec<Uuid>,
    message_types: Vec<&'static str>,
    message_data: Vec<String>,
    message_bits: Vec<i64>,
}

/// The messages' JSON text, in order.
fn history_texts(rows: &[HistoryRow<'_>]) -> Result<Vec<String>, StoreError> {
    rows.iter()
        .map(|row| Ok(serde_json::to_string(row.message)?))
        .collect()
}

/// Records `turn` (queued, owned by `owner`) with the messages `input` brings, checking
/// what the caller remembers of its session and claiming a slot of its tenant's
/// (`start_within`) as [`Store::insert_turn`](super::Store::insert_turn) does, in one
/// call.
#[allow(clippy::too_many_arguments)]
pub(super) async fn admit(
    pool: &PgPool,
    tenant: &TenantId,
    turn: &Turn,
    owner: Option<&ProcessId>,
    permissions: Option<&serde_json::Value>,
    input: &[HistoryRow<'_>],
    remembered: Option<Remembered>,
    start_within: Option<usize>,
) -> Result<Admitted, StoreError> {
    debug_assert!(turn.run_id.is_none());
    let (started, last_seq): (bool, i64) = sqlx::query_as(ADMIT)
        .bind(turn.id.to_uuid())
        .bind(tenant.to_uuid())
        .bind(turn.session_id.to_uuid())
        .bind(turn.status.as_str())
        .bind(turn.stream.as_str())
        .bind(serde_json::to_string(&StoredUsage(turn.usage))?)
        .bind(&turn.idempotency_key)
        .bind(&turn.request_hash)
        .bind(turn.created_at)
        .bind(owner.map(|owner| owner.to_uuid()))
        .bind(permissions.map(serde_json::to_string).transpose()?)
        .bind(&turn.trace_parent)
        .bind(remembered.map(|r| r.updated_at))
        .bind(remembered.map(|r| r.compacted_through.unwrap_or(-1)))
        .bind(remembered.map(|r| r.history_len))
        .bind(start_within.map(|limit| i64::try_from(limit).unwrap_or(i64::MAX)))
        .bind(history_texts(input)?)
        .fetch_one(pool)
        .await
        .map_err(stale_or)?;
    Ok(Admitted {
        started,
        last_seq: Some(last_seq),
    })
}
