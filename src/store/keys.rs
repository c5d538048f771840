//! Keys agentry generates for itself when the configuration names none.

use super::Stamp;
use super::{Store, StoreError, with_db, with_writer};

impl Store {
    /// The stored key for `purpose`, storing `candidate` first if there is none. Several
    /// processes starting at once agree on one key: the first insert wins.
    pub async fn get_or_insert_instance_key(
        &self,
        purpose: &str,
        candidate: &str,
    ) -> Result<String, StoreError> {
        let secret: String = with_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO instance_keys (purpose, secret, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (purpose) DO NOTHING",
            )
            .bind(purpose)
            .bind(candidate)
            .bind(Stamp(crate::model::now()))
            .execute(pool)
            .await?;
            sqlx::query_scalar("SELECT secret FROM instance_keys WHERE purpose = $1")
                .bind(purpose)
                .fetch_one(pool)
                .await
        })?;
        Ok(secret)
    }

    /// The stored key for `purpose`, if one was ever generated.
    pub async fn get_instance_key(&self, purpose: &str) -> Result<Option<String>, StoreError> {
        let secret = with_db!(self, |pool| {
            sqlx::query_scalar("SELECT secret FROM instance_keys WHERE purpose = $1")
                .bind(purpose)
                .fetch_optional(pool)
                .await
        })?;
        Ok(secret)
    }
}
