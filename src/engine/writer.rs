//! The event log's single writer: group-commits appends from every running turn, assigns
//! per-session sequence numbers, and publishes events only once they are durable.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::fanout::Fanout;
use crate::model::{
    Event, EventData, HistoryMessage, RunId, SessionId, TenantId, TurnId, scrub_nul,
};
use crate::store::{AppendGroup, Backend, Store, StoreError};

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
}

type Reply = oneshot::Sender<Result<Vec<Arc<Event>>, StoreError>>;

enum Request {
    Append(Append, Reply),
    Flush(oneshot::Sender<()>),
}

/// The committed events of an append, once durable.
pub type Receipt = oneshot::Receiver<Result<Vec<Arc<Event>>, StoreError>>;

#[derive(Debug, Clone)]
pub struct EventWriter {
    requests: mpsc::Sender<Request>,
}

impl EventWriter {
    /// Starts the writer task.
    pub fn start(store: Store, fanout: Arc<Fanout>, max_batch_events: usize) -> EventWriter {
        let (requests, inbox) = mpsc::channel(QUEUE);
        let task = WriterTask {
            keep_seq: store.backend() == Backend::Sqlite,
            store,
            fanout,
            max_batch_events,
            next_seq: HashMap::new(),
            failed_turns: HashSet::new(),
        };
        tokio::spawn(task.run(inbox));
        EventWriter { requests }
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

    /// Waits until everything queued before this call is committed.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.requests.send(Request::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

struct WriterTask {
    store: Store,
    fanout: Arc<Fanout>,
    max_batch_events: usize,
    /// The next seq of sessions; reloaded from the log when absent.
    next_seq: HashMap<SessionId, i64>,
    /// Whether a session's next seq outlives its turn: on SQLite this process is the only
    /// writer; on PostgreSQL another process may run the session's next turn.
    keep_seq: bool,
    /// Turns an append failed for: their later events would leave a hole, so only their
    /// `turn_stop` is still accepted.
    failed_turns: HashSet<TurnId>,
}

impl WriterTask {
    async fn run(mut self, mut inbox: mpsc::Receiver<Request>) {
        while let Some(first) = inbox.recv().await {
            let mut batch = Vec::new();
            let mut flushes = Vec::new();
            let mut events = 0;
            let mut next = Some(first);
            while let Some(request) = next.take() {
                match request {
                    Request::Append(append, reply) => {
                        events += append.events.len();
                        batch.push((append, reply));
                    }
                    Request::Flush(done) => flushes.push(done),
                }
                if events < self.max_batch_events {
                    next = inbox.try_recv().ok();
                }
            }
            self.commit(batch).await;
            for done in flushes {
                let _ = done.send(());
            }
        }
    }

    async fn commit(&mut self, batch: Vec<(Append, Reply)>) {
        let mut accepted = Vec::with_capacity(batch.len());
        for (append, reply) in batch {
            let stops = append.events.iter().any(EventData::is_turn_stop);
            if self.failed_turns.contains(&append.turn) && !stops {
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
            Ok(committed) => self.deliver(accepted, committed),
            Err(error) if accepted.len() == 1 => {
                let (append, reply) = accepted.pop().expect("one append");
                self.forget(&append);
                tracing::error!(error = %error, turn_id = %append.turn, "event append failed");
                self.failed_turns.insert(append.turn);
                let _ = reply.send(Err(error));
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

    /// Assigns sequence numbers and commits; on failure nothing is kept.
    async fn try_commit(
        &mut self,
        batch: &[(Append, Reply)],
    ) -> Result<Vec<AppendGroup>, StoreError> {
        let mut groups = Vec::with_capacity(batch.len());
        let mut assigned: HashMap<SessionId, i64> = HashMap::new();
        for (append, _) in batch {
            let next = match assigned.get(&append.session) {
                Some(next) => *next,
                None => match self.next_seq.get(&append.session) {
                    Some(next) => *next,
                    None => {
                        self.store
                            .max_event_seq(&append.tenant, &append.session)
                            .await?
                            + 1
                    }
                },
            };
            let now = crate::model::now();
            let events: Vec<Event> = append
                .events
                .iter()
                .enumerate()
                .map(|(i, data)| Event {
                    session_id: append.session.clone(),
                    seq: next + i as i64,
                    turn_id: append.turn.clone(),
                    data: data.clone().scrubbed(),
                    created_at: now,
                })
                .collect();
            assigned.insert(append.session.clone(), next + events.len() as i64);
            groups.push(AppendGroup {
                tenant: append.tenant.clone(),
                run: append.run.clone(),
                events,
                history: append.history.iter().cloned().map(scrub_nul).collect(),
            });
        }
        if let Err(error) = self.store.append_events(&groups).await {
            for session in assigned.keys() {
                self.next_seq.remove(session);
            }
            return Err(error);
        }
        self.next_seq.extend(assigned);
        Ok(groups)
    }

    fn deliver(&mut self, batch: Vec<(Append, Reply)>, committed: Vec<AppendGroup>) {
        for ((append, reply), group) in batch.into_iter().zip(committed) {
            let events: Vec<Arc<Event>> = group.events.into_iter().map(Arc::new).collect();
            self.fanout.publish(&append.session, &events);
            if append.events.iter().any(EventData::is_turn_stop) {
                self.forget(&append);
            }
            let _ = reply.send(Ok(events));
        }
    }

    /// After a turn ends (or an append fails): reload the session's seq next time, unless
    /// this process is the database's only writer.
    fn forget(&mut self, append: &Append) {
        let stopped = append.events.iter().any(EventData::is_turn_stop);
        if stopped {
            self.failed_turns.remove(&append.turn);
        }
        if !(self.keep_seq && stopped) || self.next_seq.len() > MAX_CACHED_SESSIONS {
            self.next_seq.remove(&append.session);
        }
    }
}
