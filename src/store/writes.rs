//! SQLite: several writes as one statement. sqlx runs a SQLite connection on a thread of
//! its own and sends back each statement's outcome, and each row it returns, as a message
//! of its own that wakes the waiting task; a turn's admission or a batch of the event
//! writer sent as `BEGIN`, several statements and `COMMIT` cost a dozen of those. Here
//! they are one `INSERT` of rows into the `writes` view, whose triggers perform each row's
//! operation in the order of the rows (migration V26 lists the operations and their
//! columns): one statement, atomic by itself, and one message back.

use std::sync::Arc;

use serde::Serialize;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::sqlite::{SqliteArgumentsBuffer, SqliteConnection, SqliteTypeInfo};
use sqlx::types::Json;
use sqlx::{Connection, Encode, QueryBuilder, Sqlite, Type};

use super::{Stamp, StoreError};
use crate::model::{ProcessId, RunId, SessionId, TenantId, TurnId};

/// Value columns after `op`.
const COLUMNS: usize = 13;

/// Rows per statement: `1 + COLUMNS` binds each, under SQLite's 32,766.
pub(super) const ROWS_PER_STATEMENT: usize = 2_048;

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
    Failed::from(error).stale_or_error()
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

/// Why writes were not stored: the refusal a trigger raised, if one did, and the error as
/// the store says it. Nothing of the writes was stored.
#[derive(Debug)]
pub(super) struct Failed {
    pub refused: Option<Refused>,
    pub error: StoreError,
}

impl Failed {
    /// The error as the caller of a write says it: a row refused by a check (either
    /// refusal) is [`StoreError::Stale`].
    pub(super) fn stale_or_error(self) -> StoreError {
        match self.refused {
            Some(_) => StoreError::Stale,
            None => self.error,
        }
    }
}

impl From<sqlx::Error> for Failed {
    fn from(error: sqlx::Error) -> Self {
        Failed {
            refused: Refused::of(&error),
            error: StoreError::from(error),
        }
    }
}

/// A value of a row, owned, as SQLite stores it: the rows of several callers' writes may go
/// out together as one statement (see `group_commit.rs`), or again each on its own.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Value {
    Null,
    Int(i64),
    /// Shared: binding it again (a refused statement's rows run alone) copies no text.
    Text(Arc<str>),
    /// An id: the 16 bytes of its UUID.
    Id(uuid::Uuid),
    /// A value that could not be written (a JSON document that failed to serialize): the
    /// statement fails to bind it, as a bound value that fails to encode does.
    Invalid(String),
}

impl Type<Sqlite> for Value {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }

    fn compatible(_: &SqliteTypeInfo) -> bool {
        true
    }
}

impl Encode<'_, Sqlite> for Value {
    fn encode_by_ref(&self, buf: &mut SqliteArgumentsBuffer) -> Result<IsNull, BoxDynError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(value) => <i64 as Encode<Sqlite>>::encode_by_ref(value, buf),
            Value::Text(text) => <Arc<str> as Encode<Sqlite>>::encode(text.clone(), buf),
            Value::Id(id) => <uuid::Uuid as Encode<Sqlite>>::encode_by_ref(id, buf),
            Value::Invalid(why) => Err(why.clone().into()),
        }
    }
}

/// What a row's column may be given.
pub(super) trait IntoValue {
    fn into_value(self) -> Value;
}

impl IntoValue for i64 {
    fn into_value(self) -> Value {
        Value::Int(self)
    }
}

impl IntoValue for Stamp {
    fn into_value(self) -> Value {
        Value::Int(self.micros())
    }
}

impl IntoValue for &str {
    fn into_value(self) -> Value {
        Value::Text(self.into())
    }
}

impl IntoValue for String {
    fn into_value(self) -> Value {
        Value::Text(self.into())
    }
}

impl IntoValue for &String {
    fn into_value(self) -> Value {
        Value::Text(self.as_str().into())
    }
}

impl IntoValue for &Option<String> {
    fn into_value(self) -> Value {
        self.as_deref().into_value()
    }
}

impl<T: IntoValue> IntoValue for Option<T> {
    fn into_value(self) -> Value {
        self.map_or(Value::Null, IntoValue::into_value)
    }
}

impl<T: Serialize> IntoValue for Json<T> {
    fn into_value(self) -> Value {
        match serde_json::to_string(&self.0) {
            Ok(text) => Value::Text(text.into()),
            Err(error) => Value::Invalid(error.to_string()),
        }
    }
}

macro_rules! id_values {
    ($($id:ty),*) => {$(
        impl IntoValue for $id {
            fn into_value(self) -> Value {
                Value::Id(self.to_uuid())
            }
        }

        impl IntoValue for &$id {
            fn into_value(self) -> Value {
                Value::Id(self.to_uuid())
            }
        }
    )*};
}

id_values!(ProcessId, RunId, SessionId, TenantId, TurnId);

/// The rows of one or more `INSERT INTO writes` statements, in order.
///
/// Every value is a bound parameter, the operation's name included, and a statement's rows
/// are padded up to a power of two with rows of no operation (no trigger takes them): the
/// text of a statement depends only on that number, so the connection keeps a handful
/// prepared (those of up to [`KEPT_ROWS`] rows) instead of one per mix of operations, each
/// with its compiled triggers.
#[derive(Debug, Default)]
pub(super) struct Writes {
    ops: Vec<&'static str>,
    /// [`COLUMNS`] per row.
    values: Vec<Value>,
}

/// One row being pushed: its values in column order; the columns left are `NULL`.
pub(super) struct Row<'w> {
    values: &'w mut Vec<Value>,
    columns: usize,
}

impl Row<'_> {
    pub(super) fn bind(&mut self, value: impl IntoValue) -> &mut Self {
        debug_assert!(
            self.columns < COLUMNS,
            "a row of `writes` has {COLUMNS} values"
        );
        self.values.push(value.into_value());
        self.columns += 1;
        self
    }
}

impl Writes {
    /// Pushes a row of the operation `op` with the values `values` binds.
    pub(super) fn row(&mut self, op: &'static str, values: impl FnOnce(&mut Row<'_>)) {
        self.ops.push(op);
        let mut row = Row {
            values: &mut self.values,
            columns: 0,
        };
        values(&mut row);
        for _ in row.columns..COLUMNS {
            self.values.push(Value::Null);
        }
    }

    /// How many rows.
    pub(super) fn rows(&self) -> usize {
        self.ops.len()
    }

    /// Appends `other`'s rows after these.
    pub(super) fn append(&mut self, other: Writes) {
        self.ops.extend(other.ops);
        self.values.extend(other.values);
    }

    /// Rows `range` of these, as writes of their own.
    pub(super) fn slice(&self, range: std::ops::Range<usize>) -> Slice<'_> {
        Slice {
            ops: &self.ops[range.clone()],
            values: &self.values[range.start * COLUMNS..range.end * COLUMNS],
        }
    }

    /// Runs the rows: one statement on its own (atomic by itself), several in one
    /// transaction.
    pub(super) async fn execute(&self, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        self.slice(0..self.rows()).execute(conn).await
    }
}

/// Some of the rows of [`Writes`].
#[derive(Clone, Copy)]
pub(super) struct Slice<'w> {
    ops: &'w [&'static str],
    values: &'w [Value],
}

impl Slice<'_> {
    /// The statements of these rows, each padded up to a power of two rows, and whether the
    /// connection keeps them prepared.
    fn statements(self) -> (Vec<QueryBuilder<Sqlite>>, bool) {
        let mut statements = Vec::new();
        let mut kept = false;
        for (ops, values) in self
            .ops
            .chunks(ROWS_PER_STATEMENT)
            .zip(self.values.chunks(ROWS_PER_STATEMENT * COLUMNS))
        {
            let mut builder = QueryBuilder::new(INSERT_WRITES);
            let rows = ops.len().next_power_of_two();
            kept = rows <= KEPT_ROWS;
            for (n, (op, values)) in ops.iter().zip(values.chunks(COLUMNS)).enumerate() {
                if n > 0 {
                    builder.push(", ");
                }
                builder.push("(").push_bind(*op);
                for value in values {
                    builder.push(", ").push_bind(value);
                }
                builder.push(")");
            }
            for _ in ops.len()..rows {
                builder.push(", (").push_bind(None::<&str>);
                for _ in 0..COLUMNS {
                    builder.push(", ").push_bind(None::<i64>);
                }
                builder.push(")");
            }
            statements.push(builder);
        }
        let kept = kept && statements.len() == 1;
        (statements, kept)
    }

    /// Runs the rows: one statement on its own (atomic by itself), several in one
    /// transaction.
    pub(super) async fn execute(self, conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        let (mut statements, kept) = self.statements();
        if statements.len() <= 1 {
            if let Some(mut statement) = statements.pop() {
                statement
                    .build()
                    .persistent(kept)
                    .execute(&mut *conn)
                    .await?;
            }
            return Ok(());
        }
        let mut tx = conn.begin().await?;
        for mut statement in statements {
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
pub(super) mod tests {
    use super::*;
    use crate::engine::testing::{running_turn, sqlite_store, tenant};
    use crate::model::{ProcessId, SessionId, Turn};
    use crate::store::{Stamp, Store};
    use sqlx::SqlitePool;

    fn pool(store: &Store) -> &SqlitePool {
        &store.sqlite_pools().write
    }

    async fn execute(writes: Writes, store: &Store) -> Result<(), sqlx::Error> {
        writes
            .execute(&mut pool(store).acquire().await.unwrap())
            .await
    }

    async fn stored_events(store: &Store, session: SessionId) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE session_id = $1")
            .bind(session)
            .fetch_one(pool(store))
            .await
            .unwrap()
    }

    /// `rows` turn_start events of `turn` from seq `first`.
    pub(in crate::store) fn turn_starts(turn: &Turn, first: i64, rows: usize) -> Writes {
        let mut writes = Writes::default();
        for seq in first..first + rows as i64 {
            writes.row("event", |row| {
                row.bind(turn.session_id)
                    .bind(seq)
                    .bind(turn.id)
                    .bind("turn_start")
                    .bind("{}")
                    .bind(Stamp(turn.created_at));
            });
        }
        writes
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
            let (statements, kept) = writes.slice(0..writes.rows()).statements();
            assert_eq!(statements.len(), 1);
            assert!(kept);
            let text = statements[0].sql().as_str().to_owned();
            assert_eq!(
                text.matches("(?").count(),
                ops.len().next_power_of_two(),
                "{text}"
            );
            text
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

    /// Rows appended from other writes, and a slice of them, bind the same values as the
    /// writes they came from.
    #[test]
    fn appended_rows_keep_their_values_and_slices_give_them_back() {
        let one = |op: &'static str, n: i64| {
            let mut writes = Writes::default();
            writes.row(op, |row| {
                row.bind(n).bind("text").bind(None::<i64>).bind(Some(n));
            });
            writes
        };
        let mut all = one("event", 1);
        all.append(one("history", 2));
        all.append(one("stop", 3));
        assert_eq!(all.rows(), 3);
        let second = all.slice(1..2);
        assert_eq!(second.ops, ["history"]);
        assert_eq!(second.values.len(), COLUMNS);
        assert_eq!(
            second.values[..4],
            [
                Value::Int(2),
                Value::Text("text".into()),
                Value::Null,
                Value::Int(2)
            ]
        );
        assert!(second.values[4..].iter().all(|v| *v == Value::Null));
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
            let mut writes = turn_starts(&turn, 1, rows);
            // The turn is not this other process's.
            let other = ProcessId::generate();
            writes.row("fence", |row| {
                row.bind(turn.id).bind(other);
            });
            assert_eq!(
                writes.slice(0..writes.rows()).statements().0.len(),
                rows.div_ceil(ROWS_PER_STATEMENT)
            );
            let refused = execute(writes, &store).await.unwrap_err();
            assert_eq!(Refused::of(&refused), Some(Refused::Fenced), "{refused}");
            assert_eq!(stored_events(&store, turn.session_id).await, 0);
        }

        let mut writes = turn_starts(&turn, 1, ROWS_PER_STATEMENT + 3);
        writes.row("fence", |row| {
            row.bind(turn.id).bind(process);
        });
        execute(writes, &store).await.unwrap();
        assert_eq!(
            stored_events(&store, turn.session_id).await,
            ROWS_PER_STATEMENT as i64 + 3
        );
        store.close().await;
    }

    /// A history row is the session's next message when the session is the tenant's, and
    /// writes nothing, without an error, when it is not: the rows around it are written.
    #[tokio::test]
    async fn a_history_row_goes_after_the_sessions_last_only_for_its_tenant() {
        let (store, _dir) = sqlite_store().await;
        let owner = tenant(&store).await;
        let stranger = crate::model::Tenant {
            id: crate::model::TenantId::generate(),
            name: "another".into(),
            status: crate::model::TenantStatus::Active,
            created_at: crate::model::now(),
        };
        store.insert_tenant(&stranger).await.unwrap();
        let stranger = stranger.id;
        let turn = running_turn(&store, owner, &ProcessId::generate()).await;
        let history = |writes: &mut Writes, tenant, text: &str| {
            let message = serde_json::json!({"role": "user", "content": text});
            writes.row("history", |row| {
                row.bind(turn.session_id)
                    .bind(tenant)
                    .bind(sqlx::types::Json(message))
                    .bind(Stamp(turn.created_at))
                    .bind(turn.id);
            });
        };
        let mut writes = Writes::default();
        history(&mut writes, owner, "one");
        history(&mut writes, stranger, "not written");
        history(&mut writes, owner, "two");
        execute(writes, &store).await.unwrap();
        let mut writes = Writes::default();
        history(&mut writes, owner, "three");
        execute(writes, &store).await.unwrap();
        let stored: Vec<(i64, String)> = sqlx::query_as(
            "SELECT position, message ->> '$.content' FROM history WHERE session_id = $1 \
             ORDER BY position",
        )
        .bind(turn.session_id)
        .fetch_all(pool(&store))
        .await
        .unwrap();
        let positions: Vec<i64> = stored.iter().map(|(p, _)| *p).collect();
        let texts: Vec<&str> = stored.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["one", "two", "three"]);
        assert_eq!(positions, [0, 1, 2]);
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
        execute(writes, &store).await.unwrap();

        let mut again = turn_starts(&turn, 1, 1);
        stop(&mut again);
        let mut start = turn_starts(&turn, 1, 1);
        start.row("start", |row| {
            row.bind(turn.id)
                .bind(tenant)
                .bind(Stamp(turn.created_at))
                .bind(1_i64);
        });
        let mut remembered = turn_starts(&turn, 1, 1);
        remembered.row("remembered", |row| {
            row.bind(turn.session_id)
                .bind(tenant)
                .bind(Stamp(turn.created_at - chrono::Duration::seconds(1)))
                .bind(-1_i64)
                .bind(0_i64);
        });
        for writes in [again, start, remembered] {
            let refused = execute(writes, &store).await.unwrap_err();
            assert_eq!(Refused::of(&refused), Some(Refused::Stale), "{refused}");
            assert_eq!(stored_events(&store, turn.session_id).await, 0);
        }
        store.close().await;
    }
}
