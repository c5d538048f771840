//! SQLite: several writes as one statement. sqlx runs a SQLite connection on a thread of
//! its own and sends back each statement's outcome, and each row it returns, as a message
//! of its own that wakes the waiting task; a turn's admission or a batch of the event
//! writer sent as `BEGIN`, several statements and `COMMIT` cost a dozen of those. Here
//! they are one `INSERT` of rows into the `writes` view, whose triggers perform each row's
//! operation in the order of the rows (migration V26 lists the operations and their
//! columns): one statement, atomic by itself, and one message back.

use sqlx::{Encode, QueryBuilder, Sqlite, SqlitePool, Type};

use super::StoreError;

/// Value columns after `op`.
const COLUMNS: usize = 13;

/// Rows per statement: `1 + COLUMNS` binds each, under SQLite's 32,766.
const ROWS_PER_STATEMENT: usize = 2_048;

/// Statements of at most this many rows are kept prepared by the connection.
const KEPT_ROWS: usize = 64;

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

/// A write's error as the store says it: a row refused by a check (either refusal) is
/// [`StoreError::Stale`], anything else what the statement met.
pub(super) fn stale_or(error: sqlx::Error) -> StoreError {
    match Refused::of(&error) {
        Some(_) => StoreError::Stale,
        None => StoreError::from(error),
    }
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
///
/// Every value is a bound parameter, the operation's name included, and a statement's rows
/// are padded up to a power of two with rows of no operation (no trigger takes them): the
/// text of a statement depends only on that number, so the connection keeps a handful
/// prepared (those of up to [`KEPT_ROWS`] rows) instead of one per mix of operations, each
/// with its compiled triggers.
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
            self.pad();
            self.statements.push(QueryBuilder::new(INSERT_WRITES));
            self.rows = 0;
        }
        let builder = self.statements.last_mut().expect("a statement was pushed");
        if self.rows > 0 {
            builder.push(", ");
        }
        self.rows += 1;
        builder.push("(").push_bind(op);
        let mut row = Row {
            builder,
            columns: 0,
        };
        values(&mut row);
        for _ in row.columns..COLUMNS {
            row.bind(None::<i64>);
        }
        row.builder.push(")");
    }

    /// Pads the last statement's rows up to a power of two.
    fn pad(&mut self) {
        let Some(builder) = self.statements.last_mut() else {
            return;
        };
        for _ in self.rows..self.rows.next_power_of_two() {
            builder.push(", (").push_bind(None::<&str>);
            for _ in 0..COLUMNS {
                builder.push(", ").push_bind(None::<i64>);
            }
            builder.push(")");
        }
        self.rows = self.rows.next_power_of_two();
    }

    /// Runs the rows: one statement on its own (atomic by itself), several in one
    /// transaction.
    pub(super) async fn execute(mut self, pool: &SqlitePool) -> Result<(), sqlx::Error> {
        self.pad();
        let kept = self.statements.len() == 1 && self.rows <= KEPT_ROWS;
        if self.statements.len() <= 1 {
            if let Some(mut statement) = self.statements.pop() {
                statement.build().persistent(kept).execute(pool).await?;
            }
            return Ok(());
        }
        let mut tx = pool.begin().await?;
        for mut statement in self.statements {
            statement
                .build()
                .persistent(false)
                .execute(&mut *tx)
                .await?;
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

    /// Statements of any mix of operations whose rows round up to the same power of two have
    /// the same text, so the connection keeps one prepared statement for all of them.
    #[test]
    fn statements_of_as_many_rows_padded_share_their_text() {
        let text = |ops: &[&'static str]| {
            let mut writes = Writes::default();
            for op in ops {
                writes.row(op, |row| {
                    row.bind(1_i64);
                });
            }
            writes.pad();
            assert_eq!(writes.statements.len(), 1);
            assert_eq!(writes.rows, ops.len().next_power_of_two());
            writes.statements[0].sql().as_str().to_owned()
        };
        let mixed = text(&["fence", "event", "event", "stop", "history"]);
        assert_eq!(
            mixed,
            text(&["turn", "history", "history", "history", "history"])
        );
        assert_eq!(
            mixed,
            text(&[
                "fence", "event", "event", "event", "event", "event", "start"
            ])
        );
        assert_ne!(mixed, text(&["fence"; 9]));
        assert!(!mixed.contains("fence"), "{mixed}");
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
