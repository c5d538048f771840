//! The processes serving the database and their leases: which process runs a turn, and
//! which turns a process whose lease expired left unfinished. Lease times are read from the
//! database's clock, so processes on several hosts need not agree on theirs.

use std::time::Duration;

use super::turns::{TURN_COLUMNS, TurnRow};
use super::{Db, Store, StoreError, with_db, with_writer};
use crate::model::{ProcessId, TenantId, Turn, TurnId};

/// The database's clock now, and `$N` milliseconds after it, per backend.
const PG_NOW: &str = "clock_timestamp()";
const SQLITE_NOW: &str = "CAST(unixepoch('subsec') * 1000000 AS INTEGER)";

fn now_sql(db: &Db) -> &'static str {
    match db {
        Db::Sqlite(_) => SQLITE_NOW,
        Db::Postgres(_) => PG_NOW,
    }
}

fn later_sql(db: &Db, param: u8) -> String {
    match db {
        Db::Sqlite(_) => format!("({SQLITE_NOW} + ${param} * 1000)"),
        Db::Postgres(_) => format!("({PG_NOW} + ${param} * interval '1 millisecond')"),
    }
}

/// Starts the queued turn $2 of tenant $1 in one of the tenant's $3 slots over every
/// process, if one is free (PostgreSQL, migration V29); with $4, only a turn no process
/// owns, which becomes $4's. Claims of a tenant's slots do not wait for each other.
pub(super) const CLAIM_SLOT: &str = "SELECT agentry_claim_slot($1, $2, $3, $4)";

#[derive(sqlx::FromRow)]
struct ClaimedRow {
    #[sqlx(flatten)]
    turn: TurnRow,
    permissions: Option<sqlx::types::Json<serde_json::Value>>,
}

/// What asking for a tenant's slot found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotClaim {
    /// The turn runs now.
    Started,
    /// The tenant runs as many turns as its limit allows: ask again later.
    Full,
    /// The turn is no longer waiting (ended, or deleted with its session).
    Gone,
}

/// A turn whose owner no longer holds a lease, with the owner it was found with.
#[derive(Debug)]
pub struct Orphan {
    pub turn: Turn,
    pub owner: Option<ProcessId>,
}

#[derive(sqlx::FromRow)]
struct OrphanRow {
    #[sqlx(flatten)]
    turn: TurnRow,
    owner: Option<ProcessId>,
}

fn millis(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Registers a process holding a lease of `lease` from now.
    pub async fn insert_process(
        &self,
        id: &ProcessId,
        host: &str,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO processes (id, host, started_at, expires_at) VALUES ($1, $2, {}, {})",
            now_sql(&self.db),
            later_sql(&self.db, 3)
        );
        with_writer!(self, |pool| sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(host)
            .bind(millis(lease))
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Extends the process's lease to `lease` from now; `false` when the process is no
    /// longer registered (another process found its lease expired).
    pub async fn renew_process(&self, id: &ProcessId, lease: Duration) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE processes SET expires_at = {} WHERE id = $1",
            later_sql(&self.db, 2)
        );
        let done = with_writer!(self, |pool| sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(millis(lease))
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(done == 1)
    }

    pub async fn delete_process(&self, id: &ProcessId) -> Result<(), StoreError> {
        with_writer!(self, |pool| sqlx::query(
            "DELETE FROM processes WHERE id = $1"
        )
        .bind(id)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Forgets the processes other than `me` whose lease expired (with `only`: every
    /// process but `me`, for a database only one process may serve). Their turns become
    /// orphans. `me` is never forgotten here: its heartbeat finds out if it was.
    pub async fn expire_processes(&self, me: &ProcessId, only: bool) -> Result<u64, StoreError> {
        let sql = if only {
            "DELETE FROM processes WHERE id <> $1".to_owned()
        } else {
            format!(
                "DELETE FROM processes WHERE expires_at < {} AND id <> $1",
                now_sql(&self.db)
            )
        };
        let done = with_writer!(self, |pool| sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(me)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(done)
    }

    /// Queued or running turns whose owner holds no lease. A queued turn no process has
    /// taken yet is one only with `unclaimed` (where no process would take it: SQLite).
    pub async fn list_orphan_turns(&self, unclaimed: bool) -> Result<Vec<Orphan>, StoreError> {
        let sql = format!(
            "SELECT {TURN_COLUMNS}, owner FROM turns \
             WHERE status IN ('queued', 'running') \
             AND (owner IS NULL OR NOT EXISTS (SELECT 1 FROM processes p WHERE p.id = turns.owner)) \
             AND ($1 OR NOT (owner IS NULL AND status = 'queued')) \
             ORDER BY id"
        );
        let rows: Vec<OrphanRow> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(unclaimed)
                .fetch_all(pool)
                .await
        })?;
        rows.into_iter()
            .map(|row| {
                Ok(Orphan {
                    turn: Turn::try_from(row.turn)?,
                    owner: row.owner,
                })
            })
            .collect()
    }

    /// The unfinished turns `owner` owns.
    pub async fn list_owned_turns(&self, owner: &ProcessId) -> Result<Vec<Turn>, StoreError> {
        let sql = format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE owner = $1 AND status IN ('queued', 'running')"
        );
        let rows: Vec<TurnRow> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(owner)
                .fetch_all(pool)
                .await
        })?;
        rows.into_iter().map(Turn::try_from).collect()
    }

    /// Hands an unfinished turn from `from` to `to` (an orphan taken over, or given back), if
    /// it is still unfinished and still `from`'s: of several processes trying at once,
    /// exactly one gets `true`.
    pub async fn claim_turn(
        &self,
        turn: &TurnId,
        from: Option<&ProcessId>,
        to: Option<&ProcessId>,
    ) -> Result<bool, StoreError> {
        let done = with_writer!(self, |pool| sqlx::query(
            "UPDATE turns SET owner = $3 WHERE id = $1 AND status IN ('queued', 'running') \
             AND owner IS NOT DISTINCT FROM $2"
        )
        .bind(turn)
        .bind(from)
        .bind(to)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(done == 1)
    }

    /// Starts a queued turn if its tenant runs fewer than `limit` turns over every process
    /// (PostgreSQL; on SQLite the one process's own limit is the whole truth and this
    /// always starts it), in a free slot of its tenant's ([`CLAIM_SLOT`]), so two processes
    /// never both take the last one. `Full`: the tenant is at its limit.
    pub async fn start_turn_within(
        &self,
        tenant: &TenantId,
        turn: &TurnId,
        limit: usize,
    ) -> Result<SlotClaim, StoreError> {
        let Db::Postgres(pool) = &self.db else {
            return Ok(SlotClaim::Started);
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut tx = pool.begin().await?;
        let started: bool = sqlx::query_scalar(CLAIM_SLOT)
            .bind(tenant)
            .bind(turn)
            .bind(limit)
            .bind(None::<ProcessId>)
            .fetch_one(&mut *tx)
            .await?;
        let claim = if started {
            SlotClaim::Started
        } else {
            let status: Option<String> =
                sqlx::query_scalar("SELECT status FROM turns WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant)
                    .bind(turn)
                    .fetch_optional(&mut *tx)
                    .await?;
            match status.as_deref() {
                Some("queued") => SlotClaim::Full,
                _ => SlotClaim::Gone,
            }
        };
        tx.commit().await?;
        Ok(claim)
    }

    /// Takes the oldest queued turn no process has taken whose tenant runs fewer than
    /// `limit` turns, and starts it for `me` (PostgreSQL; `None` on SQLite, where every
    /// turn is its process's from the start), each tenant held to its own concurrent-turn
    /// quota, or `limit` without one. Returns it with the permissions it carries.
    pub async fn claim_queued_turn(
        &self,
        me: &ProcessId,
        limit: usize,
    ) -> Result<Option<(Turn, Option<serde_json::Value>)>, StoreError> {
        let Db::Postgres(pool) = &self.db else {
            return Ok(None);
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // The oldest waiting turns of tenants under their limit now; each is then claimed
        // in a transaction of its own, in a free slot of its tenant's, if it still
        // qualifies.
        let candidates: Vec<(TurnId, TenantId)> = sqlx::query_as(
            "SELECT t.id, t.tenant_id FROM turns t WHERE t.status = 'queued' AND t.owner IS NULL \
             AND (SELECT COUNT(*) FROM turns r WHERE r.tenant_id = t.tenant_id \
             AND r.status = 'running') < COALESCE((SELECT q.concurrent_turns FROM tenant_quotas q \
             WHERE q.tenant_id = t.tenant_id), $1) ORDER BY t.created_at LIMIT 8",
        )
        .bind(limit)
        .fetch_all(pool)
        .await?;
        let sql = format!(
            "SELECT {TURN_COLUMNS}, permissions FROM turns WHERE tenant_id = $1 AND id = $2"
        );
        for (turn, tenant) in candidates {
            let mut tx = pool.begin().await?;
            let started: bool = sqlx::query_scalar(
                "SELECT agentry_claim_slot($1, $2, COALESCE((SELECT q.concurrent_turns \
                 FROM tenant_quotas q WHERE q.tenant_id = $1), $3), $4)",
            )
            .bind(tenant)
            .bind(turn)
            .bind(limit)
            .bind(me)
            .fetch_one(&mut *tx)
            .await?;
            let claimed: Option<ClaimedRow> = if started {
                sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(tenant)
                    .bind(turn)
                    .fetch_optional(&mut *tx)
                    .await?
            } else {
                None
            };
            tx.commit().await?;
            if let Some(row) = claimed {
                return Ok(Some((
                    Turn::try_from(row.turn)?,
                    row.permissions.map(|j| j.0),
                )));
            }
        }
        Ok(None)
    }

    /// Takes a queued turn no process has taken, to end it (a cancel, a stopped tenant).
    pub async fn claim_unclaimed_turn(
        &self,
        turn: &TurnId,
        me: &ProcessId,
    ) -> Result<bool, StoreError> {
        let done = with_writer!(self, |pool| sqlx::query(
            "UPDATE turns SET owner = $2 WHERE id = $1 AND status = 'queued' AND owner IS NULL"
        )
        .bind(turn)
        .bind(me)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(done == 1)
    }

    /// How many queued turns no process has taken: the tenant's and in all.
    pub async fn count_unclaimed_turns(&self, tenant: &TenantId) -> Result<(i64, i64), StoreError> {
        let counts: (i64, i64) = with_db!(self, |pool| sqlx::query_as(
            "SELECT COUNT(*) FILTER (WHERE tenant_id = $1), COUNT(*) FROM turns \
             WHERE status = 'queued' AND owner IS NULL"
        )
        .bind(tenant)
        .fetch_one(pool)
        .await)?;
        Ok(counts)
    }

    /// Asks the owner of an unfinished turn of the tenant (or of all its unfinished turns)
    /// to stop it, for `reason`.
    pub async fn request_stop(
        &self,
        tenant: &TenantId,
        turn: Option<&TurnId>,
        reason: &serde_json::Value,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| sqlx::query(
            "UPDATE turns SET stop_requested = $3 WHERE tenant_id = $1 \
             AND ($2 IS NULL OR id = $2) AND status IN ('queued', 'running')"
        )
        .bind(tenant)
        .bind(turn)
        .bind(sqlx::types::Json(reason))
        .execute(pool)
        .await
        .map(|_| ()))?;
        Ok(())
    }

    /// The unfinished turns of `owner` another process asked to stop, with the reasons.
    pub async fn list_stop_requests(
        &self,
        owner: &ProcessId,
    ) -> Result<Vec<(TurnId, serde_json::Value)>, StoreError> {
        let rows: Vec<(TurnId, sqlx::types::Json<serde_json::Value>)> =
            with_db!(self, |pool| sqlx::query_as(
                "SELECT id, stop_requested FROM turns WHERE owner = $1 \
                 AND status IN ('queued', 'running') AND stop_requested IS NOT NULL"
            )
            .bind(owner)
            .fetch_all(pool)
            .await)?;
        Ok(rows
            .into_iter()
            .map(|(id, reason)| (id, reason.0))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::{queued_turn, tenant, test_store};

    /// Claims of one tenant's slots: one whose transaction is still open (its commit not
    /// yet on disk) holds up no other, and no other takes its slot; the limit holds; a
    /// slot frees itself when its turn ends.
    #[tokio::test]
    async fn a_claim_in_flight_holds_up_no_other_of_its_tenant_and_keeps_its_slot() {
        let (store, _dir) = test_store().await;
        let Db::Postgres(pool) = &store.db else {
            // One process: its own limit is the whole truth.
            return;
        };
        let tenant = tenant(&store).await;
        let process = ProcessId::generate();
        let first = queued_turn(&store, tenant, &process).await;
        let second = queued_turn(&store, tenant, &process).await;
        let third = queued_turn(&store, tenant, &process).await;
        let claim = |turn: TurnId| {
            let store = store.clone();
            async move {
                tokio::time::timeout(
                    Duration::from_secs(10),
                    store.start_turn_within(&tenant, &turn, 2),
                )
                .await
                .expect("a claim waited for another's commit")
                .unwrap()
            }
        };

        let mut in_flight = pool.begin().await.unwrap();
        let took: bool = sqlx::query_scalar(CLAIM_SLOT)
            .bind(tenant)
            .bind(first.id)
            .bind(2_i64)
            .bind(None::<ProcessId>)
            .fetch_one(&mut *in_flight)
            .await
            .unwrap();
        assert!(took);
        assert_eq!(claim(second.id).await, SlotClaim::Started);
        assert_eq!(
            claim(third.id).await,
            SlotClaim::Full,
            "both slots are held"
        );
        in_flight.commit().await.unwrap();
        assert_eq!(claim(third.id).await, SlotClaim::Full);
        let slots = |turn: TurnId| {
            sqlx::query_scalar::<_, Option<i32>>("SELECT slot FROM turns WHERE id = $1")
                .bind(turn)
                .fetch_one(pool)
        };
        assert_eq!(slots(first.id).await.unwrap(), Some(0));
        assert_eq!(slots(second.id).await.unwrap(), Some(1));

        sqlx::query("UPDATE turns SET status = 'completed' WHERE id = $1")
            .bind(first.id)
            .execute(pool)
            .await
            .unwrap();
        assert_eq!(claim(third.id).await, SlotClaim::Started);
        assert_eq!(
            slots(third.id).await.unwrap(),
            Some(0),
            "the ended turn's slot"
        );
        store.close().await;
    }
}
