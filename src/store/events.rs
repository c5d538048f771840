//! The event log: batched appends (events, history, turn state in one transaction) and
//! ordered reads after a cursor.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::{QueryBuilder, Sqlite};

use super::Stamp;
use super::notify::{event_payloads, notify_events};
use super::packed::{Entry, PACKED, pack_finished_turns, reply_position, reply_text, unpack};
use super::runs::update_run_status;
use super::turns::{HistoryRow, history_values, insert_history};
use super::usage::StoredUsage;
use super::webhook_outbox::{
    ENQUEUE_SQLITE, STOP_AND_ENQUEUE_PG, STOP_TURN, STOP_TURNS, STOP_TURNS_WHERE, StopMessages,
};
use super::writes::{Failed, Refused, Writes};
use super::{Db, Store, StoreError, with_db};
use crate::model::{
    Event, EventData, HistoryMessage, ProcessId, RunId, RunStatus, SessionId, StopReason, TenantId,
    TurnError, TurnId, TurnStatus, Usage, WebhookEvent,
};

/// What one turn appends at once: events (seq already assigned), the deltas its
/// committed messages coalesce into, and the history messages they complete.
#[derive(Debug, Clone)]
pub struct AppendGroup {
    pub tenant: TenantId,
    pub session: SessionId,
    pub turn: TurnId,
    /// The run the turn belongs to: its status follows the turn's start and stop.
    pub run: Option<RunId>,
    /// Events stored as they are (deltas that `coalesced` covers are left out).
    pub events: Vec<Event>,
    pub coalesced: Vec<CoalescedDeltas>,
    pub history: Vec<HistoryMessage>,
    /// What the append does to its turn's state, as the engine decided it (executed in the
    /// append's transaction, after the fence).
    pub transition: Option<TurnTransition>,
}

/// A turn's state change an append makes, with its run's.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnTransition {
    /// The turn runs from `seq` (and its run, if still created): only while it waits or
    /// runs, else the batch is refused.
    Start { seq: i64, at: DateTime<Utc> },
    /// The turn ends: only once, else the batch is refused.
    Stop(TurnEnd),
}

/// How a turn ends: the values its row, its run's and its webhook messages take.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub status: TurnStatus,
    pub stop_reason: StopReason,
    pub error: Option<TurnError>,
    pub usage: Usage,
    /// The status the turn's run takes (when it has one).
    pub run_status: Option<RunStatus>,
    /// The webhook event the end is.
    pub event: WebhookEvent,
    /// The turn's start (seq and time), when it is in the same batch: written with the end.
    pub started: Option<(i64, DateTime<Utc>)>,
}

/// Consecutive deltas of one kind (seqs `first_seq..=last_seq`) of a message whose
/// `message_stop` is in the same append, stored as one event at `last_seq`. Each delta's
/// length is kept, so a reader whose cursor is inside the range gets exactly the text after
/// it, as one delta.
#[derive(Debug, Clone, PartialEq)]
pub struct CoalescedDeltas {
    pub thinking: bool,
    pub first_seq: i64,
    pub text: String,
    /// The byte length of each delta, in order.
    pub lengths: Vec<u32>,
    pub created_at: DateTime<Utc>,
    /// Whether some of the deltas were stored singly by an earlier append (and must go).
    pub replaces_stored: bool,
}

impl CoalescedDeltas {
    pub fn last_seq(&self) -> i64 {
        self.first_seq + self.lengths.len() as i64 - 1
    }

    fn kind(&self) -> &'static str {
        if self.thinking {
            "thinking_delta"
        } else {
            "text_delta"
        }
    }

    fn data(&self) -> String {
        #[derive(serde::Serialize)]
        struct Stored<'a> {
            delta: &'a str,
            lengths: Vec<[u32; 2]>,
        }
        serde_json::to_string(&Stored {
            delta: &self.text,
            lengths: run_lengths(&self.lengths),
        })
        .expect("deltas serialize")
    }
}

/// Delta lengths as `[length, times]` pairs (a model's deltas often have one length).
fn run_lengths(lengths: &[u32]) -> Vec<[u32; 2]> {
    let mut runs: Vec<[u32; 2]> = Vec::new();
    for length in lengths {
        match runs.last_mut() {
            Some([last, times]) if last == length => *times += 1,
            _ => runs.push([*length, 1]),
        }
    }
    runs
}

fn expand_lengths(runs: Vec<[u32; 2]>) -> Vec<u32> {
    runs.into_iter()
        .flat_map(|[length, times]| std::iter::repeat_n(length, times as usize))
        .collect()
}

#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    session_id: SessionId,
    seq: i64,
    turn_id: TurnId,
    kind: String,
    data: Json<Value>,
    created_at: Stamp,
}

/// The `turn_id` stored for an event of the session itself (in no turn): the nil UUID,
/// which no turn has.
pub(super) fn session_event_turn() -> TurnId {
    TurnId::from_uuid(uuid::Uuid::nil())
}

fn turn_of_row(turn: TurnId) -> Option<TurnId> {
    (turn != session_event_turn()).then_some(turn)
}

/// How a read gives the deltas a finished message's were coalesced into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deltas {
    /// One delta per run, holding the text after the reader's cursor.
    Merged,
    /// Each delta as it was streamed, with its own seq (for renderers whose frames are
    /// numbered per delta).
    AsStreamed,
}

impl EventRow {
    /// The events a reader whose cursor is `after` gets from this row: a coalesced delta
    /// gives what the reader does not have yet, merged or as streamed; a packed row, those
    /// of its events after the cursor (its reply's text from `replies`).
    pub(super) fn push_events(
        self,
        after: i64,
        deltas: Deltas,
        replies: &Replies,
        out: &mut Vec<Event>,
    ) -> Result<(), StoreError> {
        let reader = RowReader {
            session_id: self.session_id,
            turn_id: turn_of_row(self.turn_id),
            after,
            deltas,
        };
        if self.kind != PACKED {
            let stored = Stored::of(self.kind, self.data.0, self.created_at.0)?;
            return reader.push(self.seq, stored, out);
        }
        let reply = match reply_position(&self.data.0) {
            Some(position) => Some(replies.text(self.session_id, self.turn_id, position)?),
            None => None,
        };
        let entries = unpack(self.seq, self.data.0, self.created_at.0, reply)?
            .into_iter()
            .map(|entry| Stored::of(entry.kind, entry.data, entry.created_at))
            .collect::<Result<Vec<_>, _>>()?;
        let seqs: i64 = entries.iter().map(Stored::seqs).sum();
        let mut last = self.seq - seqs;
        for stored in entries {
            last += stored.seqs();
            if last > after {
                reader.push(last, stored, out)?;
            }
        }
        Ok(())
    }
}

/// The texts of the history messages packed rows refer to (see `packed.rs`), with their
/// turns, by session and position.
#[derive(Default)]
pub(super) struct Replies(HashMap<(SessionId, i64), (TurnId, String)>);

impl Replies {
    fn text(&self, session: SessionId, turn: TurnId, position: i64) -> Result<&str, StoreError> {
        match self.0.get(&(session, position)) {
            Some((of, text)) if *of == turn => Ok(text),
            _ => Err(StoreError::Corrupt(format!(
                "history message {position} of session {session}, which events of turn {turn} \
                 refer to, is not that turn's reply"
            ))),
        }
    }
}

/// Referenced history messages per statement: two binds each, well under both backends'
/// limits.
const REPLIES_CHUNK: usize = 256;

impl Store {
    /// The reply texts the packed rows among `rows` refer to: one statement per
    /// [`REPLIES_CHUNK`] of them (none when no row refers to one). A session deleted since
    /// its rows were read is [`StoreError::NotFound`]; a reference to a message that is not
    /// there or not a reply is [`StoreError::Corrupt`].
    pub(super) async fn replies(
        &self,
        tenant: &TenantId,
        rows: &[EventRow],
    ) -> Result<Replies, StoreError> {
        let wanted: Vec<(SessionId, i64)> = rows
            .iter()
            .filter(|row| row.kind == PACKED)
            .filter_map(|row| Some((row.session_id, reply_position(&row.data.0)?)))
            .collect();
        let mut replies = Replies::default();
        for chunk in wanted.chunks(REPLIES_CHUNK) {
            type Row = (SessionId, i64, TurnId, Json<HistoryMessage>);
            let found: Vec<Row> = with_db!(self, |pool| {
                let mut select = QueryBuilder::new(
                    "SELECT h.session_id, h.position, h.turn_id, h.message \
                     FROM history h JOIN sessions s ON s.id = h.session_id WHERE s.tenant_id = ",
                );
                select.push_bind(tenant).push(" AND (");
                for (i, (session, position)) in chunk.iter().enumerate() {
                    if i > 0 {
                        select.push(" OR ");
                    }
                    select.push("(h.session_id = ").push_bind(*session);
                    select
                        .push(" AND h.position = ")
                        .push_bind(*position)
                        .push(")");
                }
                select.push(")");
                select.build_query_as().fetch_all(pool).await
            })?;
            for (session, position, turn, Json(message)) in found {
                if let Some(text) = reply_text(&message) {
                    replies
                        .0
                        .insert((session, position), (turn, text.to_owned()));
                }
            }
        }
        // A reference not found: its session deleted since the page was read, or corrupt.
        if let Some((session, position)) = wanted.iter().find(|key| !replies.0.contains_key(key)) {
            return Err(if self.session_exists(tenant, session).await? {
                StoreError::Corrupt(format!(
                    "history message {position} of session {session}, which packed events \
                     refer to, is not a reply"
                ))
            } else {
                StoreError::NotFound
            });
        }
        Ok(replies)
    }

    async fn session_exists(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<bool, StoreError> {
        let found: i64 = with_db!(self, |pool| {
            sqlx::query_scalar("SELECT COUNT(*) FROM sessions WHERE id = $1 AND tenant_id = $2")
                .bind(session)
                .bind(tenant)
                .fetch_one(pool)
                .await
        })?;
        Ok(found > 0)
    }
}

/// What a reader of a row is given.
struct RowReader {
    session_id: SessionId,
    turn_id: Option<TurnId>,
    after: i64,
    deltas: Deltas,
}

/// A stored event, or coalesced deltas with each delta's length.
struct Stored {
    kind: String,
    data: Value,
    lengths: Option<Vec<u32>>,
    created_at: DateTime<Utc>,
}

impl Stored {
    fn of(kind: String, mut data: Value, created_at: DateTime<Utc>) -> Result<Self, StoreError> {
        let lengths = match data.as_object_mut().and_then(|d| d.remove("lengths")) {
            Some(runs) => Some(expand_lengths(serde_json::from_value(runs)?)),
            None => None,
        };
        Ok(Self {
            kind,
            data,
            lengths,
            created_at,
        })
    }

    /// The seqs it stands for.
    fn seqs(&self) -> i64 {
        self.lengths
            .as_ref()
            .map_or(1, |lengths| lengths.len() as i64)
    }
}

impl RowReader {
    /// The events of `stored`, whose last seq is `seq`, after the cursor.
    fn push(&self, seq: i64, stored: Stored, out: &mut Vec<Event>) -> Result<(), StoreError> {
        let Stored {
            kind,
            data,
            lengths,
            created_at,
        } = stored;
        let make = |seq: i64, data: Value| -> Result<Event, StoreError> {
            Ok(Event {
                session_id: self.session_id,
                seq,
                turn_id: self.turn_id,
                data: EventData::from_parts(&kind, data)?,
                created_at,
            })
        };
        let Some(lengths) = lengths else {
            out.push(make(seq, data)?);
            return Ok(());
        };
        let text = match data.get("delta") {
            Some(Value::String(text)) => text.as_str(),
            _ => "",
        };
        let corrupt = || {
            StoreError::Corrupt(format!(
                "coalesced deltas at seq {seq} do not match their lengths"
            ))
        };
        let first = seq - lengths.len() as i64 + 1;
        let mut start = 0;
        let mut pieces = Vec::with_capacity(lengths.len());
        for (i, length) in lengths.iter().enumerate() {
            let end = start + *length as usize;
            let piece = text.get(start..end).ok_or_else(corrupt)?;
            pieces.push((first + i as i64, piece));
            start = end;
        }
        if start != text.len() {
            return Err(corrupt());
        }
        let missed = pieces.into_iter().filter(|(seq, _)| *seq > self.after);
        match self.deltas {
            Deltas::Merged => {
                let delta: String = missed.map(|(_, piece)| piece).collect();
                out.push(make(seq, serde_json::json!({ "delta": delta }))?);
            }
            Deltas::AsStreamed => {
                for (seq, piece) in missed {
                    out.push(make(seq, serde_json::json!({ "delta": piece }))?);
                }
            }
        }
        Ok(())
    }
}

/// Rows per multi-row INSERT: well under both backends' bind-parameter limits.
const INSERT_CHUNK: usize = 256;

const INSERT_EVENTS: &str =
    "INSERT INTO events (session_id, seq, turn_id, kind, data, created_at) ";

/// A row of the events table, as the multi-row insert binds it.
pub(super) struct NewRow<'a> {
    pub session: SessionId,
    pub seq: i64,
    pub turn: TurnId,
    pub kind: &'static str,
    /// JSON text.
    pub data: String,
    pub created_at: &'a DateTime<Utc>,
    /// A packed row whose reply's text is the session's last history message of the
    /// batch, of the row's turn: the statement that inserts it puts that message's position
    /// in front of its entries (see `packed.rs`).
    pub refers: bool,
}

/// The rows a batch inserts: its events, its coalesced deltas, each finished turn's
/// events packed (see `packed.rs`), leaving a reply's text to its history message with
/// `refer`.
fn new_rows(groups: &[AppendGroup], refer: bool) -> Vec<NewRow<'_>> {
    let mut entries = Vec::new();
    for group in groups {
        entries.extend(group.events.iter().map(|event| Entry {
            first_seq: event.seq,
            row: NewRow {
                session: group.session,
                seq: event.seq,
                turn: group.turn,
                kind: event.data.kind(),
                data: event.data.to_data(),
                created_at: &event.created_at,
                refers: false,
            },
        }));
        entries.extend(group.coalesced.iter().map(|run| Entry {
            first_seq: run.first_seq,
            row: NewRow {
                session: group.session,
                seq: run.last_seq(),
                turn: group.turn,
                kind: run.kind(),
                data: run.data(),
                created_at: &run.created_at,
                refers: false,
            },
        }));
    }
    pack_finished_turns(groups, entries, refer)
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
                "SELECT MAX(e.seq) FROM events e JOIN sessions s ON s.id = e.session_id \
                 WHERE s.tenant_id = $1 AND e.session_id = $2",
            )
            .bind(tenant)
            .bind(session)
            .fetch_one(pool)
            .await
        })?;
        Ok(max.unwrap_or(0))
    }

    /// Appends every group in one transaction, if every group's turn is still unfinished
    /// and owned by `origin` (else nothing, and [`StoreError::Fenced`] names the turns that
    /// are not): the events (multi-row inserts), coalesced
    /// deltas in place of the single deltas stored before, the history messages, and the
    /// turn state changes the groups carry (decided by the engine). On PostgreSQL the commit also
    /// tells the other processes which sessions have new events, from `origin`. A turn's
    /// stop queues its webhook deliveries in the same transaction (see `webhook_outbox.rs`);
    /// returns how many were queued.
    pub async fn append_events(
        &self,
        groups: &[AppendGroup],
        origin: &ProcessId,
    ) -> Result<u64, StoreError> {
        let appended = self.try_append_events(groups, origin).await;
        self.note_write(&appended);
        appended
    }

    async fn try_append_events(
        &self,
        groups: &[AppendGroup],
        origin: &ProcessId,
    ) -> Result<u64, StoreError> {
        #[cfg(test)]
        if self
            .faults
            .refuse_usage_appends
            .load(std::sync::atomic::Ordering::SeqCst)
            && groups.iter().any(|group| {
                group
                    .events
                    .iter()
                    .any(|event| matches!(event.data, EventData::Usage { .. }))
            })
        {
            return Err(StoreError::Corrupt(
                "a usage event refused by the test".into(),
            ));
        }
        let mut enqueued = 0;
        match &self.db {
            Db::Sqlite(pools) => {
                let hooked = self.webhook_tenants.loaded(&pools.read).await?;
                // A batch with a run's status to follow, or a webhook message to queue,
                // sends its turns' changes one statement each (`append_rest!`); any other
                // is one statement (see `writes.rs`).
                let whole = groups.iter().all(|group| {
                    group.run.is_none()
                        && !(matches!(group.transition, Some(TurnTransition::Stop(_)))
                            && hooked.may_have_endpoints(&group.tenant))
                });
                let rows = new_rows(groups, whole);
                if whole {
                    let written = pools
                        .group
                        .commit(batch_writes(groups, &rows, origin))
                        .await;
                    if let Err(Failed { refused, error }) = written {
                        // Which turns a refusal, or what a statement met, was about (another
                        // process may have ended a turn and taken the seqs this batch was
                        // given): the fence names them.
                        if !error.is_outage() {
                            let mut connection = pools.write.acquire().await?;
                            fence!(connection, groups, Sqlite, origin, "");
                        }
                        return Err(match refused {
                            Some(Refused::Stale) => StoreError::Stale,
                            _ => error,
                        });
                    }
                } else {
                    let mut tx = pools.write.begin().await?;
                    fence!(tx, groups, Sqlite, origin, "");
                    delete_coalesced!(tx, groups, Sqlite);
                    insert_events!(tx, rows, Sqlite, "");
                    append_rest!(tx, groups, Sqlite, enqueued, false, hooked);
                    tx.commit().await?;
                }
            }
            // A batch of no run's turns is one call (see `pg_writes.rs`).
            Db::Postgres(pool) if groups.iter().all(|group| group.run.is_none()) => {
                let rows = new_rows(groups, true);
                enqueued = super::pg_writes::append(pool, groups, &rows, origin).await?;
            }
            Db::Postgres(pool) => {
                let rows = new_rows(groups, false);
                let mut tx = pool.begin().await?;
                fence!(tx, groups, sqlx::Postgres, origin, " FOR UPDATE");
                delete_coalesced!(tx, groups, sqlx::Postgres);
                insert_events!(tx, rows, sqlx::Postgres, "::jsonb");
                append_rest!(
                    tx,
                    groups,
                    sqlx::Postgres,
                    enqueued,
                    true,
                    self.webhook_tenants
                );
                notify_events(&mut tx, &event_payloads(origin, groups)).await?;
                tx.commit().await?;
            }
        }
        #[cfg(test)]
        if (self.faults.lose_next_commit_answer).swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Unavailable(
                "the connection was lost before the commit was answered".into(),
            ));
        }
        Ok(enqueued)
    }

    /// The session's events after `after`, in order, from up to `limit` stored rows (a
    /// packed row, or a coalesced one read `AsStreamed`, gives several events); only one
    /// turn's when `turn` is given.
    pub async fn list_events(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn: Option<&TurnId>,
        after: i64,
        limit: i64,
        deltas: Deltas,
    ) -> Result<Vec<Event>, StoreError> {
        let rows: Vec<EventRow> = with_db!(self, |pool| {
            match turn {
                None => {
                    sqlx::query_as(
                        "SELECT e.session_id, e.seq, e.turn_id, e.kind, e.data, e.created_at \
                         FROM events e JOIN sessions s ON s.id = e.session_id \
                         WHERE s.tenant_id = $1 AND e.session_id = $2 AND e.seq > $3 \
                         ORDER BY e.seq LIMIT $4",
                    )
                    .bind(tenant)
                    .bind(session)
                    .bind(after)
                    .bind(limit)
                    .fetch_all(pool)
                    .await
                }
                // A turn's events lie between its first and last seq.
                Some(turn) => {
                    sqlx::query_as(
                        "SELECT e.session_id, e.seq, e.turn_id, e.kind, e.data, e.created_at \
                         FROM turns t JOIN events e ON e.session_id = t.session_id \
                         WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.id = $5 \
                         AND e.seq > $3 AND e.seq >= COALESCE(t.first_seq, 0) \
                         AND e.seq <= COALESCE(t.last_seq, 9223372036854775807) \
                         AND e.turn_id = $5 ORDER BY e.seq LIMIT $4",
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
        let replies = self.replies(tenant, &rows).await?;
        let mut events = Vec::with_capacity(rows.len());
        for row in rows {
            row.push_events(after, deltas, &replies, &mut events)?;
        }
        Ok(events)
    }
}

impl Store {
    /// The events of a run's turns after `after`, in order, from up to `limit` stored rows:
    /// one statement for the whole run, however many turns it took.
    pub async fn list_run_events(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        run: &RunId,
        after: i64,
        limit: i64,
        deltas: Deltas,
    ) -> Result<Vec<Event>, StoreError> {
        let rows: Vec<EventRow> = with_db!(self, |pool| {
            // Each turn's events lie between its first and last seq.
            sqlx::query_as(
                "SELECT e.session_id, e.seq, e.turn_id, e.kind, e.data, e.created_at \
                 FROM turns t JOIN events e ON e.session_id = t.session_id \
                 WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.run_id = $5 \
                 AND e.seq > $3 AND e.seq >= COALESCE(t.first_seq, 0) \
                 AND e.seq <= COALESCE(t.last_seq, 9223372036854775807) \
                 AND e.turn_id = t.id ORDER BY e.seq LIMIT $4",
            )
            .bind(tenant)
            .bind(session)
            .bind(after)
            .bind(limit)
            .bind(run)
            .fetch_all(pool)
            .await
        })?;
        let replies = self.replies(tenant, &rows).await?;
        let mut events = Vec::with_capacity(rows.len());
        for row in rows {
            row.push_events(after, deltas, &replies, &mut events)?;
        }
        Ok(events)
    }
}

impl Store {
    /// The session's stored event rows as they are: seq, kind and data as text.
    #[cfg(test)]
    pub(crate) async fn stored_event_rows(
        &self,
        session: &SessionId,
    ) -> Vec<(i64, String, String)> {
        with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT seq, kind, CAST(data AS TEXT) FROM events WHERE session_id = $1 \
                 ORDER BY seq",
            )
            .bind(session)
            .fetch_all(pool)
            .await
        })
        .unwrap()
    }
}

/// A batch as rows of [`Writes`] (SQLite), in the order they must run: the fence of its
/// turns, the single deltas its coalesced ones replace, its history messages, its events
/// (after the history, which a packed row may refer to), its turns' starts and ends.
fn batch_writes(groups: &[AppendGroup], rows: &[NewRow<'_>], origin: &ProcessId) -> Writes {
    let mut writes = Writes::default();
    for turn in batch_turns(groups) {
        writes.row("fence", |row| {
            row.bind(turn).bind(origin);
        });
    }
    for (session, first, last) in coalesced_ranges(groups) {
        writes.row("unevent", |row| {
            row.bind(session).bind(first).bind(last);
        });
    }
    for message in history_rows(groups) {
        writes.row("history", |row| history_values(row, &message));
    }
    for event in rows {
        let op = if event.refers { "reply_event" } else { "event" };
        writes.row(op, |row| {
            row.bind(event.session)
                .bind(event.seq)
                .bind(event.turn)
                .bind(event.kind)
                .bind(event.data.as_str())
                .bind(Stamp(*event.created_at));
        });
    }
    let (starts, stops) = transitions(groups);
    for (group, seq, at) in starts {
        writes.row("start", |row| {
            row.bind(group.turn)
                .bind(group.tenant)
                .bind(Stamp(at))
                .bind(seq);
        });
    }
    for (group, end) in stops {
        writes.row("stop", |row| {
            stop_values!(row, bind, group, end);
        });
    }
    writes
}

/// The turns of a batch, each once, in order.
pub(super) fn batch_turns(groups: &[AppendGroup]) -> Vec<TurnId> {
    let mut turns: Vec<TurnId> = groups.iter().map(|g| g.turn).collect();
    turns.sort_unstable();
    turns.dedup();
    turns
}

/// The fence's verdict: [`StoreError::Fenced`] names the batch's turns it did not find
/// held.
fn fenced(mut turns: Vec<TurnId>, held: Vec<TurnId>) -> Result<(), StoreError> {
    if held.len() < turns.len() {
        turns.retain(|turn| !held.contains(turn));
        return Err(StoreError::Fenced(turns));
    }
    Ok(())
}

/// The stored single deltas the groups' coalesced deltas replace: `(session, first, last)`.
pub(super) fn coalesced_ranges(groups: &[AppendGroup]) -> Vec<(SessionId, i64, i64)> {
    groups
        .iter()
        .flat_map(|group| {
            group
                .coalesced
                .iter()
                .filter(|run| run.replaces_stored)
                .map(|run| (group.session, run.first_seq, run.last_seq()))
        })
        .collect()
}

/// The history messages the groups complete, stamped with their group's first event.
pub(super) fn history_rows(groups: &[AppendGroup]) -> Vec<HistoryRow<'_>> {
    let mut rows = Vec::new();
    for group in groups {
        let Some(first) = group.events.first() else {
            continue;
        };
        rows.extend(group.history.iter().map(|message| HistoryRow {
            tenant: &group.tenant,
            session: group.session,
            turn: group.turn,
            message,
            created_at: first.created_at,
        }));
    }
    rows
}

pub(super) type Starts<'a> = Vec<(&'a AppendGroup, i64, DateTime<Utc>)>;
pub(super) type Stops<'a> = Vec<(&'a AppendGroup, &'a TurnEnd)>;

/// The turns' starts (seq, time) and ends the groups carry.
pub(super) fn transitions(groups: &[AppendGroup]) -> (Starts<'_>, Stops<'_>) {
    let mut starts = Vec::new();
    let mut stops = Vec::new();
    for group in groups {
        match &group.transition {
            Some(TurnTransition::Start { seq, at }) => starts.push((group, *seq, *at)),
            Some(TurnTransition::Stop(end)) => stops.push((group, end)),
            None => {}
        }
    }
    (starts, stops)
}

/// Pushes the fence's statement for `$turns` onto the query builder `$b`: one row
/// `(0, id)` per turn still queued or running and owned by `$origin`.
macro_rules! push_fence {
    ($b:ident, $origin:expr, $turns:expr) => {
        $b.push("SELECT 0, id FROM turns WHERE owner = ");
        $b.push_bind($origin);
        $b.push(" AND status IN ('queued', 'running') AND id IN (");
        let mut ids = $b.separated(", ");
        for turn in $turns {
            ids.push_bind(*turn);
        }
        $b.push(")");
    };
}
use push_fence;

/// Pushes the statement that removes the stored single deltas `$ranges` (see
/// [`coalesced_ranges`]).
macro_rules! push_delete {
    ($b:ident, $ranges:expr) => {
        $b.push("DELETE FROM events WHERE ");
        for (i, (session, first, last)) in $ranges.iter().enumerate() {
            if i > 0 {
                $b.push(" OR ");
            }
            $b.push("(session_id = ");
            $b.push_bind(*session);
            $b.push(" AND seq BETWEEN ");
            $b.push_bind(*first);
            $b.push(" AND ");
            $b.push_bind(*last);
            $b.push(")");
        }
    };
}
use push_delete;

/// Pushes the statement that starts the turns of `$starts` (see [`transitions`]), only
/// those still queued or running; its changed rows are the turns it started.
macro_rules! push_starts {
    ($b:ident, $starts:expr) => {
        // `CASE id WHEN … END` picks each turn's values; `id IN (…)` finds the turns by
        // their key (a join with a VALUES list is planned as a scan of turns).
        $b.push("UPDATE turns SET status = 'running', started_at = CASE id");
        for (group, _, at) in &$starts {
            $b.push(" WHEN ").push_bind(group.turn);
            $b.push(" THEN ").push_bind(Stamp(*at));
        }
        $b.push(" END, first_seq = COALESCE(first_seq, CASE id");
        for (group, seq, _) in &$starts {
            $b.push(" WHEN ").push_bind(group.turn);
            $b.push(" THEN ").push_bind(*seq);
        }
        // Running already when its slot was claimed over every process.
        $b.push(" END) WHERE status IN ('queued', 'running') AND tenant_id = CASE id");
        for (group, _, _) in &$starts {
            $b.push(" WHEN ").push_bind(group.turn);
            $b.push(" THEN ").push_bind(group.tenant);
        }
        $b.push(" END AND id IN (");
        let mut ids = $b.separated(", ");
        for (group, _, _) in &$starts {
            ids.push_bind(group.turn);
        }
        $b.push(")");
    };
}
use push_starts;

/// Binds a turn's end with `$b.$bind(…)`, in the column order of [`STOP_TURNS`]'s values
/// (and of a `stop` row of [`Writes`]): turn, tenant, status, stop reason, error, usage,
/// finished_at, last seq, started_at, first seq.
macro_rules! stop_values {
    ($b:expr, $bind:ident, $group:expr, $end:expr) => {
        $b.$bind($group.turn)
            .$bind($group.tenant)
            .$bind($end.status.as_str())
            .$bind($end.stop_reason.as_str())
            .$bind($end.error.as_ref().map(Json))
            .$bind(Json(StoredUsage($end.usage)))
            .$bind(Stamp($end.at))
            .$bind($end.seq)
            .$bind($end.started.map(|(_, at)| Stamp(at)))
            .$bind($end.started.map(|(seq, _)| seq))
    };
}
use stop_values;

/// Pushes the statement that ends the turns of `$stops` (see [`transitions`]) with no
/// webhook message to queue, only those still queued or running: [`STOP_TURNS`]. Its
/// changed rows are the turns it ended.
macro_rules! push_stops {
    ($b:ident, $stops:expr) => {
        $b.push(STOP_TURNS);
        $b.push_values(&$stops, |mut b, (group, end)| {
            stop_values!(b, push_bind, group, end);
        });
        $b.push(STOP_TURNS_WHERE);
        let mut ids = $b.separated(", ");
        for (group, _) in &$stops {
            ids.push_bind(group.turn);
        }
        $b.push(")");
    };
}
use push_stops;

/// The history rows and turn updates of an append, on either backend's transaction, one
/// statement each (a stop that queues webhook messages, a run's status).
macro_rules! append_rest {
    ($tx:ident, $groups:expr, $db:ty, $enqueued:ident, $postgres:expr, $hooked:expr) => {
        // The groups' history messages: one statement for the batch.
        insert_history!($tx, history_rows($groups));
        // The turns' state changes: one statement for the batch's starts.
        let (starts, stops) = transitions($groups);
        if !starts.is_empty() {
            let mut update = QueryBuilder::<$db>::new("");
            push_starts!(update, starts);
            // A turn starts only while it waits or runs: one another process ended is not
            // started again (its start and the batch with it are refused).
            let started = update.build().execute(&mut *$tx).await?.rows_affected();
            if started < starts.len() as u64 {
                return Err(StoreError::Stale);
            }
            for (group, _, at) in &starts {
                if let Some(run) = &group.run {
                    update_run_status!($tx, &group.tenant, run, started, *at);
                }
            }
        }
        // On SQLite, the stops with no webhook message to queue: one statement for the
        // batch.
        let (plain, stops): (Vec<_>, Vec<_>) = stops
            .into_iter()
            .partition(|(group, _)| !$postgres && !$hooked.may_have_endpoints(&group.tenant));
        if !plain.is_empty() {
            let mut update = QueryBuilder::<$db>::new("");
            push_stops!(update, plain);
            // A turn ends once: another process may have ended it (its owner's lease
            // expired), and then this stop and the batch with it are refused.
            if update.build().execute(&mut *$tx).await?.rows_affected() < plain.len() as u64 {
                return Err(StoreError::Stale);
            }
            for (group, end) in &plain {
                if let (Some(run), Some(status)) = (&group.run, end.run_status) {
                    update_run_status!($tx, &group.tenant, run, stopped, end.at, status.as_str());
                }
            }
        }
        // The others (rarely more than a few a batch): one statement each, by key.
        for (group, end) in &stops {
            // On PostgreSQL the stop queues its webhook deliveries in the same statement
            // (no round trip more); on SQLite only for a tenant that may have endpoints
            // (for the others, no message is even made).
            let hooked = !$postgres && $hooked.may_have_endpoints(&group.tenant);
            let messages = ($postgres || hooked).then(|| StopMessages::new(group, end));
            let (stopped, queued): (i64, i64) =
                if let (true, Some(messages)) = ($postgres, &messages) {
                    sqlx::query_as(STOP_AND_ENQUEUE_PG)
                        .bind(group.turn)
                        .bind(end.status.as_str())
                        .bind(end.stop_reason.as_str())
                        .bind(end.error.as_ref().map(Json))
                        .bind(Json(StoredUsage(end.usage)))
                        .bind(Stamp(end.at))
                        .bind(end.seq)
                        .bind(group.tenant)
                        .bind(end.started.map(|(_, at)| Stamp(at)))
                        .bind(end.started.map(|(seq, _)| seq))
                        .bind(group.session)
                        .bind(messages.turn.id)
                        .bind(messages.turn.event.as_str())
                        .bind(&messages.turn.data)
                        .bind(messages.turn.event.bit())
                        .bind(messages.run.as_ref().map(|m| m.id))
                        .bind(messages.run.as_ref().map(|m| m.event.as_str()))
                        .bind(messages.run.as_ref().map(|m| m.data.as_str()))
                        .bind(messages.run.as_ref().map_or(0, |m| m.event.bit()))
                        .bind(group.run)
                        .fetch_one(&mut *$tx)
                        .await?
                } else {
                    sqlx::query_as(STOP_TURN)
                        .bind(group.turn)
                        .bind(end.status.as_str())
                        .bind(end.stop_reason.as_str())
                        .bind(end.error.as_ref().map(Json))
                        .bind(Json(StoredUsage(end.usage)))
                        .bind(Stamp(end.at))
                        .bind(end.seq)
                        .bind(group.tenant)
                        .bind(end.started.map(|(_, at)| Stamp(at)))
                        .bind(end.started.map(|(seq, _)| seq))
                        .fetch_optional(&mut *$tx)
                        .await?
                        .unwrap_or((0, 0))
                };
            // A turn ends once: another process may have ended it (its owner's lease
            // expired), and then this stop and the batch with it are refused.
            if stopped == 0 {
                return Err(StoreError::Stale);
            }
            $enqueued += queued as u64;
            if let (true, Some(messages)) = (hooked, &messages) {
                $enqueued += sqlx::query(ENQUEUE_SQLITE)
                    .bind(messages.turn.id)
                    .bind(messages.turn.event.as_str())
                    .bind(&messages.turn.data)
                    .bind(messages.turn.event.bit())
                    .bind(messages.run.as_ref().map(|m| m.id))
                    .bind(messages.run.as_ref().map(|m| m.event.as_str()))
                    .bind(messages.run.as_ref().map(|m| m.data.as_str()))
                    .bind(messages.run.as_ref().map_or(0, |m| m.event.bit()))
                    .bind(Stamp(end.at))
                    .bind(group.session)
                    .bind(group.tenant)
                    .bind(group.run)
                    .execute(&mut *$tx)
                    .await?
                    .rows_affected();
            }
            if let (Some(run), Some(status)) = (&group.run, end.run_status) {
                update_run_status!($tx, &group.tenant, run, stopped, end.at, status.as_str());
            }
        }
    };
}
use append_rest;

/// The fence: every turn of the groups must still be queued or running and owned by
/// `$origin`, checked first in the transaction. On PostgreSQL the turns' rows stay locked
/// (`FOR UPDATE`) until the commit, so another process's claim of a turn either commits
/// before (and this batch is refused) or waits until after it (and sees its events).
macro_rules! fence {
    ($tx:ident, $groups:expr, $db:ty, $origin:expr, $lock:expr) => {
        let turns = batch_turns($groups);
        let mut held: Vec<TurnId> = Vec::with_capacity(turns.len());
        for chunk in turns.chunks(INSERT_CHUNK) {
            let mut check = QueryBuilder::<$db>::new("");
            push_fence!(check, $origin, chunk);
            check.push($lock);
            let rows: Vec<(i32, TurnId)> = check.build_query_as().fetch_all(&mut *$tx).await?;
            held.extend(rows.into_iter().map(|(_, id)| id));
        }
        fenced(turns, held)?;
    };
}
use fence;

/// Inserts the events `$rows` ([`NewRow`]s), one multi-row statement per [`INSERT_CHUNK`],
/// the data cast with `$cast`.
macro_rules! insert_events {
    ($tx:ident, $rows:expr, $db:ty, $cast:expr) => {
        for chunk in $rows.chunks(INSERT_CHUNK) {
            let mut insert = QueryBuilder::<$db>::new(INSERT_EVENTS);
            insert.push_values(chunk, |mut b, row| {
                b.push_bind(row.session)
                    .push_bind(row.seq)
                    .push_bind(row.turn)
                    .push_bind(row.kind)
                    .push_bind(row.data.as_str())
                    .push_unseparated($cast)
                    .push_bind(Stamp(*row.created_at));
            });
            insert.build().execute(&mut *$tx).await?;
        }
    };
}
use insert_events;

/// Removes the single deltas the groups' coalesced deltas replace (stored by earlier
/// appends), in one statement.
macro_rules! delete_coalesced {
    ($tx:ident, $groups:expr, $db:ty) => {
        for chunk in coalesced_ranges($groups).chunks(INSERT_CHUNK) {
            let mut delete = QueryBuilder::<$db>::new("");
            push_delete!(delete, chunk);
            delete.build().execute(&mut *$tx).await?;
        }
    };
}
use delete_coalesced;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::{running_turn, tenant, test_store};

    /// A packed row that refers to a history message of a session gone since the row was
    /// read is not found; one whose message is not there is refused as corrupt, and so is a
    /// row that names a message of another turn.
    #[tokio::test]
    async fn a_packed_rows_missing_reply_is_not_found_or_corrupt() {
        let (store, _dir) = test_store().await;
        let tenant = tenant(&store).await;
        let turn = running_turn(&store, tenant, &ProcessId::generate()).await;
        let row = |session: SessionId| EventRow {
            session_id: session,
            seq: 3,
            turn_id: turn.id,
            kind: PACKED.to_owned(),
            data: Json(serde_json::json!([4, [1], [2, {"lengths": [[2, 1]]}], [9]])),
            created_at: Stamp(crate::model::now()),
        };

        let gone = [row(SessionId::generate())];
        assert!(matches!(
            store.replies(&tenant, &gone).await,
            Err(StoreError::NotFound)
        ));

        let missing = [row(turn.session_id)];
        let read = store.replies(&tenant, &missing).await;
        assert!(
            matches!(read, Err(StoreError::Corrupt(_))),
            "{:?}",
            read.err()
        );

        let mut replies = Replies::default();
        replies
            .0
            .insert((turn.session_id, 4), (TurnId::generate(), "ab".to_owned()));
        let [row] = missing;
        let read = row.push_events(0, Deltas::Merged, &replies, &mut Vec::new());
        assert!(matches!(read, Err(StoreError::Corrupt(_))), "{read:?}");
        store.close().await;
    }

    #[test]
    fn delta_lengths_are_stored_as_runs_and_read_back() {
        let lengths = vec![8, 8, 8, 3, 8, 8, 1];
        let runs = run_lengths(&lengths);
        assert_eq!(runs, [[8, 3], [3, 1], [8, 2], [1, 1]]);
        assert_eq!(expand_lengths(runs), lengths);
        assert!(run_lengths(&[]).is_empty());
    }
}
