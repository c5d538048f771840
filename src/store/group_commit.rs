//! SQLite: the writes of several callers committed as one statement. Every turn's admission
//! and every batch of the event writer is one `INSERT INTO writes` (see `writes.rs`), and
//! each used to be a commit of its own on the one writer connection: a commit appends every
//! page it changed to the log, and the admissions and batches of a busy moment change the
//! same pages (the right edge of the turns and their indexes, the history's and the events'
//! pages of the sessions they share). Here one task owns the queue of those writes: it takes
//! the writer connection, then every write that queued meanwhile, and sends their rows as one
//! statement, one commit.
//!
//! Each caller still gets its own statement's outcome: when the statement of several is
//! refused by a check (a stale session, a fenced turn, a taken key), it is undone whole and
//! each caller's rows run again on their own; when the database fails it (a full disk, an
//! I/O error), every caller of that statement, and no other, is told so. A caller that stopped
//! waiting before its writes went out (its request timed out) has them dropped; one that stops
//! while they are written does not take the others' outcome with it: the task owns the work.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::SqlitePool;
use sqlx::pool::PoolConnection;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::StoreError;
use super::writes::{Failed, ROWS_PER_STATEMENT, Writes};

type Outcome = Result<(), Failed>;

/// A caller's writes, where their outcome goes, and the caller's span (the statement is
/// logged and traced under it).
struct Job {
    writes: Writes,
    outcome: oneshot::Sender<Outcome>,
    span: tracing::Span,
}

/// The queue of writes to the SQLite writer connection and the task that commits them.
#[derive(Debug)]
pub(crate) struct GroupCommit {
    queue: mpsc::UnboundedSender<Job>,
    stop: CancellationToken,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    counts: Arc<Counts>,
}

/// What the task sent.
#[derive(Debug, Default)]
struct Counts {
    /// Callers' writes sent to the database (stored or refused).
    writes: AtomicU64,
    /// Statements they took (not counting a refused statement's writes run again alone).
    statements: AtomicU64,
}

impl GroupCommit {
    /// Starts committing writes on `writer`'s connection.
    pub(super) fn start(writer: SqlitePool) -> GroupCommit {
        let (queue, jobs) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let counts = Arc::<Counts>::default();
        let task = tokio::spawn(run(writer, jobs, stop.clone(), counts.clone()));
        GroupCommit {
            queue,
            stop,
            task: std::sync::Mutex::new(Some(task)),
            counts,
        }
    }

    /// Commits `writes`, alone or with others queued at the same time: all of them or none
    /// are stored.
    pub(super) async fn commit(&self, writes: Writes) -> Outcome {
        self.submit(writes).await.unwrap_or_else(|_| Err(closed()))
    }

    /// Queues `writes`; the receiver gets their outcome.
    fn submit(&self, writes: Writes) -> oneshot::Receiver<Outcome> {
        let (outcome, answer) = oneshot::channel();
        // Once the task stopped, the job is dropped with its sender: the caller is told
        // the store is closed.
        let _ = self.queue.send(Job {
            writes,
            outcome,
            span: tracing::Span::current(),
        });
        answer
    }

    /// Finishes the statement under way, fails the writes still queued, and stops.
    pub(super) async fn close(&self) {
        self.stop.cancel();
        let task = self.task.lock().expect("not poisoned").take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Callers' writes sent to the database so far, and the statements they took.
    pub(super) fn committed(&self) -> (u64, u64) {
        (
            self.counts.writes.load(Ordering::Relaxed),
            self.counts.statements.load(Ordering::Relaxed),
        )
    }
}

fn closed() -> Failed {
    Failed {
        refused: None,
        error: StoreError::Unavailable("the store is closed".into()),
    }
}

async fn run(
    writer: SqlitePool,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    stop: CancellationToken,
    counts: Arc<Counts>,
) {
    // A job that did not fit in the last statement: it goes first in the next.
    let mut carried = None;
    loop {
        let first = match carried.take() {
            Some(job) => job,
            None => match tokio::select! {
                biased;
                () = stop.cancelled() => None,
                job = jobs.recv() => job,
            } {
                Some(job) => job,
                None => break,
            },
        };
        // The connection first: what queues while it is busy goes out with this job.
        let conn = tokio::select! {
            biased;
            () = stop.cancelled() => {
                let _ = first.outcome.send(Err(closed()));
                break;
            }
            conn = writer.acquire() => conn,
        };
        let conn = match conn {
            Ok(conn) => conn,
            Err(error) => {
                let _ = first.outcome.send(Err(Failed::from(error)));
                continue;
            }
        };
        let mut rows = first.writes.rows();
        let mut batch = vec![first];
        while rows < ROWS_PER_STATEMENT {
            let Ok(job) = jobs.try_recv() else { break };
            if rows + job.writes.rows() > ROWS_PER_STATEMENT {
                carried = Some(job);
                break;
            }
            rows += job.writes.rows();
            batch.push(job);
        }
        // A caller that gave up (its request timed out while the writer was busy) was told
        // nothing was written: its writes are dropped.
        batch.retain(|job| !job.outcome.is_closed());
        if !batch.is_empty() {
            commit(conn, batch, &counts).await;
        }
    }
    // Closing: what is still queued is not written.
    jobs.close();
    while let Ok(job) = jobs.try_recv() {
        let _ = job.outcome.send(Err(closed()));
    }
}

/// Commits the batch's writes on `conn` and tells each job its outcome.
async fn commit(mut conn: PoolConnection<sqlx::Sqlite>, mut batch: Vec<Job>, counts: &Counts) {
    counts
        .writes
        .fetch_add(batch.len() as u64, Ordering::Relaxed);
    counts.statements.fetch_add(1, Ordering::Relaxed);
    if batch.len() == 1 {
        let job = batch.pop().expect("one job");
        let outcome = job
            .writes
            .execute(&mut conn)
            .instrument(job.span)
            .await
            .map_err(Failed::from);
        let _ = job.outcome.send(outcome);
        return;
    }
    // A statement of several callers' writes: logged under the first caller's span, and
    // followed from the others'.
    let span = tracing::info_span!(parent: &batch[0].span, "group_commit", writes = batch.len());
    let mut all = Writes::default();
    let mut jobs = Vec::with_capacity(batch.len());
    for job in batch {
        span.follows_from(&job.span);
        let start = all.rows();
        all.append(job.writes);
        jobs.push((start..all.rows(), job.outcome, job.span));
    }
    let failed = match all.execute(&mut conn).instrument(span).await {
        Ok(()) => {
            for (_, outcome, _) in jobs {
                let _ = outcome.send(Ok(()));
            }
            return;
        }
        Err(error) => Failed::from(error),
    };
    match &failed.error {
        // The database could not write: none of the batch was stored, and each caller is
        // told why.
        StoreError::Full(why) | StoreError::Unavailable(why) => {
            for (_, outcome, _) in jobs {
                let error = match &failed.error {
                    StoreError::Full(_) => StoreError::Full(why.clone()),
                    _ => StoreError::Unavailable(why.clone()),
                };
                let _ = outcome.send(Err(Failed {
                    refused: None,
                    error,
                }));
            }
        }
        // A row was refused: each caller's rows again on their own, for their own outcome.
        _ => {
            for (range, outcome, span) in jobs {
                let alone = all
                    .slice(range)
                    .execute(&mut conn)
                    .instrument(span)
                    .await
                    .map_err(Failed::from);
                let _ = outcome.send(alone);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::{running_turn, sqlite_store, tenant};
    use crate::model::{ProcessId, SessionId, Turn};
    use crate::store::writes::Refused;
    use crate::store::writes::tests::turn_starts as events;
    use crate::store::{Conflict, SqlitePools, Store};

    async fn stored_events(store: &Store, turn: &Turn) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE session_id = $1")
            .bind(turn.session_id)
            .fetch_one(&store.sqlite_pools().read)
            .await
            .unwrap()
    }

    /// The writer connection, held, with writes refused (`on`) or allowed again.
    async fn query_only(pools: &SqlitePools, on: bool) -> PoolConnection<sqlx::Sqlite> {
        let mut held = pools.write.acquire().await.unwrap();
        sqlx::query(if on {
            "PRAGMA query_only = ON"
        } else {
            "PRAGMA query_only = OFF"
        })
        .execute(&mut *held)
        .await
        .unwrap();
        held
    }

    async fn three_turns(store: &Store) -> Vec<Turn> {
        let tenant = tenant(store).await;
        let process = ProcessId::generate();
        let mut turns = Vec::new();
        for _ in 0..3 {
            turns.push(running_turn(store, tenant, &process).await);
        }
        turns
    }

    /// Writes queued while the writer connection is busy go out as one statement; when a
    /// row of it is refused, each caller's rows run again alone: the refused and the
    /// conflicting writes fail on their own, the others are stored.
    #[tokio::test]
    async fn writes_queued_together_share_a_statement_and_keep_their_own_outcomes() {
        let (store, _dir) = sqlite_store().await;
        let turns = three_turns(&store).await;
        let pools = store.sqlite_pools();

        let sent = |(writes, statements): (u64, u64)| {
            let (now_writes, now_statements) = pools.group.committed();
            (now_writes - writes, now_statements - statements)
        };
        let before = pools.group.committed();
        let held = pools.write.acquire().await.unwrap();
        let stored = pools.group.submit(events(&turns[0], 1, 3));
        let also = pools.group.submit(events(&turns[2], 1, 4));
        assert_eq!(sent(before), (0, 0));
        drop(held);
        stored.await.unwrap().unwrap();
        also.await.unwrap().unwrap();
        assert_eq!(sent(before), (2, 1));

        let held = pools.write.acquire().await.unwrap();
        let stored = pools.group.submit(events(&turns[0], 4, 2));
        // The turn is not this other process's.
        let mut fenced = events(&turns[1], 1, 2);
        fenced.row("fence", |row| {
            row.bind(turns[1].id).bind(ProcessId::generate());
        });
        let fenced = pools.group.submit(fenced);
        // Seq 5 of the first session is the first write's.
        let taken = pools.group.submit(events(&turns[0], 5, 1));
        let also = pools.group.submit(events(&turns[2], 5, 1));
        drop(held);
        stored.await.unwrap().unwrap();
        let fenced = fenced.await.unwrap().unwrap_err();
        assert_eq!(fenced.refused, Some(Refused::Fenced), "{:?}", fenced.error);
        let taken = taken.await.unwrap().unwrap_err();
        assert!(
            matches!(taken.error, StoreError::Conflict(Conflict::Taken)),
            "{:?}",
            taken.error
        );
        assert_eq!(taken.refused, None);
        also.await.unwrap().unwrap();
        assert_eq!(sent(before), (6, 2));

        assert_eq!(stored_events(&store, &turns[0]).await, 5);
        assert_eq!(stored_events(&store, &turns[1]).await, 0);
        assert_eq!(stored_events(&store, &turns[2]).await, 5);
        store.close().await;
    }

    /// A statement of several callers' writes the database fails fails every one of them
    /// and no other: nothing of them is stored, and the writes queued after are.
    #[tokio::test]
    async fn a_statement_the_database_fails_fails_exactly_the_writes_in_it() {
        let (store, _dir) = sqlite_store().await;
        let turns = three_turns(&store).await;
        let pools = store.sqlite_pools();

        let (writes, statements) = pools.group.committed();
        let held = query_only(pools, true).await;
        let first = pools.group.submit(events(&turns[0], 1, 2));
        let second = pools.group.submit(events(&turns[1], 1, 3));
        drop(held);
        for failed in [first.await.unwrap(), second.await.unwrap()] {
            let failed = failed.unwrap_err();
            assert!(
                matches!(failed.error, StoreError::Unavailable(_)),
                "{:?}",
                failed.error
            );
            assert_eq!(failed.refused, None);
        }
        assert_eq!(pools.group.committed(), (writes + 2, statements + 1));

        let held = query_only(pools, false).await;
        let after = pools.group.submit(events(&turns[2], 1, 2));
        drop(held);
        after.await.unwrap().unwrap();

        assert_eq!(stored_events(&store, &turns[0]).await, 0);
        assert_eq!(stored_events(&store, &turns[1]).await, 0);
        assert_eq!(stored_events(&store, &turns[2]).await, 2);
        store.close().await;
    }

    /// A caller that gave up before its writes went out (its request timed out while the
    /// writer was busy, and it answered that nothing was stored) has them dropped.
    #[tokio::test]
    async fn the_writes_of_a_caller_that_gave_up_are_dropped() {
        let (store, _dir) = sqlite_store().await;
        let turns = three_turns(&store).await;
        let pools = store.sqlite_pools();

        let held = pools.write.acquire().await.unwrap();
        let given_up = pools.group.submit(events(&turns[0], 1, 2));
        let waiting = pools.group.submit(events(&turns[1], 1, 2));
        drop(given_up);
        drop(held);
        waiting.await.unwrap().unwrap();
        assert_eq!(stored_events(&store, &turns[0]).await, 0);
        assert_eq!(stored_events(&store, &turns[1]).await, 2);
        store.close().await;
    }

    /// Writes still queued when the store closes are failed, not left waiting.
    #[tokio::test]
    async fn closing_fails_the_writes_still_queued() {
        let (store, _dir) = sqlite_store().await;
        let turns = three_turns(&store).await;
        let pools = store.sqlite_pools().clone();

        let held = pools.write.acquire().await.unwrap();
        let queued = pools.group.submit(events(&turns[0], 1, 2));
        let closing = tokio::spawn(async move { store.close().await });
        let failed = queued.await.unwrap().unwrap_err();
        assert!(
            matches!(failed.error, StoreError::Unavailable(_)),
            "{:?}",
            failed.error
        );
        drop(held);
        closing.await.unwrap();
        let refused = pools.group.commit(events(&turns[1], 1, 1)).await;
        assert!(matches!(
            refused.unwrap_err().error,
            StoreError::Unavailable(_)
        ));
    }

    /// Events are stored in the order they were committed, whatever their sessions: a
    /// commit's rows go on the end of the table together (V34), and reads by session and
    /// seq find them through the index.
    #[tokio::test]
    async fn events_of_several_sessions_are_stored_in_the_order_they_were_committed() {
        let (store, _dir) = sqlite_store().await;
        let turns = three_turns(&store).await;
        let pools = store.sqlite_pools();
        for (turn, first) in [(0, 1), (1, 1), (0, 3), (2, 1), (1, 3)] {
            pools
                .group
                .commit(events(&turns[turn], first, 2))
                .await
                .unwrap();
        }
        let stored: Vec<(SessionId, i64)> =
            sqlx::query_as("SELECT session_id, seq FROM events ORDER BY rowid")
                .fetch_all(&pools.read)
                .await
                .unwrap();
        let committed: Vec<(SessionId, i64)> = [(0, 1), (0, 2), (1, 1), (1, 2), (0, 3)]
            .into_iter()
            .chain([(0, 4), (2, 1), (2, 2), (1, 3), (1, 4)])
            .map(|(turn, seq)| (turns[turn].session_id, seq))
            .collect();
        assert_eq!(stored, committed);
        let index: String =
            sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = 'events_session_seq'")
                .fetch_one(&pools.read)
                .await
                .unwrap();
        assert_eq!(
            index,
            "CREATE UNIQUE INDEX events_session_seq ON events (session_id, seq)"
        );
        store.close().await;
    }
}
