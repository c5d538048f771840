//! A SQLite transaction in one hand-off: `BEGIN`, its statements and `COMMIT` sent to the
//! write connection's thread as one command. sqlx runs every command on the connection's
//! own thread and wakes the async runtime for each answer, so a transaction sent as
//! `BEGIN`, a command and `COMMIT` costs three hand-offs where this costs one.
//!
//! What the caller used to check between the statements and `COMMIT` is checked inside the
//! command by a guard ([`push_guard`]): a statement that fails when its condition holds, so
//! the statements after it, `COMMIT` among them, do not run.

use sqlx::pool::PoolConnection;
use sqlx::{QueryBuilder, Sqlite, SqlitePool};

/// The write connection's temporary table that no row may enter (made when the connection
/// opens): an insert into it fails its command with `CHECK constraint failed:
/// command_refused`.
pub(super) const CREATE_REFUSED: &str = "CREATE TEMP TABLE IF NOT EXISTS refused \
     (command INTEGER CONSTRAINT command_refused CHECK (command IS NULL))";

/// A command for [`commit`]: its transaction's `BEGIN`.
pub(super) fn begin() -> QueryBuilder<Sqlite> {
    QueryBuilder::new("BEGIN;\n")
}

/// Pushes a guard, whose condition the caller pushes next: the statement fails (and the
/// command with it) when the condition holds. `changes()` in it is the number of rows the
/// statement before it wrote.
pub(super) fn push_guard(command: &mut QueryBuilder<Sqlite>) {
    command.push("INSERT INTO temp.refused SELECT 1 WHERE ");
}

/// Whether `error` is a guard's refusal (see [`push_guard`]).
pub(super) fn is_refusal(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.message().contains("command_refused"))
}

/// Runs `command` (begun with [`begin`], statements separated by `;`) and `COMMIT` on the
/// write pool's connection as one command. A statement that fails leaves the transaction
/// open: it is rolled back here. A connection whose rollback fails, or whose call is
/// abandoned midway (a time bound), is closed instead of going back to the pool, which
/// rolls back what it held: no pooled connection keeps a transaction open (sqlx does not
/// know of one it did not begin itself).
pub(super) async fn commit(
    pool: &SqlitePool,
    mut command: QueryBuilder<Sqlite>,
) -> Result<(), sqlx::Error> {
    command.push(";\nCOMMIT");
    let mut held = Held(Some(pool.acquire().await?));
    let result = command.build().execute(&mut **held.conn()).await;
    match result {
        Ok(_) => held.release(),
        Err(error) => {
            if sqlx::query("ROLLBACK")
                .execute(&mut **held.conn())
                .await
                .is_ok()
            {
                held.release();
            }
            return Err(error);
        }
    }
    Ok(())
}

/// A write connection that may be inside a transaction: closed when dropped, unless
/// released to the pool.
struct Held(Option<PoolConnection<Sqlite>>);

impl Held {
    fn conn(&mut self) -> &mut PoolConnection<Sqlite> {
        self.0.as_mut().expect("a held connection")
    }

    /// Back to the pool: it is outside any transaction.
    fn release(&mut self) {
        drop(self.0.take());
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            // Closing the connection rolls back what it left open; the pool opens another.
            drop(conn.detach());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Settings;
    use crate::store::{Db, Store};

    /// A SQLite store in a temporary directory (whatever `TEST_POSTGRES_URL` says: the
    /// one-command transaction is SQLite's), with a table of its own and the write pool.
    async fn pools() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("agentry.db").display());
        let toml = format!("[database]\nurl = \"{url}\"\n");
        let settings = Settings::from_toml_layers(&[toml.as_str()]).unwrap();
        let store = Store::connect(&settings.database).await.unwrap();
        sqlx::query("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
            .execute(write(&store))
            .await
            .unwrap();
        (store, dir)
    }

    fn write(store: &Store) -> &SqlitePool {
        match &store.db {
            Db::Sqlite(pools) => &pools.write,
            Db::Postgres(_) => unreachable!("a SQLite store"),
        }
    }

    async fn notes(store: &Store) -> Vec<String> {
        sqlx::query_scalar("SELECT text FROM notes ORDER BY id")
            .fetch_all(write(store))
            .await
            .unwrap()
    }

    fn note(text: &str) -> QueryBuilder<Sqlite> {
        let mut command = begin();
        command.push("INSERT INTO notes (text) VALUES (");
        command.push_bind(text.to_owned());
        command.push(")");
        command
    }

    #[tokio::test]
    async fn a_guard_refuses_the_whole_command_and_leaves_no_transaction_open() {
        let (store, _dir) = pools().await;
        let pool = write(&store);
        commit(pool, note("first")).await.unwrap();

        // Two writes, a guard between them that holds: nothing of the command is kept.
        let mut command = note("second");
        command.push(";\n");
        push_guard(&mut command);
        command.push("changes() = 1;\nINSERT INTO notes (text) VALUES ('third')");
        let error = commit(pool, command).await.unwrap_err();
        assert!(is_refusal(&error), "{error}");
        assert_eq!(notes(&store).await, ["first"]);

        // A guard that does not hold lets the command through.
        let mut command = note("fourth");
        command.push(";\n");
        push_guard(&mut command);
        command.push("changes() = 0");
        commit(pool, command).await.unwrap();
        assert_eq!(notes(&store).await, ["first", "fourth"]);

        // A statement that fails midway: rolled back as well, the connection reusable.
        let mut command = note("fifth");
        command.push(";\nINSERT INTO notes (id, text) VALUES (1, 'taken')");
        let error = commit(pool, command).await.unwrap_err();
        assert!(!is_refusal(&error), "{error}");
        commit(pool, note("sixth")).await.unwrap();
        assert_eq!(notes(&store).await, ["first", "fourth", "sixth"]);
    }

    #[tokio::test]
    async fn a_command_abandoned_midway_leaves_no_transaction_open() {
        let (store, _dir) = pools().await;
        let pool = write(&store);
        // A command long enough to be abandoned while the connection's thread runs it.
        let mut command = begin();
        command.push(
            "INSERT INTO notes (text) WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL \
             SELECT i + 1 FROM n WHERE i < 300000) SELECT 'bulk' FROM n",
        );
        let abandoned = tokio::time::timeout(Duration::from_millis(5), commit(pool, command)).await;
        assert!(abandoned.is_err(), "the command finished within 5 ms");
        // The next writer finds no transaction the abandoned call left open (with one write
        // connection, it would be that connection, inside it).
        commit(pool, note("after")).await.unwrap();
        let notes = notes(&store).await;
        assert_eq!(notes.last().map(String::as_str), Some("after"));
        // The abandoned command is there whole or not at all.
        let bulk = notes.iter().filter(|n| *n == "bulk").count();
        assert!(
            bulk == 0 || bulk == 300_000,
            "{bulk} rows of the abandoned command"
        );
    }
}
