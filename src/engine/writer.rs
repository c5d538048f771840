//! The event log's single writer: group-commits appends from every running turn, assigns
//! per-session sequence numbers, and publishes events only once they are durable.
//!
//! Every delta is durable before it is published. When a message's `message_stop` is
//! committed, its deltas are stored again as one event per run of consecutive deltas of one
//! kind, in the same transaction that removes the single ones (or instead of writing them,
//! when they are in the same batch): the log keeps one row where the stream had many. The
//! batch that stores a turn's `turn_stop` stores the turn's events it holds as one row (see
//! the store's `packed.rs`).
//!
//! Longer than most files here on purpose: batching, the coalescing of a finished message's
//! deltas and the fencing of a batch are one state machine over one batch; split, each part
//! would need the others' state.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{Notify, mpsc, oneshot};
use tracing::Instrument;

use super::fanout::Fanout;
use super::lease::Lease;
use super::scheduler::Controls;
use crate::metrics::Metrics;
use crate::model::{
    Event, EventData, HistoryMessage, ProcessId, RunId, SessionId, TenantId, TurnError, TurnId,
    scrub_nul,
};
use crate::store::{AppendGroup, Backend, CoalescedDeltas, SessionChange, Store, StoreError};

/// Requests waiting for the writer; senders wait when it is full (back-pressure).
const QUEUE: usize = 4096;
/// Sessions whose next seq the writer remembers between turns.
const MAX_CACHED_SESSIONS: usize = 100_000;

/// One turn's append: its events and the history messages they complete.
pub struct Append {
    pub tenant: TenantId,
    pub session: SessionId,
    pub turn: TurnId,
    /// The run the turn belongs to, if any: the writer keeps its status.
    pub run: Option<RunId>,
    pub events: Vec<EventData>,
    pub history: Vec<HistoryMessage>,
    /// Whether this append may follow an append of its turn that failed: only the end that
    /// closes such a turn (what is durable of it) may. Any other, the turn's ordinary end
    /// included, is then refused, so an end queued behind the turn's last events without
    /// waiting for them is never committed when they were not.
    pub after_failure: bool,
    /// The span the commit of these events is recorded on, as an event (disabled when
    /// traces are not exported).
    pub span: tracing::Span,
}

type Reply = oneshot::Sender<Result<Vec<Arc<Event>>, StoreError>>;

/// An event of a session itself (in no turn) and the change it records, written together
/// between the session's turns.
pub struct SessionAppend {
    pub tenant: TenantId,
    pub session: SessionId,
    pub change: SessionChange,
    pub event: EventData,
}

type SessionReply = oneshot::Sender<Result<Arc<Event>, StoreError>>;

enum Request {
    Append(Append, Reply),
    Flush(oneshot::Sender<()>),
    Session(SessionAppend, SessionReply),
}

/// What tells the writer which turns are still this process's to write: its lease, and
/// the running turns' off switches (a turn that cannot be written is stopped).
pub(super) struct Ownership {
    pub lease: Arc<Lease>,
    pub controls: Arc<Controls>,
}

/// Why nothing is written while the lease is not proven.
pub(super) const LEASE_UNPROVEN: &str =
    "this process cannot prove its lease: another process may be ending its turns";

/// Why a turn ends whose events could not be stored.
pub(super) fn unstored(error: &StoreError) -> TurnError {
    match error {
        StoreError::Full(_) => TurnError::new(
            "insufficient_storage",
            "the turn's events could not be stored: the database's storage is full",
        ),
        StoreError::Unavailable(why) if why == LEASE_UNPROVEN => TurnError::new(
            TurnError::INTERRUPTED,
            "the server running the turn lost contact with the database",
        ),
        StoreError::Unavailable(_) => TurnError::new(
            "database_unavailable",
            "the turn's events could not be stored: the database is unavailable",
        ),
        StoreError::Fenced(_) => TurnError::new(
            TurnError::INTERRUPTED,
            "another server ended the turn: this one lost contact with the database",
        ),
        _ => TurnError::new("internal", "the turn's events could not be stored"),
    }
}

/// The committed events of an append, once durable.
pub type Receipt = oneshot::Receiver<Result<Vec<Arc<Event>>, StoreError>>;

#[derive(Debug, Clone)]
pub struct EventWriter {
    requests: mpsc::Sender<Request>,
    first_seqs: FirstSeqs,
}

/// The first seq of turns this process admitted and owns, as their admission read it
/// (PostgreSQL): the writer takes a turn's at its first append instead of reading the
/// session's last seq then, in its own round trip. While the turn is the session's active
/// one only its runner writes the session's events, and a process that took the turn over
/// fences this one's appends. Without an entry (none given, or dropped when too many are
/// kept) the writer reads the log.
type FirstSeqs = Arc<std::sync::Mutex<HashMap<TurnId, i64>>>;

impl EventWriter {
    /// Starts the writer task.
    pub fn start(
        store: Store,
        fanout: Arc<Fanout>,
        process: ProcessId,
        max_batch_events: usize,
        webhooks: Arc<Notify>,
        metrics: Arc<Metrics>,
        ownership: Ownership,
    ) -> EventWriter {
        let (requests, inbox) = mpsc::channel(QUEUE);
        let first_seqs = FirstSeqs::default();
        let task = WriterTask {
            first_seqs: first_seqs.clone(),
            process,
            lease: ownership.lease,
            controls: ownership.controls,
            fenced_turns: HashSet::new(),
            keep_seq: store.backend() == Backend::Sqlite,
            store,
            fanout,
            webhooks,
            metrics,
            max_batch_events,
            next_seq: HashMap::new(),
            failed_turns: HashSet::new(),
            open_messages: HashMap::new(),
        };
        tokio::spawn(task.run(inbox));
        EventWriter {
            requests,
            first_seqs,
        }
    }

    /// Tells the writer the session's last seq as `turn`'s admission read it: the turn's
    /// first event gets the next one.
    pub fn admitted(&self, turn: TurnId, last_seq: i64) {
        let mut first_seqs = self.first_seqs.lock().expect("first seqs lock");
        if first_seqs.len() >= MAX_CACHED_SESSIONS {
            first_seqs.clear();
        }
        first_seqs.insert(turn, last_seq + 1);
    }

    /// Queues an append; the receipt resolves once it is committed (or failed). Appends of
    /// one sender are committed in the order they were sent.
    pub async fn append(&self, append: Append) -> Receipt {
        let (reply, receipt) = oneshot::channel();
        if let Err(mpsc::error::SendError(Request::Append(_, reply))) =
            self.requests.send(Request::Append(append, reply)).await
        {
            let _ = reply.send(Err(StoreError::Corrupt("the event writer stopped".into())));
        }
        receipt
    }

    /// Writes an event of a session itself with the change it records, after everything
    /// queued before it; refused (`Conflict(ActiveTurn)`) while the session
    /// has an active turn. The event is published once durable.
    pub async fn append_session(&self, append: SessionAppend) -> Result<Arc<Event>, StoreError> {
        let (reply, receipt) = oneshot::channel();
        if self
            .requests
            .send(Request::Session(append, reply))
            .await
            .is_err()
        {
            return Err(StoreError::Corrupt("the event writer stopped".into()));
        }
        receipt
            .await
            .unwrap_or_else(|_| Err(StoreError::Corrupt("the event writer stopped".into())))
    }

    /// Waits until everything queued before this call is committed.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.requests.send(Request::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

struct WriterTask {
    /// The process writing: named in the commit's notification to the others, and the
    /// owner every written turn must still have.
    process: ProcessId,
    /// Nothing is written while this process cannot prove its lease.
    lease: Arc<Lease>,
    /// The running turns' off switches: a turn whose events cannot be stored is stopped.
    controls: Arc<Controls>,
    /// Turns that are no longer this process's: nothing of theirs is written, not even
    /// their `turn_stop` (whoever took them ends them).
    fenced_turns: HashSet<TurnId>,
    store: Store,
    fanout: Arc<Fanout>,
    /// Woken when a commit queued webhook deliveries.
    webhooks: Arc<Notify>,
    metrics: Arc<Metrics>,
    max_batch_events: usize,
    /// The next seq of sessions; reloaded from the log when absent.
    next_seq: HashMap<SessionId, i64>,
    /// Turns' first seqs as their admission read them, taken at their first append.
    first_seqs: FirstSeqs,
    /// Whether a session's next seq outlives its turn: on SQLite this process is the only
    /// writer; on PostgreSQL another process may run the session's next turn.
    keep_seq: bool,
    /// Turns an append failed for: their later events would leave a hole, so only their
    /// closing end (`after_failure`) is still accepted.
    failed_turns: HashSet<TurnId>,
    /// The deltas of each turn's message in progress, until its `message_stop`.
    open_messages: HashMap<TurnId, Vec<OpenDelta>>,
}

/// A delta of a message not yet stopped.
struct OpenDelta {
    event: Arc<Event>,
    stored: Stored,
}

/// Where a delta of an open message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stored {
    /// Only in memory (its append is being prepared).
    No,
    /// In an earlier append of the batch being prepared.
    InBatch,
    /// Committed singly.
    Durable,
}

impl OpenDelta {
    fn text(&self) -> Option<(bool, &str)> {
        match &self.event.data {
            EventData::TextDelta { delta } => Some((false, delta)),
            EventData::ThinkingDelta { delta } => Some((true, delta)),
            _ => None,
        }
    }
}

/// What one append stores and what it publishes once stored.
struct Prepared {
    group: AppendGroup,
    published: Vec<Arc<Event>>,
}

/// Splits a stopped message's deltas into runs of consecutive deltas of one kind: a run of
/// several becomes one coalesced event (its deltas already in the batch are `unstored`);
/// a lone delta not yet stored is stored as it is.
fn coalesce(
    deltas: Vec<OpenDelta>,
    stored: &mut Vec<Event>,
    coalesced: &mut Vec<CoalescedDeltas>,
    unstored: &mut HashSet<i64>,
) {
    let mut runs: Vec<Vec<OpenDelta>> = Vec::new();
    for delta in deltas {
        let continues = runs.last().and_then(|run| run.last()).is_some_and(|last| {
            last.event.seq + 1 == delta.event.seq
                && last.text().map(|(t, _)| t) == delta.text().map(|(t, _)| t)
        });
        match runs.last_mut() {
            Some(run) if continues => run.push(delta),
            _ => runs.push(vec![delta]),
        }
    }
    for run in runs {
        if run.len() == 1 {
            let delta = run.into_iter().next().expect("one delta");
            if delta.stored == Stored::No {
                stored.push((*delta.event).clone());
            }
            continue;
        }
        let Some((thinking, _)) = run[0].text() else {
            continue;
        };
        let mut text = String::new();
        let mut lengths = Vec::with_capacity(run.len());
        for delta in &run {
            let part = delta.text().map_or("", |(_, t)| t);
            text.push_str(part);
            lengths.push(part.len() as u32);
        }
        unstored.extend(
            run.iter()
                .filter(|d| d.stored == Stored::InBatch)
                .map(|d| d.event.seq),
        );
        coalesced.push(CoalescedDeltas {
            thinking,
            first_seq: run[0].event.seq,
            text,
            lengths,
            created_at: run[0].event.created_at,
            replaces_stored: run.iter().any(|d| d.stored == Stored::Durable),
        });
    }
}

/// Each append's commit as an event on its turn's span: the turn's events it made durable,
/// the whole batch's, and how long the commit took.
fn record_commits(
    batch: &[(Append, Reply)],
    committed: &[Vec<Arc<Event>>],
    batch_events: usize,
    took: std::time::Duration,
) {
    for ((append, _), events) in batch.iter().zip(committed) {
        if append.span.is_disabled() {
            continue;
        }
        append.span.in_scope(|| {
            tracing::event!(
                target: crate::traces::TARGET,
                tracing::Level::INFO,
                agentry.writer.events = events.len(),
                agentry.writer.first_seq = events.first().map_or(0, |e| e.seq),
                agentry.writer.batch_events = batch_events,
                agentry.writer.commit_seconds = took.as_secs_f64(),
                "agentry.writer.commit"
            );
        });
    }
}

impl WriterTask {
    async fn run(mut self, mut inbox: mpsc::Receiver<Request>) {
        while let Some(first) = inbox.recv().await {
            let mut batch = Vec::new();
            let mut flushes = Vec::new();
            let mut session = None;
            let mut events = 0;
            let mut next = Some(first);
            while let Some(request) = next.take() {
                match request {
                    Request::Append(append, reply) => {
                        events += append.events.len();
                        batch.push((append, reply));
                    }
                    Request::Flush(done) => flushes.push(done),
                    // Written alone, after what came before it.
                    Request::Session(append, reply) => {
                        session = Some((append, reply));
                        break;
                    }
                }
                if events < self.max_batch_events {
                    next = inbox.try_recv().ok();
                }
            }
            if !batch.is_empty() {
                self.commit(batch).await;
            }
            if let Some((append, reply)) = session {
                let _ = reply.send(self.commit_session(append).await);
            }
            for done in flushes {
                let _ = done.send(());
            }
        }
    }

    async fn commit(&mut self, batch: Vec<(Append, Reply)>) {
        let mut accepted = Vec::with_capacity(batch.len());
        let held = self.lease.is_held();
        for (append, reply) in batch {
            let stops = append.events.iter().any(EventData::is_turn_stop);
            if self.fenced_turns.contains(&append.turn) {
                if stops {
                    self.fenced_turns.remove(&append.turn);
                }
                self.forget(&append);
                let _ = reply.send(Err(StoreError::Fenced(vec![append.turn])));
                continue;
            }
            if !held {
                // Another process may be taking this process's turns: write nothing.
                self.failed(&append, &StoreError::Unavailable(LEASE_UNPROVEN.into()));
                let _ = reply.send(Err(StoreError::Unavailable(LEASE_UNPROVEN.into())));
                continue;
            }
            if self.failed_turns.contains(&append.turn) && !append.after_failure {
                let _ = reply.send(Err(StoreError::Corrupt(
                    "an earlier append of this turn failed".into(),
                )));
                continue;
            }
            accepted.push((append, reply));
        }
        if accepted.is_empty() {
            return;
        }
        match self.try_commit(&accepted).await {
            Ok((committed, took)) => {
                let events = committed.iter().map(Vec::len).sum::<usize>();
                tracing::debug!(appends = accepted.len(), events, "batch committed");
                record_commits(&accepted, &committed, events, took);
                self.deliver(accepted, committed)
            }
            Err(StoreError::Fenced(turns)) => {
                // Those turns are no longer this process's: refuse their appends, stop
                // them, and commit the others' as they are.
                let mut rest = Vec::with_capacity(accepted.len());
                for (append, reply) in accepted {
                    self.next_seq.remove(&append.session);
                    if turns.contains(&append.turn) {
                        tracing::warn!(turn_id = %append.turn, "refused the events of a turn that is no longer this process's");
                        self.fence(&append);
                        let _ = reply.send(Err(StoreError::Fenced(vec![append.turn])));
                    } else {
                        rest.push((append, reply));
                    }
                }
                if !rest.is_empty() {
                    Box::pin(self.commit(rest)).await;
                }
            }
            Err(error) if accepted.len() == 1 => {
                let (append, reply) = accepted.pop().expect("one append");
                if error.is_outage() {
                    tracing::warn!(error = %error, turn_id = %append.turn, "event append failed");
                } else {
                    tracing::error!(error = %error, turn_id = %append.turn, "event append failed");
                }
                self.failed(&append, &error);
                let _ = reply.send(Err(error));
            }
            Err(error) if error.is_outage() => {
                // The commit's outcome is unknown (the connection may have died after the
                // database took it): a retry could store the same events twice. Every
                // append fails; each turn's end is written after what is durable of it.
                tracing::warn!(error = %error, appends = accepted.len(), "event batch failed");
                for (append, reply) in accepted {
                    self.failed(&append, &error);
                    let _ = reply.send(Err(StoreError::Unavailable(error.to_string())));
                }
            }
            Err(_) => {
                // One bad append must not fail the others: commit them one by one.
                for (append, _) in &accepted {
                    self.next_seq.remove(&append.session);
                }
                for one in accepted {
                    Box::pin(self.commit(vec![one])).await;
                }
            }
        }
    }

    /// Writes a session's own event (the store assigns its seq, after the session's last)
    /// and publishes it once durable.
    async fn commit_session(&mut self, append: SessionAppend) -> Result<Arc<Event>, StoreError> {
        if !self.lease.is_held() {
            return Err(StoreError::Unavailable(LEASE_UNPROVEN.into()));
        }
        let written = self
            .store
            .append_session_event(
                &append.tenant,
                &append.session,
                append.change,
                &append.event,
                &self.process,
            )
            .await;
        self.next_seq.remove(&append.session);
        let event = Arc::new(written?);
        if self.keep_seq {
            self.next_seq.insert(append.session, event.seq + 1);
        }
        self.fanout
            .publish(&append.session, std::slice::from_ref(&event));
        Ok(event)
    }

    /// Assigns sequence numbers and commits; on failure nothing is kept.
    async fn try_commit(
        &mut self,
        batch: &[(Append, Reply)],
    ) -> Result<(Vec<Vec<Arc<Event>>>, std::time::Duration), StoreError> {
        let mut prepared: Vec<Prepared> = Vec::with_capacity(batch.len());
        let mut assigned: HashMap<SessionId, i64> = HashMap::new();
        for (append, _) in batch {
            let next = match assigned.get(&append.session) {
                Some(next) => *next,
                // A turn's first append takes the seq its admission read, which nothing
                // remembered here can be more recent than.
                None => match self.admitted_first_seq(&append.turn) {
                    Some(first) => first,
                    None => match self.next_seq.get(&append.session) {
                        Some(next) => *next,
                        None => {
                            let span = tracing::debug_span!("batch", turns = %append.turn);
                            self.store
                                .max_event_seq(&append.tenant, &append.session)
                                .instrument(span)
                                .await?
                                + 1
                        }
                    },
                },
            };
            let mut unstored = HashSet::new();
            let one = self.prepare(append, next, &mut unstored);
            if !unstored.is_empty() {
                // Deltas an earlier append of this batch was to store singly.
                for earlier in prepared.iter_mut().filter(|p| p.group.turn == append.turn) {
                    earlier.group.events.retain(|e| !unstored.contains(&e.seq));
                }
            }
            assigned.insert(append.session, next + one.published.len() as i64);
            prepared.push(one);
        }
        let (mut groups, published): (Vec<AppendGroup>, Vec<Vec<Arc<Event>>>) =
            prepared.into_iter().map(|p| (p.group, p.published)).unzip();
        super::transitions::decide(&mut groups);
        let started = Instant::now();
        // The batch's statements are logged (at debug) in a span naming its turns.
        let span = tracing::debug_span!("batch", turns = %BatchTurns(&groups));
        let appended = self
            .store
            .append_events(&groups, &self.process)
            .instrument(span)
            .await;
        let took = started.elapsed();
        if appended.is_ok() {
            let events = published.iter().map(Vec::len).sum();
            self.metrics.writer_committed(events, took);
        }
        match appended {
            Ok(0) => {}
            Ok(_) => self.webhooks.notify_one(),
            Err(error) => {
                for session in assigned.keys() {
                    self.next_seq.remove(session);
                }
                for (append, _) in batch {
                    self.open_messages.remove(&append.turn);
                }
                return Err(error);
            }
        }
        self.next_seq.extend(assigned);
        for (append, _) in batch {
            if let Some(open) = self.open_messages.get_mut(&append.turn) {
                for delta in open.iter_mut() {
                    delta.stored = Stored::Durable;
                }
            }
        }
        Ok((published, took))
    }

    /// The events of an append with their seqs, and what of them is stored: deltas wait in
    /// `open_messages` until their message stops (stored singly at the end of each append,
    /// so nothing is published before it is durable).
    fn prepare(&mut self, append: &Append, next: i64, unstored: &mut HashSet<i64>) -> Prepared {
        let now = crate::model::now();
        let open = self.open_messages.entry(append.turn).or_default();
        let mut stored = Vec::new();
        let mut coalesced = Vec::new();
        let mut published = Vec::with_capacity(append.events.len());
        for (i, data) in append.events.iter().enumerate() {
            let event = Arc::new(Event {
                session_id: append.session,
                seq: next + i as i64,
                turn_id: Some(append.turn),
                data: data.clone().scrubbed(),
                created_at: now,
            });
            match &event.data {
                EventData::TextDelta { .. } | EventData::ThinkingDelta { .. } => {
                    open.push(OpenDelta {
                        event: event.clone(),
                        stored: Stored::No,
                    });
                }
                EventData::MessageStop {} => {
                    coalesce(std::mem::take(open), &mut stored, &mut coalesced, unstored);
                    stored.push((*event).clone());
                }
                _ => stored.push((*event).clone()),
            }
            published.push(event);
        }
        for delta in open.iter_mut().filter(|d| d.stored == Stored::No) {
            stored.push((*delta.event).clone());
            delta.stored = Stored::InBatch;
        }
        if open.is_empty() || append.events.iter().any(EventData::is_turn_stop) {
            self.open_messages.remove(&append.turn);
        }
        Prepared {
            group: AppendGroup {
                tenant: append.tenant,
                session: append.session,
                turn: append.turn,
                run: append.run,
                events: stored,
                coalesced,
                history: append.history.iter().cloned().map(scrub_nul).collect(),
                transition: None,
            },
            published,
        }
    }

    fn deliver(&mut self, batch: Vec<(Append, Reply)>, committed: Vec<Vec<Arc<Event>>>) {
        for ((append, reply), events) in batch.into_iter().zip(committed) {
            self.fanout.publish(&append.session, &events);
            if append.events.iter().any(EventData::is_turn_stop) {
                self.forget(&append);
            }
            let _ = reply.send(Ok(events));
        }
    }

    /// An append of a turn failed: its later events would leave a hole, so the turn stops
    /// (its provider stream and tool calls are abandoned) and only its `turn_stop` is still
    /// taken.
    fn failed(&mut self, append: &Append, error: &StoreError) {
        self.forget(append);
        // A turn whose stop failed appends nothing more: nothing to refuse later.
        if !append.events.iter().any(EventData::is_turn_stop) {
            self.failed_turns.insert(append.turn);
            self.stop_turn(&append.turn, unstored(error));
        }
    }

    /// A turn another process ended or took: nothing more of it is written.
    fn fence(&mut self, append: &Append) {
        self.forget(append);
        self.open_messages.remove(&append.turn);
        if !append.events.iter().any(EventData::is_turn_stop) {
            self.fenced_turns.insert(append.turn);
            self.stop_turn(
                &append.turn,
                TurnError::new(
                    TurnError::INTERRUPTED,
                    "another server ended the turn: this one lost contact with the database",
                ),
            );
        }
    }

    fn stop_turn(&self, turn: &TurnId, reason: TurnError) {
        let control = self
            .controls
            .lock()
            .expect("controls lock")
            .get(turn)
            .cloned();
        if let Some(control) = control {
            control.stop(reason);
        }
    }

    /// The turn's first seq as its admission read it, once.
    fn admitted_first_seq(&self, turn: &TurnId) -> Option<i64> {
        self.first_seqs
            .lock()
            .expect("first seqs lock")
            .remove(turn)
    }

    /// After a turn ends (or an append fails): reload the session's seq next time, unless
    /// this process is the database's only writer.
    fn forget(&mut self, append: &Append) {
        let stopped = append.events.iter().any(EventData::is_turn_stop);
        if stopped {
            self.admitted_first_seq(&append.turn);
            self.failed_turns.remove(&append.turn);
        }
        if !(self.keep_seq && stopped) || self.next_seq.len() > MAX_CACHED_SESSIONS {
            self.next_seq.remove(&append.session);
        }
    }
}

/// A batch's turns as a log field: their ids, separated by spaces.
struct BatchTurns<'a>(&'a [AppendGroup]);

impl std::fmt::Display for BatchTurns<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, group) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{}", group.turn)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod coalescing_tests;
#[cfg(test)]
mod packing_tests;
#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::{running_turn, tenant, test_store};
    use crate::model::{Content, HistoryType, StopReason, Turn, Usage};

    fn append(turn: &Turn, events: Vec<EventData>, history: Vec<HistoryMessage>) -> Append {
        Append {
            tenant: turn.tenant_id,
            session: turn.session_id,
            turn: turn.id,
            run: None,
            events,
            history,
            after_failure: false,
            span: tracing::Span::none(),
        }
    }

    fn stop() -> EventData {
        EventData::TurnStop {
            stop_reason: StopReason::EndTurn,
            error: None,
            usage: Usage::default(),
        }
    }

    fn reply(text: &str) -> HistoryMessage {
        HistoryMessage::Assistant {
            content: Content::Text(text.into()),
        }
    }

    /// A group of one event at `seq`, with the transition the writer would decide for it
    /// (a `turn_stop` ends the turn).
    fn group(turn: &Turn, seq: i64, data: EventData) -> crate::store::AppendGroup {
        let mut group = crate::store::AppendGroup {
            tenant: turn.tenant_id,
            session: turn.session_id,
            turn: turn.id,
            run: None,
            events: vec![Event {
                session_id: turn.session_id,
                seq,
                turn_id: Some(turn.id),
                data,
                created_at: crate::model::now(),
            }],
            coalesced: Vec::new(),
            history: Vec::new(),
            transition: None,
        };
        super::super::transitions::decide(std::slice::from_mut(&mut group));
        group
    }

    /// A batch of a turn another process ended, whose events take the seqs that process's
    /// stop took, is refused as fenced (what it is), not as the conflict its insert meets.
    #[tokio::test]
    async fn a_batch_of_a_turn_ended_elsewhere_is_fenced_even_where_its_seqs_are_taken() {
        let (store, _dir) = test_store().await;
        let tenant = tenant(&store).await;
        let process = ProcessId::generate();
        let turn = running_turn(&store, tenant, &process).await;
        store
            .append_events(&[group(&turn, 1, stop())], &process)
            .await
            .unwrap();

        let late = group(
            &turn,
            1,
            EventData::TextDelta {
                delta: "late".into(),
            },
        );
        let refused = store.append_events(&[late], &process).await;
        assert!(
            matches!(&refused, Err(StoreError::Fenced(turns)) if turns == &[turn.id]),
            "{refused:?}"
        );
        store.close().await;
    }

    /// One batch ends several sessions' turns (their history messages and stops written
    /// together) while one of its turns was ended elsewhere meanwhile: only that turn's
    /// append is refused; the others are committed, each message at its session's next
    /// position.
    #[tokio::test]
    async fn a_batch_refuses_only_the_append_of_a_turn_ended_elsewhere() {
        let (store, _dir) = test_store().await;
        let tenant = tenant(&store).await;
        let process = ProcessId::generate();
        let writer = super::coalescing_tests::writer(&store, process).await;
        let turns = [
            running_turn(&store, tenant, &process).await,
            running_turn(&store, tenant, &process).await,
            running_turn(&store, tenant, &process).await,
        ];
        for turn in &turns {
            let events = vec![EventData::TurnStart {}];
            let started = writer.append(append(turn, events, vec![reply("first")]));
            started.await.await.unwrap().unwrap();
        }
        // The second turn is ended by another writer of its stop, behind this one's back.
        let gone = &turns[1];
        let next = store
            .max_event_seq(&tenant, &gone.session_id)
            .await
            .unwrap()
            + 1;
        store
            .append_events(&[group(gone, next, stop())], &process)
            .await
            .unwrap();

        // All three are queued before the writer runs: one batch.
        let mut receipts = Vec::new();
        for (i, turn) in turns.iter().enumerate() {
            let history = vec![reply(&format!("second {i}")), reply(&format!("third {i}"))];
            receipts.push(writer.append(append(turn, vec![stop()], history)).await);
        }
        let mut answers = Vec::new();
        for receipt in receipts {
            answers.push(receipt.await.unwrap());
        }
        assert!(
            matches!(&answers[1], Err(StoreError::Fenced(fenced)) if fenced == &[gone.id]),
            "{:?}",
            answers[1]
        );
        for (i, turn) in turns.iter().enumerate() {
            let history = store
                .list_history(&tenant, &turn.session_id, HistoryType::Full)
                .await
                .unwrap();
            let texts: Vec<String> = history
                .iter()
                .map(|message| serde_json::to_value(message).unwrap()["content"].to_string())
                .collect();
            let stored = store
                .get_turn(&tenant, &turn.session_id, &turn.id)
                .await
                .unwrap();
            if i == 1 {
                assert_eq!(
                    texts,
                    ["\"first\""],
                    "nothing of the refused append is stored"
                );
                continue;
            }
            let stop = answers[i].as_ref().expect("the others are committed");
            assert_eq!(stored.status, crate::model::TurnStatus::Completed);
            assert_eq!(stored.last_seq, Some(stop[0].seq));
            assert_eq!(
                texts,
                [
                    "\"first\"".to_owned(),
                    format!("\"second {i}\""),
                    format!("\"third {i}\"")
                ],
                "each message at its session's next position, in order"
            );
        }
        store.close().await;
    }

    /// A batch whose commit the database took but whose answer was lost (the connection
    /// died) fails as a whole: retrying its appends would store them a second time.
    #[tokio::test]
    async fn a_batch_whose_commit_outcome_is_unknown_is_not_stored_twice() {
        let (store, _dir) = test_store().await;
        let tenant = tenant(&store).await;
        let process = ProcessId::generate();
        let writer = super::coalescing_tests::writer(&store, process).await;
        let turns = [
            running_turn(&store, tenant, &process).await,
            running_turn(&store, tenant, &process).await,
        ];

        store
            .faults
            .lose_next_commit_answer
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // Both appends are queued before the writer runs: one batch, one commit.
        let mut receipts = Vec::new();
        for turn in &turns {
            let events = vec![
                EventData::TurnStart {},
                EventData::MessageStart {},
                EventData::TextDelta {
                    delta: "hello".into(),
                },
                EventData::MessageStop {},
            ];
            let history = vec![HistoryMessage::Assistant {
                content: Content::Text("hello".into()),
            }];
            receipts.push(writer.append(append(turn, events, history)).await);
        }
        for receipt in receipts {
            let answer = receipt.await.unwrap();
            assert!(
                matches!(answer, Err(StoreError::Unavailable(_))),
                "an append whose commit was not answered is not acknowledged: {answer:?}"
            );
        }
        assert!(
            !store
                .faults
                .lose_next_commit_answer
                .load(std::sync::atomic::Ordering::SeqCst),
            "the commit met the fault"
        );

        for turn in &turns {
            // The commit was taken once: its events and message are there once.
            let events = store
                .list_events(
                    &tenant,
                    &turn.session_id,
                    Some(&turn.id),
                    0,
                    100,
                    crate::store::Deltas::AsStreamed,
                )
                .await
                .unwrap();
            let starts = events
                .iter()
                .filter(|e| matches!(e.data, EventData::TurnStart {}))
                .count();
            assert_eq!(starts, 1, "turn {} stored twice: {events:?}", turn.id);
            let history = store
                .list_history(&tenant, &turn.session_id, HistoryType::Full)
                .await
                .unwrap();
            assert_eq!(history.len(), 1, "{history:?}");
            // An ordinary end is refused; the end that closes the turn goes after what is
            // durable of it.
            let ordinary = writer.append(append(turn, vec![stop()], Vec::new())).await;
            let refused = ordinary.await.unwrap();
            assert!(
                matches!(refused, Err(StoreError::Corrupt(_))),
                "{refused:?}"
            );
            let mut closing = append(
                turn,
                vec![EventData::TurnStop {
                    stop_reason: StopReason::Error,
                    error: Some(unstored(&StoreError::Unavailable("lost".into()))),
                    usage: Usage::default(),
                }],
                Vec::new(),
            );
            closing.after_failure = true;
            let stop = writer.append(closing).await.await.unwrap().unwrap();
            assert_eq!(stop[0].seq, events.last().unwrap().seq + 1);
        }
        store.close().await;
    }
}
