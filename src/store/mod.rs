//! Persistence: one store over SQLite or PostgreSQL, chosen by the database URL.
//!
//! Every statement is plain SQL with `$N` placeholders and runs unchanged on both backends
//! unless a method says otherwise; [`with_db!`] runs a statement against whichever pool is
//! configured. Every method that touches tenant data takes the tenant first and filters on it.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::config::DatabaseSettings;

mod agents;
mod checkpoint;
mod compaction;
mod credentials;
mod events;
mod files;
mod group_commit;
mod history;
mod history_append;
mod keys;
mod keyset;
mod labels;
mod migrate;
mod notes;
mod notify;
mod packed;
mod pg_writes;
mod processes;
mod quotas;
mod run_endpoints;
mod run_list;
mod run_pages;
mod runs;
mod schedules;
mod session_events;
mod sessions;
mod stamp;
mod tenants;
mod tokens;
mod turns;
mod usage;
mod webhook_deliveries;
mod webhook_outbox;
mod webhooks;
mod writes;

pub use agents::AgentChange;
pub use compaction::CompactedView;
pub use credentials::LoginCredential;
pub use events::{AppendGroup, CoalescedDeltas, Deltas, TurnEnd, TurnTransition};
pub use files::StoredFile;
pub use history::HistoryTail;
pub use keyset::Page;
pub use labels::Labelled;
pub use notify::{Committed, Listener, Notice};
pub use processes::{Orphan, SlotClaim};
pub use run_endpoints::{RunEndpointLimits, RunEndpointRecord, RunEndpointWrite};
pub use run_list::{ListedRun, RunCursor, RunFilter, RunMessage};
pub use runs::RunLink;
pub use schedules::{Claim, NewOccurrence, OpenOccurrence, ScheduleMessage};
pub use session_events::SessionChange;
pub(crate) use stamp::Stamp;
pub use tenants::AuthState;
pub use turns::{AdmissionLimits, Admitted, Refusal, Remembered, TokenBudget, UsageTotals};
pub use usage::DayUsage;
pub use webhook_deliveries::{AttemptOutcome, Outbound};
pub use webhooks::{EndpointChange, SealedSecrets};

/// Runs a read with `$pool` bound to the configured pool: the same SQL on both backends.
/// A call that takes longer than `database.timeout_ms` fails as unavailable.
macro_rules! with_db {
    ($store:expr, |$pool:ident| $body:expr) => {
        $crate::store::bounded($store.timeout, async {
            match &$store.db {
                $crate::store::Db::Sqlite(pools) => {
                    let $pool = &pools.read;
                    $body
                }
                $crate::store::Db::Postgres($pool) => $body,
            }
        })
        .await
    };
}
pub(crate) use with_db;

/// Runs a write (or a transaction that writes) with `$pool` bound to the writer pool, within
/// `database.timeout_ms` as [`with_db!`].
/// A write refused for a full disk is noted (see [`Store::storage_refused`]).
macro_rules! with_writer {
    ($store:expr, |$pool:ident| $body:expr) => {{
        let written = $crate::store::bounded($store.timeout, async {
            match &$store.db {
                $crate::store::Db::Sqlite(pools) => {
                    let $pool = &pools.write;
                    $body
                }
                $crate::store::Db::Postgres($pool) => $body,
            }
        })
        .await;
        $store.note_write(&written);
        written
    }};
}
pub(crate) use with_writer;

tokio::task_local! {
    /// The database time a request has left: its calls share one `database.timeout_ms`.
    static BUDGET: std::cell::Cell<Duration>;
}

/// Runs a request's work with `budget` of database time for all its calls together (a
/// request whose calls each wait for a database that is gone is refused within `budget`,
/// not once per call).
pub async fn with_call_budget<F: std::future::Future>(budget: Duration, work: F) -> F::Output {
    BUDGET.scope(std::cell::Cell::new(budget), work).await
}

/// A database call bounded in time: past `limit` (or what is left of the request's budget)
/// it is abandoned and fails as if no connection could be had (the database is
/// unavailable).
pub(crate) async fn bounded<T, E: From<sqlx::Error>>(
    limit: Duration,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let limit = BUDGET
        .try_with(|left| left.get())
        .map_or(limit, |left| left.min(limit));
    let started = std::time::Instant::now();
    let done = tokio::time::timeout(limit, call).await;
    let _ = BUDGET.try_with(|left| left.set(left.get().saturating_sub(started.elapsed())));
    match done {
        Ok(result) => result,
        Err(_) => Err(sqlx::Error::PoolTimedOut.into()),
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Db {
    Sqlite(SqlitePools),
    Postgres(PgPool),
}

/// SQLite takes one writer at a time: writes queue for a single connection (fairly, without
/// SQLite's sleeping busy handler), reads run on read-only connections beside it (WAL).
#[derive(Debug, Clone)]
pub(crate) struct SqlitePools {
    pub read: SqlitePool,
    pub write: SqlitePool,
    /// Commits the admissions and event batches queued together as one statement (see
    /// `group_commit.rs`).
    pub group: std::sync::Arc<group_commit::GroupCommit>,
    /// Copies the log back into the database file beside the writer (see `checkpoint.rs`).
    pub checkpointer: Option<std::sync::Arc<checkpoint::Checkpointer>>,
    /// A file beside the database that [`Store::probe_space`] writes (none in memory).
    pub space_probe: Option<std::path::PathBuf>,
}

/// Bytes [`Store::probe_space`] writes on SQLite: a few pages of log.
const SPACE_PROBE_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct Store {
    db: Db,
    /// How long one database call may take before it fails as unavailable.
    timeout: Duration,
    /// On SQLite, the tenants that may have webhook endpoints (see `webhook_outbox.rs`).
    webhook_tenants: std::sync::Arc<webhook_outbox::WebhookTenants>,
    /// Set when a write was refused for a full disk; cleared by a write that needed new
    /// space (see [`Store::probe_space`]).
    storage_refused: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Faults a unit test makes the store meet.
    #[cfg(test)]
    pub(crate) faults: std::sync::Arc<Faults>,
}

/// Faults a unit test can make the store meet (compiled into unit tests only).
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// The next event append commits, then fails as if the connection had died before the
    /// database's answer arrived: the caller cannot know whether it was stored.
    pub lose_next_commit_answer: std::sync::atomic::AtomicBool,
    /// While set, every event append holding a `usage` event (a model step's end) is
    /// refused and writes nothing, as a statement the database rejects.
    pub refuse_usage_appends: std::sync::atomic::AtomicBool,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    /// The write met another row or state it cannot coexist with; nothing was written.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// A resume or a cancel met a run that no longer awaits answers: nothing was written.
    #[error("the run does not await answers")]
    RunNotAwaiting,
    /// What the caller remembered of a row no longer holds; nothing was written.
    #[error("the remembered state is out of date")]
    Stale,
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("migration failed: {0}")]
    Migration(String),
    /// The turns of a batch that are no longer running under this process (another process
    /// ended or took them, or this process cannot prove its lease): nothing was written.
    #[error("fenced: {} turn(s) are no longer this process's", .0.len())]
    Fenced(Vec<crate::model::TurnId>),
    /// The database's storage is full: nothing was written.
    #[error("the database's storage is full: {0}")]
    Full(String),
    /// The database cannot be reached or cannot write now (lost connection, I/O error,
    /// read-only, a call that took longer than `database.timeout_ms`).
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// A limit counted in the writing transaction refused it; nothing was written.
    #[error("refused: {0:?}")]
    Refused(Refusal),
    #[error(transparent)]
    Database(sqlx::Error),
}

/// Why a write conflicted. No constraint's name: a face says what was taken in its terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// A unique key is taken by another row (a name, an alias, an idempotency key, the
    /// session's one active turn).
    #[error("a unique key is taken")]
    Taken,
    /// The session has a queued or running turn, whose events take its next seqs.
    #[error("the session has an active turn")]
    ActiveTurn,
}

impl StoreError {
    /// Whether the database could not take the call at all (full, or unavailable): what
    /// a client may retry once it can again.
    pub fn is_outage(&self) -> bool {
        matches!(self, StoreError::Full(_) | StoreError::Unavailable(_))
    }
}

/// SQLite's primary result codes for a full disk, I/O errors, a read-only or unopenable
/// database, and a lock held too long.
const SQLITE_FULL: &str = "13";
const SQLITE_UNAVAILABLE: [&str; 5] = ["5", "8", "10", "14", "26"];
/// PostgreSQL's SQLSTATE classes and codes of an outage: disk full, out of memory, too
/// many connections, connection exceptions, shutting down, read-only transactions.
const PG_FULL: &str = "53100";
const PG_UNAVAILABLE: [&str; 7] = [
    "53200", "53300", "57P01", "57P02", "57P03", "25006", "58030",
];

/// Whether an error is the database's storage refusing a write (a full disk).
pub(crate) trait StorageRefusal {
    fn is_storage_refusal(&self) -> bool;
}

impl StorageRefusal for StoreError {
    fn is_storage_refusal(&self) -> bool {
        matches!(self, StoreError::Full(_))
    }
}

impl StorageRefusal for sqlx::Error {
    fn is_storage_refusal(&self) -> bool {
        is_full(self)
    }
}

fn is_full(error: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = error else {
        return false;
    };
    let code = db.code().unwrap_or_default();
    // SQLite's extended codes carry the primary code in their low byte.
    let primary = code
        .parse::<i32>()
        .map(|c| (c & 0xff).to_string())
        .unwrap_or_default();
    code == PG_FULL || primary == SQLITE_FULL
}

fn classify(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_) => return StoreError::Unavailable(error.to_string()),
        sqlx::Error::Protocol(_) => return StoreError::Unavailable(error.to_string()),
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // SQLite's extended codes carry the primary code in their low byte.
            let primary = code
                .parse::<i32>()
                .map(|c| (c & 0xff).to_string())
                .unwrap_or_default();
            if is_full(&error) {
                return StoreError::Full(error.to_string());
            }
            if PG_UNAVAILABLE.contains(&code.as_ref())
                || code.starts_with("08")
                || SQLITE_UNAVAILABLE.contains(&primary.as_str())
            {
                return StoreError::Unavailable(error.to_string());
            }
        }
        _ => {}
    }
    StoreError::Database(error)
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::RowNotFound => StoreError::NotFound,
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict(Conflict::Taken)
            }
            sqlx::Error::Database(db) if db.is_foreign_key_violation() => StoreError::NotFound,
            _ => classify(error),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(error: serde_json::Error) -> Self {
        StoreError::Corrupt(error.to_string())
    }
}

/// Which backend a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Store {
    /// The pools of a store a unit test opened on SQLite.
    #[cfg(test)]
    pub(crate) fn sqlite_pools(&self) -> &SqlitePools {
        match &self.db {
            Db::Sqlite(pools) => pools,
            Db::Postgres(_) => unreachable!("a SQLite store"),
        }
    }

    /// Opens the database named by `settings.url`, creating a SQLite file (and its
    /// directory) if missing. Does not migrate.
    pub async fn connect(settings: &DatabaseSettings) -> Result<Store, StoreError> {
        let url = settings.url.expose();
        let timeout = Duration::from_millis(settings.timeout_ms);
        let db = if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                .busy_timeout(Duration::from_millis(settings.sqlite_busy_timeout_ms))
                .pragma("cache_size", format!("-{}", settings.sqlite_cache_kib))
                .pragma("mmap_size", "0");
            create_parent_dir(options.get_filename())?;
            let file = options.get_filename();
            let space_probe = (!is_memory(file)).then(|| beside(file, "-space-probe"));
            let checkpointer = (settings.sqlite_checkpoint_delay_ms > 0)
                .then(std::sync::Arc::<checkpoint::Checkpointer>::default);
            let mut write_options = options.clone().pragma(
                "cache_size",
                format!("-{}", settings.sqlite_writer_cache_kib),
            );
            if checkpointer.is_some() {
                write_options = write_options
                    .pragma("wal_autocheckpoint", checkpoint::WRITER_PAGES.to_string());
            }
            let told = checkpointer.clone();
            // Writes queue for the one writer: they may wait as long as a lock (the busy
            // timeout) before the call is bounded.
            let write = SqlitePoolOptions::new()
                .test_before_acquire(false)
                .before_acquire(|conn, meta| Box::pin(ping_if_idle(conn, meta)))
                .max_connections(1)
                .acquire_timeout(
                    timeout.max(Duration::from_millis(settings.sqlite_busy_timeout_ms)),
                )
                .after_release(move |conn, _| {
                    if let Some(checkpointer) = &told {
                        checkpointer.wrote();
                    }
                    Box::pin(async move { Ok(keep_after_release(conn)) })
                })
                .connect_with(write_options)
                .await?;
            if let Some(checkpointer) = &checkpointer {
                let delay = Duration::from_millis(settings.sqlite_checkpoint_delay_ms);
                checkpointer.start(&options, delay, write.clone()).await?;
            }
            let read = SqlitePoolOptions::new()
                .test_before_acquire(false)
                .before_acquire(|conn, meta| Box::pin(ping_if_idle(conn, meta)))
                .max_connections(settings.sqlite_readers)
                .acquire_timeout(timeout)
                .connect_with(options.read_only(true))
                .await?;
            Db::Sqlite(SqlitePools {
                read,
                group: std::sync::Arc::new(group_commit::GroupCommit::start(write.clone())),
                write,
                checkpointer,
                space_probe,
            })
        } else {
            let options = PgConnectOptions::from_str(url)?;
            let pool = PgPoolOptions::new()
                .test_before_acquire(false)
                .before_acquire(|conn, meta| Box::pin(ping_if_idle(conn, meta)))
                .max_connections(settings.max_connections)
                .acquire_timeout(timeout)
                .after_release(|conn, _| Box::pin(async move { Ok(keep_after_release(conn)) }))
                .connect_with(options)
                .await?;
            Db::Postgres(pool)
        };
        Ok(Store {
            db,
            timeout,
            webhook_tenants: Default::default(),
            storage_refused: Default::default(),
            #[cfg(test)]
            faults: Default::default(),
        })
    }

    /// How long one database call (and a request's calls together) may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn backend(&self) -> Backend {
        match self.db {
            Db::Sqlite(_) => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// Notes a write's outcome: one refused for a full disk sets [`Store::storage_refused`].
    pub(crate) fn note_write<T, E: StorageRefusal>(&self, written: &Result<T, E>) {
        if written
            .as_ref()
            .is_err_and(StorageRefusal::is_storage_refusal)
        {
            self.storage_refused
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Whether a write was refused for a full disk since the last successful
    /// [`Store::probe_space`]: a write that changes a row in place may still succeed.
    pub fn storage_refused(&self) -> bool {
        self.storage_refused
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A write that needs new space, undone: on PostgreSQL a temporary table (in the
    /// database's default tablespace) gets its first page and is rolled back, which fails
    /// with `disk_full` while that disk is full even when rows can still be updated in
    /// place. On SQLite a small file is written beside the database and removed: a write
    /// to the log may succeed in the space of frames already copied back. Success clears
    /// [`Store::storage_refused`].
    pub async fn probe_space(&self) -> Result<(), StoreError> {
        if let Db::Sqlite(pools) = &self.db
            && let Some(probe) = pools.space_probe.clone()
        {
            // A write to the log may reuse the space of its earlier frames once the log
            // started over: a file of its own, beside the database, needs new space.
            let probed = tokio::task::spawn_blocking(move || {
                let written = std::fs::write(&probe, vec![0u8; SPACE_PROBE_BYTES]);
                let _ = std::fs::remove_file(&probe);
                written
            });
            let written: std::io::Result<()> = bounded(self.timeout, async {
                probed
                    .await
                    .map_err(|e| StoreError::Unavailable(e.to_string()))
            })
            .await?;
            match written {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::StorageFull => {
                    return Err(StoreError::Full(error.to_string()));
                }
                Err(error) => return Err(StoreError::Unavailable(error.to_string())),
            }
        }
        if let Db::Postgres(pool) = &self.db {
            bounded(self.timeout, async {
                let mut tx = pool.begin().await?;
                sqlx::query(
                    "CREATE TEMPORARY TABLE agentry_space_probe (filler text) ON COMMIT DROP",
                )
                .execute(&mut *tx)
                .await?;
                sqlx::query("INSERT INTO agentry_space_probe VALUES (repeat('x', 1000))")
                    .execute(&mut *tx)
                    .await?;
                tx.rollback().await
            })
            .await
            .map_err(StoreError::from)?;
        }
        self.storage_refused
            .store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Whether the database answers a trivial query.
    pub async fn ping(&self) -> Result<(), StoreError> {
        with_db!(self, |pool| sqlx::query("SELECT 1")
            .execute(pool)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    /// Each connection pool's connections now: its name, how many are in use and how
    /// many idle. SQLite has a `write` pool (one connection) and a `read` pool; PostgreSQL
    /// one pool, `main`.
    pub fn pool_connections(&self) -> Vec<(&'static str, u32, u32)> {
        fn count<DB: sqlx::Database>(
            name: &'static str,
            pool: &sqlx::Pool<DB>,
        ) -> (&'static str, u32, u32) {
            let idle = u32::try_from(pool.num_idle()).unwrap_or(u32::MAX);
            (name, pool.size().saturating_sub(idle), idle)
        }
        match &self.db {
            Db::Sqlite(pools) => vec![count("write", &pools.write), count("read", &pools.read)],
            Db::Postgres(pool) => vec![count("main", pool)],
        }
    }

    /// On SQLite, the writes (admissions and event batches) sent to the database so far and
    /// the statements they took: the writes queued while the writer was busy share one.
    pub fn committed_writes(&self) -> Option<(u64, u64)> {
        match &self.db {
            Db::Sqlite(pools) => Some(pools.group.committed()),
            Db::Postgres(_) => None,
        }
    }

    pub async fn close(&self) {
        match &self.db {
            Db::Sqlite(pools) => {
                pools.group.close().await;
                if let Some(checkpointer) = &pools.checkpointer {
                    checkpointer.close().await;
                }
                pools.read.close().await;
                pools.write.close().await;
            }
            Db::Postgres(pool) => pool.close().await,
        }
    }
}

/// Whether a connection goes back to its pool: not one a failed commit or rollback left
/// inside a transaction (what it would run next would never be committed).
/// How long a pooled connection may stay idle and still be handed out untested.
const TRUST_IDLE: Duration = Duration::from_secs(1);

/// Tests a connection before it is handed out only if it sat idle for a while (a server
/// restarted since, a network dropped it): a connection in steady use is not pinged, which
/// would cost a round trip (a hop to SQLite's worker thread, a message to PostgreSQL) per
/// acquisition, as many as the statements of a turn's admission.
async fn ping_if_idle<C: sqlx::Connection>(
    conn: &mut C,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> Result<bool, sqlx::Error> {
    if meta.idle_for >= TRUST_IDLE {
        conn.ping().await?;
    }
    Ok(true)
}

fn keep_after_release<C: sqlx::Connection>(conn: &mut C) -> bool {
    let keep = !conn.is_in_transaction();
    if !keep {
        tracing::warn!("closed a database connection left inside a failed transaction");
    }
    keep
}

/// Whether a SQLite file name names an in-memory database.
fn is_memory(file: &Path) -> bool {
    file.as_os_str().is_empty() || file == Path::new(":memory:")
}

/// The file named as `file` with `suffix` (SQLite's `-wal`, say).
fn beside(file: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

pub(crate) fn create_parent_dir(file: &Path) -> Result<(), StoreError> {
    match file.parent() {
        Some(dir) if !is_memory(file) && !dir.as_os_str().is_empty() => {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Database(sqlx::Error::Configuration(
                    format!("cannot create database directory {}: {e}", dir.display()).into(),
                ))
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::sqlite_store_with;

    /// SQLite's readers are bounded by `database.sqlite_readers`, not by the PostgreSQL
    /// pool's `max_connections`: each open reader keeps a page cache of its own.
    #[tokio::test]
    async fn sqlite_readers_are_bounded_by_their_own_setting() {
        let (store, _dir) = sqlite_store_with(&[
            "[database]\nmax_connections = 1\nsqlite_readers = 3\ntimeout_ms = 200\n",
        ])
        .await;
        let pools = store.sqlite_pools();
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(
                pools
                    .read
                    .acquire()
                    .await
                    .expect("a reader within the bound"),
            );
        }
        assert!(
            pools.read.try_acquire().is_none(),
            "a fourth reader was opened past sqlite_readers = 3"
        );
        drop(held);
        store.close().await;
    }

    /// The writer's page cache is `database.sqlite_writer_cache_kib`, each reader's
    /// `database.sqlite_cache_kib`.
    #[tokio::test]
    async fn the_writer_has_a_page_cache_of_its_own_size() {
        let (store, _dir) = sqlite_store_with(&[
            "[database]\nsqlite_cache_kib = 1024\nsqlite_writer_cache_kib = 12288\n",
        ])
        .await;
        let pools = store.sqlite_pools();
        assert_eq!(
            cache_size(&pools.write).await,
            -12288,
            "the writer's cache in KiB"
        );
        assert_eq!(
            cache_size(&pools.read).await,
            -1024,
            "a reader's cache in KiB"
        );
        store.close().await;
    }

    /// A connection's `PRAGMA cache_size` (negative: in KiB).
    async fn cache_size(pool: &SqlitePool) -> i64 {
        sqlx::query_scalar("PRAGMA cache_size")
            .fetch_one(pool)
            .await
            .unwrap()
    }
}
