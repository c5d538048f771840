//! The memory tool's notes: tenant-scoped, kept across sessions.

use super::Stamp;
use super::{Store, StoreError, with_db, with_writer};
use crate::model::TenantId;

impl Store {
    pub async fn insert_note(&self, tenant: &TenantId, text: &str) -> Result<String, StoreError> {
        let id = format!("note_{}", uuid::Uuid::now_v7().simple());
        with_writer!(self, |pool| {
            sqlx::query("INSERT INTO memory_notes (id, tenant_id, text, created_at) VALUES ($1, $2, $3, $4)")
                .bind(&id)
                .bind(tenant)
                .bind(text)
                .bind(Stamp(crate::model::now()))
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(id)
    }

    /// Notes containing `query` (case-insensitive), newest first; all notes when empty.
    pub async fn search_notes(
        &self,
        tenant: &TenantId,
        query: &str,
        limit: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let pattern = format!(
            "%{}%",
            query
                .to_lowercase()
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let rows = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT id, text FROM memory_notes WHERE tenant_id = $1 \
                 AND LOWER(text) LIKE $2 ESCAPE '\\' ORDER BY id DESC LIMIT $3",
            )
            .bind(tenant)
            .bind(&pattern)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows)
    }

    pub async fn delete_note(&self, tenant: &TenantId, id: &str) -> Result<bool, StoreError> {
        let deleted = with_writer!(self, |pool| {
            sqlx::query("DELETE FROM memory_notes WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(deleted > 0)
    }
}
