//! SQLite: several writes as one statement. sqlx runs a SQLite connection on a thread of
//! its own and sends back each statement's outcome, and each row it returns, as a message
//! of its own that wakes the waiting task; a turn's admission or a batch of the event
//! writer sent as `BEGIN`, several statements and `COMMIT` cost a dozen of those. Here
//! they are one `INSERT` of rows into the `writes` view, whose triggers perform each row's
//! operation in the order of the rows (migration V26 lists the operations and their
//! columns): one statement, atomic by itself, and one message back.

use sqlx::{Encode, QueryBuilder, Sqlite, SqlitePool, Type};

/// Value columns after `op`.
const COLUMNS: usize = 13;

/// Rows per statement: at most [`COLUMNS`] binds each, well under SQLite's 32,766.
const ROWS_PER_STATEMENT: usize = 2_000;

const INSERT_WRITES: &str = "INSERT INTO writes \
     (op, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13) VALUES ";

/// Why a trigger refused a row (and with it the statement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// A session or turn is no longer as the row expects it (`agentry: stale`).
    Stale,
    /// A turn is no longer queued or running and owned by the writing process (`agentry:
    /// fenced`).
    Fenced,
}

impl Refused {
    /// The refusal a failed statement carries, if a trigger raised one.
    pub(super) fn of(error: &sqlx::Error) -> Option<Refused> {
        match error {
            sqlx::Error::Database(db) => match db.message() {
                "agentry: stale" => Some(Refused::Stale),
                "agentry: fenced" => Some(Refused::Fenced),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The rows of one or more `INSERT INTO writes` statements, in order.
#[derive(Default)]
pub(super) struct Writes {
    statements: Vec<QueryBuilder<Sqlite>>,
    /// Rows in the last statement.
    rows: usize,
}

/// One row being pushed: its values in column order; the columns left are `NULL`.
pub(super) struct Row<'w> {
    builder: &'w mut QueryBuilder<Sqlite>,
    columns: usize,
}

impl Row<'_> {
    pub(super) fn bind<'t, T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'t, Sqlite> + Type<Sqlite>,
    {
        debug_assert!(
            self.columns < COLUMNS,
            "a row of `writes` has {COLUMNS} values"
        );
        self.builder.push(", ").push_bind(value);
        self.columns += 1;
        self
    }
}

impl Writes {
    /// Pushes a row of the operation `op` with the values `values` binds.
    pub(super) fn row(&mut self, op: &'static str, values: impl FnOnce(&mut Row<'_>)) {
        if self.statements.is_empty() || self.rows == ROWS_PER_STATEMENT {
            self.statements.push(QueryBuilder::new(INSERT_WRITES));
            self.rows = 0;
        }
        let builder = self.statements.last_mut().expect("a statement was pushed");
        if self.rows > 0 {
            builder.push(", ");
        }
        self.rows += 1;
        builder.push("('").push(op).push("'");
        let mut row = Row {
            builder,
            columns: 0,
        };
        values(&mut row);
        for _ in row.columns..COLUMNS {
            row.builder.push(", NULL");
        }
        row.builder.push(")");
    }

    /// Runs the rows: one statement on its own (atomic by itself), several in one
    /// transaction.
    pub(super) async fn execute(mut self, pool: &SqlitePool) -> Result<(), sqlx::Error> {
        if self.statements.len() <= 1 {
            if let Some(mut statement) = self.statements.pop() {
                statement.build().execute(pool).await?;
            }
            return Ok(());
        }
        let mut tx = pool.begin().await?;
        for mut statement in self.statements {
            statement.build().execute(&mut *tx).await?;
        }
        tx.commit().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::{running_turn, sqlite_store, tenant};
    use crate::model::{ProcessId, SessionId, Turn};
    use crate::store::{Db, Stamp, Store};

    fn pool(store: &Store) -> &SqlitePool {
        match &store.db {
            Db::Sqlite(pools) => &pools.write,
            Db::Postgres(_) => unreachable!("a SQLite store"),
        }
    }

    async fn stored_events(store: &Store, session: SessionId) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE session_id = $1")
            .bind(session)
            .fetch_one(pool(store))
            .await
            .unwrap()
    }

    /// `rows` turn_start events of `turn` from seq 1.
    fn events(writes: &mut Writes, turn: &Turn, rows: usize) {
        for seq in 1..=rows as i64 {
            writes.row("event", |row| {
                row.bind(turn.session_id)
                    .bind(seq)
                    .bind(turn.id)
                    .bind("turn_start")
                    .bind("{}")
                    .bind(Stamp(turn.created_at));
            });
        }
    }

    /// A row a trigger refuses undoes every row before it: those of its own statement, and
    /// those of the statements before it when the rows take several (one transaction).
    #[tokio::test]
    async fn a_refused_row_undoes_every_row_before_it() {
        let (store, _dir) = sqlite_store().await;
        let tenant = tenant(&store).await;
        let process = ProcessId::generate();
        let turn = running_turn(&store, tenant, &process).await;
        for rows in [3, ROWS_PER_STATEMENT + 3] {
            let mut writes = Writes::default();
            events(&mut writes, &turn, rows);
            // The turn is not this other process's.
            let other = ProcessId::generate();
            writes.row("fence", |row| {
                row.bind(turn.id).bind(other);
            });
            assert_eq!(writes.statements.len(), rows.div_ceil(ROWS_PER_STATEMENT));
            let refused = writes.execute(pool(&store)).await.unwrap_err();
            assert_eq!(Refused::of(&refused), Some(Refused::Fenced), "{refused}");
            assert_eq!(stored_events(&store, turn.session_id).await, 0);
        }

        let mut writes = Writes::default();
        events(&mut writes, &turn, ROWS_PER_STATEMENT + 3);
        writes.row("fence", |row| {
            row.bind(turn.id).bind(process);
        });
        writes.execute(pool(&store)).await.unwrap();
        assert_eq!(
            stored_events(&store, turn.session_id).await,
            ROWS_PER_STATEMENT as i64 + 3
        );
        store.close().await;
    }

    /// A turn's start or stop once it ended, and an admission's check of a session that
    /// changed since it was remembered, are refused as stale, and write nothing.
    #[tokio::test]
    async fn rows_of_what_changed_meanwhile_are_refused_as_stale() {
        let (store, _dir) = sqlite_store().await;
        let tenant = tenant(&store).await;
        let turn = running_turn(&store, tenant, &ProcessId::generate()).await;
        let stop = |writes: &mut Writes| {
            writes.row("stop", |row| {
                row.bind(turn.id)
                    .bind(tenant)
                    .bind("completed")
                    .bind("end_turn")
                    .bind(None::<String>)
                    .bind("{}")
                    .bind(Stamp(turn.created_at))
                    .bind(1_i64)
                    .bind(None::<Stamp>)
                    .bind(None::<i64>);
            });
        };
        let mut writes = Writes::default();
        stop(&mut writes);
        writes.execute(pool(&store)).await.unwrap();

        let mut again = Writes::default();
        events(&mut again, &turn, 1);
        stop(&mut again);
        let mut start = Writes::default();
        events(&mut start, &turn, 1);
        start.row("start", |row| {
            row.bind(turn.id)
                .bind(tenant)
                .bind(Stamp(turn.created_at))
                .bind(1_i64);
        });
        let mut remembered = Writes::default();
        events(&mut remembered, &turn, 1);
        remembered.row("remembered", |row| {
            row.bind(turn.session_id)
                .bind(tenant)
                .bind(Stamp(turn.created_at - chrono::Duration::seconds(1)))
                .bind(-1_i64)
                .bind(0_i64);
        });
        for writes in [again, start, remembered] {
            let refused = writes.execute(pool(&store)).await.unwrap_err();
            assert_eq!(Refused::of(&refused), Some(Refused::Stale), "{refused}");
            assert_eq!(stored_events(&store, turn.session_id).await, 0);
        }
        store.close().await;
    }
}
