//! SQLite: the write-ahead log copied back into the database file beside the writer.
//!
//! Left to itself, SQLite copies the log back (a checkpoint) on the connection that commits
//! once the log holds 1,000 pages: that commit's caller, and every write queued behind the
//! one writer connection, waits while the pages are copied and both files are synced. Here
//! a connection of its own runs passive checkpoints shortly after writes, on its own thread,
//! while the writer goes on appending (a passive checkpoint takes no lock a writer needs).
//!
//! The log starts over from its beginning only once a checkpoint copied all of it, seen by
//! the writer as it begins a transaction; writes that land while a checkpoint runs keep it
//! from that. So once the log holds [`RESTART_PAGES`], the checkpointer finishes the copy on
//! the writer's own connection, taken from its pool like any write: it copies only what came
//! since its last pass, and the next write starts the log over. The writer still
//! checkpoints by itself past [`WRITER_PAGES`], should all this fall behind.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqlitePool};
use sqlx::{ConnectOptions, Connection, SqliteExecutor};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// Log pages (of 4 KiB) from which the checkpointer finishes its copy on the writer's
/// connection, so that the log starts over: 64 MiB. The writer waits a few milliseconds
/// for it (two syncs), once per this much log instead of SQLite's checkpoint per 4 MiB.
/// (Every connection maps the log's index, 32 KiB per 4,096 pages of log, into memory; at
/// 32 MiB the wait came several times a second under load, and the p99 latency doubled.)
const RESTART_PAGES: i64 = 16_384;

/// Pages a pass may leave behind (written while it ran) before the checkpointer finishes on
/// the writer's connection, so that the writer waits only for a short copy.
const LEFT_PAGES: i64 = 64;

/// Passes at most before the checkpointer finishes on the writer's connection.
const PASSES: usize = 4;

/// Log pages past which the writer checkpoints by itself (SQLite's `wal_autocheckpoint`;
/// 65,536 pages: 256 MiB).
pub(super) const WRITER_PAGES: u32 = 65_536;

/// The checkpointer's side of the writer pool: told of each use of the writer connection.
#[derive(Debug, Default)]
pub(crate) struct Checkpointer {
    /// Notified when the writer connection goes back to its pool (it may have written).
    written: Notify,
    stop: CancellationToken,
    /// Passive checkpoints completed since the store opened (tests await it).
    done: watch::Sender<u64>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Checkpointer {
    /// Opens the checkpoints' own connection and starts checkpointing `delay` after writes
    /// to `writer`'s database.
    pub(super) async fn start(
        self: &Arc<Self>,
        options: &SqliteConnectOptions,
        delay: Duration,
        writer: SqlitePool,
    ) -> Result<(), sqlx::Error> {
        let conn = options.connect().await?;
        let log = super::beside(options.get_filename(), "-wal");
        let task = tokio::spawn(run(conn, writer, log, self.clone(), delay));
        *self.task.lock().expect("not poisoned") = Some(task);
        Ok(())
    }

    /// Called as the writer connection goes back to its pool.
    pub(super) fn wrote(&self) {
        self.written.notify_one();
    }

    /// Stops checkpointing and closes its connection.
    pub(super) async fn close(&self) {
        self.stop.cancel();
        let task = self.task.lock().expect("not poisoned").take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// Checkpoints completed so far, and their changes.
    #[cfg(test)]
    pub(super) fn done(&self) -> watch::Receiver<u64> {
        self.done.subscribe()
    }
}

/// A passive checkpoint on `conn`: the log's pages, and how many of them are now copied.
async fn checkpoint(conn: impl SqliteExecutor<'_>) -> Result<(i64, i64), sqlx::Error> {
    let (_, log, copied): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(conn)
        .await?;
    Ok((log, copied))
}

/// Copies what was written since the last pass; on a long log, finishes on the writer's
/// connection.
async fn pass(
    conn: &mut SqliteConnection,
    writer: &SqlitePool,
    log_file: &Path,
) -> Result<(), sqlx::Error> {
    let (mut log, mut copied) = checkpoint(&mut *conn).await?;
    if log < RESTART_PAGES {
        return Ok(());
    }
    // Each pass copies what the last one left (written while it ran), in less time.
    for _ in 1..PASSES {
        if log - copied <= LEFT_PAGES {
            break;
        }
        (log, copied) = checkpoint(&mut *conn).await?;
    }
    // A checkpoint first syncs the log: what was appended since, synced here, is not
    // synced while the writer waits.
    let file = log_file.to_owned();
    tokio::task::spawn_blocking(move || std::fs::File::open(file)?.sync_data())
        .await
        .map_err(|e| sqlx::Error::Io(std::io::Error::other(e)))??;
    let started = std::time::Instant::now();
    let mut writer = writer.acquire().await?;
    let (log, copied) = checkpoint(&mut *writer).await?;
    drop(writer);
    tracing::trace!(
        log,
        copied,
        elapsed_us = started.elapsed().as_micros() as u64,
        "SQLite log copied on the writer's connection"
    );
    Ok(())
}

async fn run(
    mut conn: SqliteConnection,
    writer: SqlitePool,
    log_file: PathBuf,
    checkpointer: Arc<Checkpointer>,
    delay: Duration,
) {
    let stop = &checkpointer.stop;
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = checkpointer.written.notified() => {}
        }
        // Writes that follow within the delay share the checkpoint.
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(delay) => {}
        }
        let outcome = tokio::select! {
            _ = stop.cancelled() => break,
            outcome = pass(&mut conn, &writer, &log_file) => outcome,
        };
        match outcome {
            Ok(()) => {
                if failing {
                    tracing::info!("SQLite checkpoints succeed again");
                    failing = false;
                }
                checkpointer.done.send_modify(|done| *done += 1);
            }
            Err(error) => {
                // The writer checkpoints by itself past WRITER_PAGES meanwhile; a full disk
                // is reported by the writes it refuses.
                if !failing {
                    tracing::warn!(%error, "a SQLite checkpoint failed; retrying after the next write");
                    failing = true;
                }
            }
        }
    }
    let _ = conn.close().await;
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::engine::testing::sqlite_store_with;
    use crate::store::Store;

    const MIB: u64 = 1 << 20;

    fn size(file: &Path) -> u64 {
        std::fs::metadata(file).map_or(0, |m| m.len())
    }

    /// Commits `count` writes of 1 MiB each through the writer.
    async fn write_mib(store: &Store, count: usize) {
        let write = &store.sqlite_pools().write;
        sqlx::query("CREATE TABLE IF NOT EXISTS filler (b BLOB NOT NULL)")
            .execute(write)
            .await
            .unwrap();
        for _ in 0..count {
            sqlx::query("INSERT INTO filler (b) VALUES (randomblob(1048576))")
                .execute(write)
                .await
                .unwrap();
        }
    }

    /// With the checkpointer waiting, the writer leaves the log alone past SQLite's own
    /// 4 MiB: it copies it back by itself only past `WRITER_PAGES`.
    #[tokio::test]
    async fn the_writer_leaves_the_log_to_the_checkpointer() {
        let (store, dir) =
            sqlite_store_with(&["[database]\nsqlite_checkpoint_delay_ms = 60000\n"]).await;
        let db = dir.path().join("agentry.db");
        let wal = dir.path().join("agentry.db-wal");
        let before = size(&db);

        write_mib(&store, 8).await;
        assert!(size(&wal) >= 8 * MIB, "the log holds the writes");
        assert!(
            size(&db) < before + MIB,
            "the writer copied {} bytes back at 8 MiB of log",
            size(&db) - before
        );
        let limit: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
            .fetch_one(&store.sqlite_pools().write)
            .await
            .unwrap();
        assert_eq!(limit, i64::from(WRITER_PAGES));
        store.close().await;
    }

    /// Shortly after writes, the checkpointer copies them into the database file.
    #[tokio::test]
    async fn writes_are_copied_back_shortly_after_they_commit() {
        let (store, dir) =
            sqlite_store_with(&["[database]\nsqlite_checkpoint_delay_ms = 10\n"]).await;
        let db = dir.path().join("agentry.db");
        let before = size(&db);
        let mut done = store
            .sqlite_pools()
            .checkpointer
            .as_ref()
            .expect("a checkpointer")
            .done();

        write_mib(&store, 6).await;
        let copied = tokio::time::timeout(Duration::from_secs(30), async {
            while size(&db) < before + 6 * MIB {
                done.changed().await.unwrap();
            }
        })
        .await;
        assert!(
            copied.is_ok(),
            "6 MiB written, {} bytes in the database file after the checkpoints",
            size(&db)
        );

        // All of it copied, the next write starts the log over.
        write_mib(&store, 1).await;
        let (log, _) = checkpoint(&store.sqlite_pools().write).await.unwrap();
        assert!(log < 512, "the log holds {log} pages after 1 MiB");
        store.close().await;
    }

    /// With a delay of 0, the writer checkpoints as SQLite does by itself (every 4 MiB).
    #[tokio::test]
    async fn a_delay_of_zero_leaves_checkpoints_to_the_writer() {
        let (store, dir) =
            sqlite_store_with(&["[database]\nsqlite_checkpoint_delay_ms = 0\n"]).await;
        assert!(store.sqlite_pools().checkpointer.is_none());
        let db = dir.path().join("agentry.db");
        let before = size(&db);
        write_mib(&store, 5).await;
        assert!(size(&db) >= before + 4 * MIB, "{} bytes", size(&db));
        store.close().await;
    }
}
