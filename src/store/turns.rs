//! Turns: recorded with the messages they bring, in one transaction.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::Stamp;
use super::keyset::Keyset;
use super::runs::admit_run;
use super::usage::{StoredUsage, tokens_pg, tokens_sqlite};
use super::writes::{Failed, Row as WriteRow, Writes};
use super::{Page, RunLink, Store, StoreError, with_db, with_writer};
use crate::model::{
    HistoryMessage, ProcessId, RunId, Session, SessionId, StopReason, TenantId, Turn, TurnError,
    TurnId, scrub_nul,
};

#[derive(sqlx::FromRow)]
pub(super) struct TurnRow {
    id: TurnId,
    tenant_id: TenantId,
    session_id: SessionId,
    run_id: Option<RunId>,
    status: String,
    stream: String,
    stop_reason: Option<String>,
    error: Option<Json<TurnError>>,
    usage: Json<StoredUsage>,
    idempotency_key: Option<String>,
    request_hash: Option<String>,
    first_seq: Option<i64>,
    last_seq: Option<i64>,
    created_at: Stamp,
    started_at: Option<Stamp>,
    finished_at: Option<Stamp>,
    trace_parent: Option<String>,
}

impl TryFrom<TurnRow> for Turn {
    type Error = StoreError;

    fn try_from(row: TurnRow) -> Result<Self, StoreError> {
        Ok(Turn {
            id: row.id,
            tenant_id: row.tenant_id,
            session_id: row.session_id,
            run_id: row.run_id,
            status: row.status.parse().map_err(StoreError::Corrupt)?,
            stream: row.stream.parse().map_err(StoreError::Corrupt)?,
            stop_reason: row
                .stop_reason
                .map(|s| s.parse::<StopReason>())
                .transpose()
                .map_err(StoreError::Corrupt)?,
            error: row.error.map(|Json(e)| e),
            usage: row.usage.0.0,
            idempotency_key: row.idempotency_key,
            request_hash: row.request_hash,
            first_seq: row.first_seq,
            last_seq: row.last_seq,
            created_at: row.created_at.into(),
            started_at: row.started_at.map(|s| s.0),
            finished_at: row.finished_at.map(|s| s.0),
            trace_parent: row.trace_parent,
        })
    }
}

pub(super) const TURN_COLUMNS: &str = "id, tenant_id, session_id, run_id, status, stream, stop_reason, error, usage, \
     idempotency_key, request_hash, first_seq, last_seq, created_at, started_at, finished_at, trace_parent";

/// A message a turn adds to its session's full history (the compacted history follows the
/// full one past its overlay), as [`insert_history!`] writes it.
pub(super) struct HistoryRow<'a> {
    pub tenant: &'a TenantId,
    pub session: SessionId,
    pub turn: TurnId,
    pub message: &'a HistoryMessage,
    pub created_at: DateTime<Utc>,
}

/// Rows per history insert: six binds each, well under both backends' limits.
pub(super) const HISTORY_CHUNK: usize = 256;

/// The multi-row history insert [`insert_history!`] completes with its `VALUES` rows
/// (`session, tenant, offset, message, created_at, turn`): each message goes to the
/// position after its session's last, plus its `offset` among the same session's messages
/// in the statement (which reads the history as it was before the statement on both
/// backends). A message of another tenant's, or a deleted, session is not written.
pub(super) const INSERT_HISTORY: &str = "INSERT INTO history \
     (session_id, position, message, created_at, turn_id) \
     SELECT s.id, (SELECT COALESCE(MAX(h.position) + 1, 0) FROM history h \
     WHERE h.session_id = s.id) + v.column3, v.column4, v.column5, v.column6 \
     FROM (";
pub(super) const INSERT_HISTORY_END: &str =
    ") AS v JOIN sessions s ON s.id = v.column1 AND s.tenant_id = v.column2";

/// Pushes the statement that appends `$rows` (at most [`HISTORY_CHUNK`] [`HistoryRow`]s, in
/// order) to their sessions' histories onto the query builder `$b`.
macro_rules! push_history {
    ($b:ident, $rows:expr) => {
        let mut offsets: std::collections::HashMap<SessionId, i64> =
            std::collections::HashMap::new();
        $b.push($crate::store::turns::INSERT_HISTORY);
        $b.push_values($rows, |mut b, row| {
            let offset = offsets.entry(row.session).or_insert(0);
            b.push_bind(row.session)
                .push_bind(row.tenant)
                .push_bind(*offset)
                .push_bind(Json(row.message))
                .push_bind($crate::store::Stamp(row.created_at))
                .push_bind(row.turn);
            *offset += 1;
        });
        $b.push($crate::store::turns::INSERT_HISTORY_END);
    };
}
pub(super) use push_history;

/// The values of a `history` row of [`Writes`] (SQLite).
pub(super) fn history_values(row: &mut WriteRow<'_>, message: &HistoryRow<'_>) {
    row.bind(message.session)
        .bind(message.tenant)
        .bind(Json(message.message))
        .bind(Stamp(message.created_at))
        .bind(message.turn);
}

/// Appends `$rows` (a `Vec` of [`HistoryRow`]s, in order) to their sessions' histories, one
/// statement per [`HISTORY_CHUNK`] rows, on either backend's transaction.
macro_rules! insert_history {
    ($tx:ident, $rows:expr) => {
        for chunk in $rows.chunks($crate::store::turns::HISTORY_CHUNK) {
            let mut insert = $crate::store::turns::builder_for(&$tx);
            $crate::store::turns::push_history!(insert, chunk);
            insert.build().execute(&mut *$tx).await?;
        }
    };
}
pub(super) use insert_history;

/// An empty query builder for the backend of `_tx` (where a macro's body is expanded once
/// per backend and cannot name it).
pub(super) fn builder_for<DB: sqlx::Database>(
    _tx: &sqlx::Transaction<'_, DB>,
) -> sqlx::QueryBuilder<DB> {
    sqlx::QueryBuilder::new("")
}

/// What a process remembers of a session, which a turn's admission checks in its own
/// `INSERT`: the row's last change, the history's length and the compaction point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Remembered {
    pub updated_at: DateTime<Utc>,
    pub history_len: i64,
    pub compacted_through: Option<i64>,
}

/// Binds a new turn's values with `$b.$bind(…)`, in the column order of its `INSERT` (and
/// of a `turn` row of [`Writes`]): id, tenant, session, run, status, stream, usage,
/// idempotency key, request hash, created_at, owner, permissions, trace parent.
macro_rules! turn_values {
    ($b:expr, $bind:ident, $tenant:expr, $turn:expr, $owner:expr, $permissions:expr) => {
        $b.$bind($turn.id)
            .$bind($tenant)
            .$bind($turn.session_id)
            .$bind($turn.run_id)
            .$bind($turn.status.as_str())
            .$bind($turn.stream.as_str())
            .$bind(Json(StoredUsage($turn.usage)))
            .$bind(&$turn.idempotency_key)
            .$bind(&$turn.request_hash)
            .$bind(Stamp($turn.created_at))
            .$bind($owner)
            .$bind($permissions.map(Json))
            .$bind(&$turn.trace_parent)
    };
}

/// Pushes the statement that records `$turn` (queued, owned by `$owner`) onto the query
/// builder `$b`; with `$remembered`, only if the session is still as remembered (its row's
/// last change, its compaction point and its history's length), else it writes nothing.
macro_rules! push_insert_turn {
    ($b:ident, $tenant:expr, $turn:expr, $owner:expr, $permissions:expr, $remembered:expr) => {
        $b.push(
            "INSERT INTO turns (id, tenant_id, session_id, run_id, status, stream, usage, \
             idempotency_key, request_hash, created_at, owner, permissions, trace_parent) ",
        );
        $b.push(if $remembered.is_some() {
            "SELECT "
        } else {
            "VALUES ("
        });
        let mut values = $b.separated(", ");
        turn_values!(values, push_bind, $tenant, $turn, $owner, $permissions);
        match $remembered {
            None => {
                $b.push(")");
            }
            Some(remembered) => {
                $b.push(" FROM sessions WHERE id = ")
                    .push_bind($turn.session_id);
                $b.push(" AND tenant_id = ").push_bind($tenant);
                $b.push(" AND updated_at = ")
                    .push_bind(Stamp(remembered.updated_at));
                $b.push(" AND COALESCE(compacted_through, -1) = ")
                    .push_bind(remembered.compacted_through.unwrap_or(-1));
                $b.push(" AND (SELECT COALESCE(MAX(position) + 1, 0) FROM history ");
                $b.push("WHERE session_id = ").push_bind($turn.session_id);
                $b.push(") = ").push_bind(remembered.history_len);
            }
        }
    };
}

/// What a turn's admission did besides recording it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admitted {
    /// The turn was started too (`start_within`).
    pub started: bool,
    /// The session's last event's seq, read once the turn was its active one (PostgreSQL's
    /// plain admission), so the turn's first event follows it.
    pub last_seq: Option<i64>,
}

/// Serializes the admissions of one tenant's turns over every process (PostgreSQL): the
/// queue and the token budget are counted and the turn added under it.
const ADMISSION_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 10))";

/// What a turn's admission checks in the transaction that records it, so that concurrent
/// admissions cannot all pass a limit only some of them fit.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdmissionLimits {
    /// The tenant's turns waiting for any process must be fewer than this.
    pub queued_turns: Option<u64>,
    pub tokens: Option<TokenBudget>,
    /// On PostgreSQL, start the turn at once (`running`) if its tenant runs fewer turns
    /// than this over every process, claimed under the tenant's slot lock as
    /// [`Store::start_turn_within`] claims it, in the admission's own transaction.
    pub start_within: Option<usize>,
}

/// The tenant's daily token quota: the tokens its turns created since `since` reported, and
/// the reservations of those still queued or running (what they reported, if more), must
/// be under `limit`; the new turn reserves `reserve`.
#[derive(Debug, Clone, Copy)]
pub struct TokenBudget {
    pub limit: u64,
    pub reserve: u64,
    pub since: DateTime<Utc>,
}

/// Why a turn's admission was refused in its transaction; nothing was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The tenant's queue holds this many turns.
    QueuedTurns(u64),
    /// The tenant's turns of the day reported `used` tokens, and those still running
    /// reserve `reserved` more.
    Tokens { used: u64, reserved: u64 },
}

/// The tokens the tenant's turns since `$2` reported, and what the reservations of those
/// still queued or running add to it.
const SQLITE_TOKENS_RESERVED: &str = concat!(
    "SELECT COALESCE(SUM(used), 0), \
     COALESCE(SUM(CASE WHEN status IN ('queued', 'running') AND reserved_tokens > used \
     THEN reserved_tokens - used ELSE 0 END), 0) FROM (SELECT status, reserved_tokens, \
     ",
    tokens_sqlite!(),
    " AS used FROM turns WHERE tenant_id = $1 AND created_at >= $2) AS day"
);
const PG_TOKENS_RESERVED: &str = concat!(
    "SELECT COALESCE(SUM(used), 0)::bigint, \
     COALESCE(SUM(CASE WHEN status IN ('queued', 'running') AND reserved_tokens > used \
     THEN reserved_tokens - used ELSE 0 END), 0)::bigint FROM (SELECT status, reserved_tokens, \
     ",
    tokens_pg!(),
    " AS used FROM turns WHERE tenant_id = $1 AND created_at >= $2) AS day"
);

fn turns_query(filter: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!("SELECT {TURN_COLUMNS} FROM turns WHERE {filter}"))
}

impl Store {
    /// Records a queued turn owned by the process `owner` (none: any process may take it),
    /// with the answers to permission requests it carries, the session's new configuration (if the turn changed it), the
    /// messages the turn brings and what it does to runs, atomically.
    /// `Conflict(Taken)` when the session already has an active turn or the key was used; `RunNotAwaiting`
    /// when a resumed or cancelled run no longer awaits answers. `answers_calls`: the turn
    /// answers pending tool calls, which settles runs that awaited them. With `remembered`,
    /// nothing is written unless the session is still as remembered: `Stale` otherwise (a
    /// session that is gone included). [`Admitted`] says whether the turn was started too
    /// (`start_within`) and may give the session's last event's seq.
    #[allow(clippy::too_many_arguments)]
    pub async fn insert_turn(
        &self,
        tenant: &TenantId,
        turn: &Turn,
        owner: Option<&ProcessId>,
        permissions: Option<&serde_json::Value>,
        session_update: Option<&Session>,
        input: &[HistoryMessage],
        run: RunLink<'_>,
        answers_calls: bool,
        remembered: Option<Remembered>,
        limits: AdmissionLimits,
    ) -> Result<Admitted, StoreError> {
        debug_assert_eq!(run.run(), turn.run_id.as_ref());
        let input: Vec<HistoryMessage> = input.iter().cloned().map(scrub_nul).collect();
        let input: Vec<HistoryRow> = input
            .iter()
            .map(|message| HistoryRow {
                tenant,
                session: turn.session_id,
                turn: turn.id,
                message,
                created_at: turn.created_at,
            })
            .collect();
        // A plain admission (no quota to count, no run, no session change) is one statement.
        let plain = limits.queued_turns.is_none()
            && limits.tokens.is_none()
            && matches!(run, RunLink::None)
            && !answers_calls
            && session_update.is_none();
        match &self.db {
            super::Db::Sqlite(pools) if plain && input.len() <= HISTORY_CHUNK => {
                // The check of what this process remembers, the turn and its input as one
                // statement (see `writes.rs`).
                let mut writes = Writes::default();
                if let Some(remembered) = remembered {
                    writes.row("remembered", |row| {
                        row.bind(turn.session_id)
                            .bind(tenant)
                            .bind(Stamp(remembered.updated_at))
                            .bind(remembered.compacted_through.unwrap_or(-1))
                            .bind(remembered.history_len);
                    });
                }
                writes.row("turn", |row| {
                    turn_values!(row, bind, tenant, turn, owner, permissions);
                });
                for message in &input {
                    writes.row("history", |row| history_values(row, message));
                }
                let written = super::bounded(self.timeout, async {
                    pools
                        .group
                        .commit(writes)
                        .await
                        .map_err(Failed::stale_or_error)?;
                    Ok(Admitted::default())
                })
                .await;
                self.note_write(&written);
                return written;
            }
            super::Db::Postgres(pool) if plain => {
                // The check of what this process remembers, the turn, its slot and its
                // input as one call (see `pg_writes.rs`).
                let written = super::bounded(
                    self.timeout,
                    super::pg_writes::admit(
                        pool,
                        tenant,
                        turn,
                        owner,
                        permissions,
                        &input,
                        remembered,
                        limits.start_within,
                    ),
                )
                .await;
                self.note_write(&written);
                return written;
            }
            _ => {}
        }
        let postgres = matches!(self.db, super::Db::Postgres(_));
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            if limits.queued_turns.is_some() || limits.tokens.is_some() {
                if postgres {
                    sqlx::query(ADMISSION_LOCK)
                        .bind(tenant.to_uuid().to_string())
                        .execute(&mut *tx)
                        .await?;
                }
                if let Some(max) = limits.queued_turns {
                    let waiting: i64 = sqlx::query_scalar(
                        "SELECT COUNT(*) FROM turns \
                         WHERE tenant_id = $1 AND status = 'queued' AND owner IS NULL",
                    )
                    .bind(tenant)
                    .fetch_one(&mut *tx)
                    .await?;
                    if waiting.max(0) as u64 >= max {
                        return Err(StoreError::Refused(Refusal::QueuedTurns(waiting as u64)));
                    }
                }
                if let Some(budget) = limits.tokens {
                    let (used, reserved): (i64, i64) = sqlx::query_as(if postgres {
                        PG_TOKENS_RESERVED
                    } else {
                        SQLITE_TOKENS_RESERVED
                    })
                    .bind(tenant)
                    .bind(Stamp(budget.since))
                    .fetch_one(&mut *tx)
                    .await?;
                    let (used, reserved) = (used.max(0) as u64, reserved.max(0) as u64);
                    if used + reserved >= budget.limit {
                        return Err(StoreError::Refused(Refusal::Tokens { used, reserved }));
                    }
                }
            }
            admit_run!(tx, tenant, turn, run, answers_calls, before_turn);
            let mut insert = builder_for(&tx);
            push_insert_turn!(insert, tenant, turn, owner, permissions, remembered);
            if insert.build().execute(&mut *tx).await?.rows_affected() == 0 {
                return Err(StoreError::Stale);
            }
            if let Some(budget) = limits.tokens {
                sqlx::query("UPDATE turns SET reserved_tokens = $2 WHERE id = $1")
                    .bind(turn.id)
                    .bind(i64::try_from(budget.reserve).unwrap_or(i64::MAX))
                    .execute(&mut *tx)
                    .await?;
            }
            let started = match limits.start_within {
                Some(limit) if postgres => {
                    sqlx::query_scalar(super::processes::CLAIM_SLOT)
                        .bind(tenant)
                        .bind(turn.id)
                        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                        .bind(None::<ProcessId>)
                        .fetch_one(&mut *tx)
                        .await?
                }
                _ => false,
            };
            admit_run!(tx, tenant, turn, run, answers_calls, after_turn);
            if let Some(session) = session_update {
                sqlx::query(
                    "UPDATE sessions SET server_tools = $3, options = $4, sealed_options = $5, \
                     client_tools = $6, updated_at = $7 WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant)
                .bind(session.id)
                .bind(Json(&session.server_tools))
                .bind(Json(&session.options))
                .bind(Json(&session.sealed_options))
                .bind(Json(&session.client_tools))
                .bind(Stamp(session.updated_at))
                .execute(&mut *tx)
                .await?;
            }
            insert_history!(tx, input);
            tx.commit().await?;
            Ok(Admitted {
                started,
                last_seq: None,
            })
        })
    }

    pub async fn get_turn(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn: &TurnId,
    ) -> Result<Turn, StoreError> {
        let row: TurnRow = with_db!(self, |pool| {
            sqlx::query_as(turns_query(
                "tenant_id = $1 AND session_id = $2 AND id = $3",
            ))
            .bind(tenant)
            .bind(session)
            .bind(turn)
            .fetch_one(pool)
            .await
        })?;
        row.try_into()
    }

    /// A turn of the tenant by its id alone (protocols whose URLs carry no session).
    pub async fn find_turn(
        &self,
        tenant: &TenantId,
        turn: &TurnId,
    ) -> Result<Option<Turn>, StoreError> {
        let row: Option<TurnRow> = with_db!(self, |pool| {
            sqlx::query_as(turns_query("tenant_id = $1 AND id = $2"))
                .bind(tenant)
                .bind(turn)
                .fetch_optional(pool)
                .await
        })?;
        row.map(Turn::try_from).transpose()
    }

    /// The tenant's latest turn recorded with this idempotency key, in any session.
    pub async fn find_latest_turn_by_key(
        &self,
        tenant: &TenantId,
        key: &str,
    ) -> Result<Option<Turn>, StoreError> {
        let row: Option<TurnRow> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {TURN_COLUMNS} FROM turns WHERE tenant_id = $1 AND idempotency_key = $2 \
                 ORDER BY created_at DESC LIMIT 1"
            )))
            .bind(tenant)
            .bind(key)
            .fetch_optional(pool)
            .await
        })?;
        row.map(Turn::try_from).transpose()
    }

    pub async fn find_turn_by_idempotency_key(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        key: &str,
    ) -> Result<Option<Turn>, StoreError> {
        let row: Option<TurnRow> = with_db!(self, |pool| {
            sqlx::query_as(turns_query(
                "tenant_id = $1 AND session_id = $2 AND idempotency_key = $3",
            ))
            .bind(tenant)
            .bind(session)
            .bind(key)
            .fetch_optional(pool)
            .await
        })?;
        row.map(Turn::try_from).transpose()
    }

    /// The session's queued or running turn, if any.
    pub async fn get_active_turn(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Option<Turn>, StoreError> {
        let row: Option<TurnRow> = with_db!(self, |pool| {
            sqlx::query_as(turns_query(
                "tenant_id = $1 AND session_id = $2 AND status IN ('queued', 'running')",
            ))
            .bind(tenant)
            .bind(session)
            .fetch_optional(pool)
            .await
        })?;
        row.map(Turn::try_from).transpose()
    }

    /// The session's turns, newest first.
    pub async fn list_turns(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        page: Page,
    ) -> Result<(Vec<Turn>, bool), StoreError> {
        let keyset = Keyset {
            columns: TURN_COLUMNS,
            table: "turns",
            scope: &[
                ("tenant_id", tenant.to_uuid()),
                ("session_id", session.to_uuid()),
            ],
            key: "id",
        };
        let (rows, more): (Vec<TurnRow>, bool) = self.keyset_page(keyset, page).await?;
        let turns = rows
            .into_iter()
            .map(Turn::try_from)
            .collect::<Result<_, _>>()?;
        Ok((turns, more))
    }

    /// The tenant's queued and running turns, whichever process runs them.
    pub async fn list_unfinished_turns(&self, tenant: &TenantId) -> Result<Vec<Turn>, StoreError> {
        let rows: Vec<TurnRow> = with_db!(self, |pool| {
            sqlx::query_as(turns_query(
                "status IN ('queued', 'running') AND tenant_id = $1 ORDER BY id",
            ))
            .bind(tenant)
            .fetch_all(pool)
            .await
        })?;
        rows.into_iter().map(Turn::try_from).collect()
    }
}

/// A tenant's consumption over a period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct UsageTotals {
    pub turns: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub tool_calls: u64,
    pub wall_ms: u64,
}

impl Store {
    /// Sums the usage of the tenant's turns created in `[from, to)`.
    pub async fn sum_usage(
        &self,
        tenant: &TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<UsageTotals, StoreError> {
        let rows: Vec<Json<StoredUsage>> = with_db!(self, |pool| {
            sqlx::query_scalar(
                "SELECT usage FROM turns WHERE tenant_id = $1 AND created_at >= $2 \
                 AND created_at < $3",
            )
            .bind(tenant)
            .bind(Stamp(from))
            .bind(Stamp(to))
            .fetch_all(pool)
            .await
        })?;
        Ok(rows
            .into_iter()
            .fold(UsageTotals::default(), |sum, Json(StoredUsage(u))| {
                UsageTotals {
                    turns: sum.turns + 1,
                    input_tokens: sum.input_tokens + u.input_tokens,
                    output_tokens: sum.output_tokens + u.output_tokens,
                    tool_calls: sum.tool_calls + u.tool_calls,
                    wall_ms: sum.wall_ms + u.wall_ms,
                }
            }))
    }
}
