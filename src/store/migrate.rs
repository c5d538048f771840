//! refinery migrations driven through sqlx, so the binary has one database driver.

use refinery::Migration;
use refinery_core::AsyncMigrate;
use refinery_core::traits::r#async::{AsyncQuery, AsyncTransaction};
use sqlx::AssertSqlSafe;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{Db, Store, StoreError};

mod sqlite_migrations {
    refinery::embed_migrations!("migrations/sqlite");
}

mod postgres_migrations {
    refinery::embed_migrations!("migrations/postgres");
}

/// Serializes migrations of several processes sharing one PostgreSQL database.
const PG_MIGRATION_LOCK: i64 = 0x0061_6765_6e74_7279;

struct Migrator<'a>(&'a Db);

impl AsyncTransaction for Migrator<'_> {
    type Error = sqlx::Error;

    async fn execute<'a, T: Iterator<Item = &'a str> + Send + 'a>(
        &'a mut self,
        queries: T,
    ) -> Result<usize, sqlx::Error> {
        let queries: Vec<&str> = queries.collect();
        let count = queries.len();
        match self.0 {
            Db::Sqlite(pools) => {
                let mut tx = pools.write.begin().await?;
                for query in queries {
                    sqlx::raw_sql(AssertSqlSafe(query))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
            }
            Db::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                for query in queries {
                    sqlx::raw_sql(AssertSqlSafe(query))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
            }
        }
        Ok(count)
    }
}

impl AsyncQuery<Vec<Migration>> for Migrator<'_> {
    async fn query<'a>(&'a mut self, query: &'a str) -> Result<Vec<Migration>, sqlx::Error> {
        let rows: Vec<(i32, String, String, String)> = match self.0 {
            Db::Sqlite(pools) => {
                sqlx::query_as(AssertSqlSafe(query))
                    .fetch_all(&pools.write)
                    .await?
            }
            Db::Postgres(pool) => sqlx::query_as(AssertSqlSafe(query)).fetch_all(pool).await?,
        };
        rows.into_iter()
            .map(|(version, name, applied_on, checksum)| {
                let applied_on = OffsetDateTime::parse(&applied_on, &Rfc3339)
                    .map_err(|e| sqlx::Error::Decode(e.into()))?;
                let checksum = checksum
                    .parse::<u64>()
                    .map_err(|e| sqlx::Error::Decode(e.into()))?;
                Ok(Migration::applied(version, name, applied_on, checksum))
            })
            .collect()
    }
}

impl AsyncMigrate for Migrator<'_> {}

impl Store {
    /// Applies every embedded migration not yet applied; returns the versions applied now.
    pub async fn migrate(&self) -> Result<Vec<i32>, StoreError> {
        self.migrate_to(refinery::Target::Latest).await
    }

    /// Applies the migrations up to and including `version` (a database as an earlier
    /// release left it, for upgrade tests).
    pub async fn migrate_up_to(&self, version: i32) -> Result<Vec<i32>, StoreError> {
        self.migrate_to(refinery::Target::Version(version)).await
    }

    async fn migrate_to(&self, target: refinery::Target) -> Result<Vec<i32>, StoreError> {
        let report = match &self.db {
            Db::Sqlite(_) => {
                let runner = sqlite_migrations::migrations::runner()
                    .set_grouped(true)
                    .set_target(target);
                runner.run_async(&mut Migrator(&self.db)).await
            }
            Db::Postgres(pool) => {
                let mut lock = pool.acquire().await?;
                sqlx::query("SELECT pg_advisory_lock($1)")
                    .bind(PG_MIGRATION_LOCK)
                    .execute(&mut *lock)
                    .await?;
                let runner = postgres_migrations::migrations::runner()
                    .set_grouped(true)
                    .set_target(target);
                let report = runner.run_async(&mut Migrator(&self.db)).await;
                sqlx::query("SELECT pg_advisory_unlock($1)")
                    .bind(PG_MIGRATION_LOCK)
                    .execute(&mut *lock)
                    .await?;
                report
            }
        }
        .map_err(|e| StoreError::Migration(e.to_string()))?;
        Ok(report
            .applied_migrations()
            .iter()
            .map(|m| m.version())
            .collect())
    }
}
