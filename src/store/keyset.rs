//! Keyset pages of a table, newest first: every list of the API that pages by one key
//! column (sessions, turns, tenants, agents and their versions, schedules and their
//! occurrences, webhook endpoints and deliveries) reads through [`Store::keyset_page`], so
//! the cursor, the order and the look-ahead row that says whether another page follows are
//! written once. The run list (`run_list.rs`) is the one list ordered by two columns (the
//! time a run's status changed, then its id) and counted in all; it keeps its own statement.

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::{Store, StoreError, with_db};

/// Keyset pagination: a page of items and whether more follow. The key is a time-ordered
/// UUID, or another column that orders the rows newest first (a version number).
#[derive(Debug, Clone, Copy)]
pub struct Page<K = Uuid> {
    /// Only items strictly after (older than) the item with this key.
    pub after: Option<K>,
    pub limit: u32,
}

impl<K> Page<K> {
    /// The `LIMIT` to ask for: one more than the page, to learn whether another follows.
    fn fetch_limit(&self) -> i64 {
        i64::from(self.limit) + 1
    }
}

/// Splits a fetched `limit + 1` rows into the page and whether there is a next one.
fn finish_page<T, K>(mut rows: Vec<T>, page: Page<K>) -> (Vec<T>, bool) {
    let more = rows.len() > page.limit as usize;
    rows.truncate(page.limit as usize);
    (rows, more)
}

/// Which rows a keyset page reads: `columns` of `table` whose `scope` columns hold their
/// values (the tenant first, as every statement filters on it), ordered by `key` (the page's
/// key), newest first. `table` may join: a scope column may be another table's.
pub(super) struct Keyset<'a> {
    pub columns: &'a str,
    pub table: &'a str,
    pub scope: &'a [(&'a str, Uuid)],
    pub key: &'a str,
}

impl Keyset<'_> {
    /// The statement: the scope's values are `$1…$n`, the cursor `$n+1`, the limit `$n+2`.
    fn sql(&self) -> String {
        let mut sql = format!("SELECT {} FROM {} WHERE ", self.columns, self.table);
        for (i, (column, _)) in self.scope.iter().enumerate() {
            sql.push_str(&format!("{column} = ${} AND ", i + 1));
        }
        let after = self.scope.len() + 1;
        sql.push_str(&format!(
            "(${after} IS NULL OR {key} < ${after}) ORDER BY {key} DESC LIMIT ${}",
            after + 1,
            key = self.key,
        ));
        sql
    }
}

impl Store {
    /// One page of `keyset`'s rows after `page`'s cursor, and whether more follow.
    pub(super) async fn keyset_page<R, K>(
        &self,
        keyset: Keyset<'_>,
        page: Page<K>,
    ) -> Result<(Vec<R>, bool), StoreError>
    where
        R: for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow>,
        R: Send + Unpin,
        K: Copy + Send + 'static,
        K: for<'q> sqlx::Encode<'q, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
        K: for<'q> sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
    {
        let sql = keyset.sql();
        let rows: Vec<R> = with_db!(self, |pool| {
            let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()));
            for (_, value) in keyset.scope {
                query = query.bind(*value);
            }
            query
                .bind(page.after)
                .bind(page.fetch_limit())
                .fetch_all(pool)
                .await
        })?;
        Ok(finish_page(rows, page))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_filters_on_the_scope_then_the_cursor() {
        let tenant = Uuid::nil();
        let keyset = Keyset {
            columns: "id, name",
            table: "schedules",
            scope: &[("tenant_id", tenant), ("schedule_id", tenant)],
            key: "id",
        };
        assert_eq!(
            keyset.sql(),
            "SELECT id, name FROM schedules WHERE tenant_id = $1 AND schedule_id = $2 AND \
             ($3 IS NULL OR id < $3) ORDER BY id DESC LIMIT $4"
        );
        let unscoped = Keyset {
            scope: &[],
            ..keyset
        };
        assert!(
            unscoped
                .sql()
                .ends_with("WHERE ($1 IS NULL OR id < $1) ORDER BY id DESC LIMIT $2")
        );
    }

    #[test]
    fn a_page_holds_its_limit_and_says_whether_more_follow() {
        let page: Page = Page {
            after: None,
            limit: 2,
        };
        assert_eq!(page.fetch_limit(), 3);
        assert_eq!(finish_page(vec![1, 2, 3], page), (vec![1, 2], true));
        assert_eq!(finish_page(vec![1, 2], page), (vec![1, 2], false));
    }
}
