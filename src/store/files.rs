//! Part contents stored once per session and served by URL.

use super::Stamp;
use super::{Store, StoreError, with_db, with_writer};
use crate::model::{FileId, SessionId, TenantId};

/// A stored content and its type.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredFile {
    pub id: FileId,
    pub content_type: String,
    pub size: i64,
    pub data: Vec<u8>,
    pub created_at: Stamp,
}

impl Store {
    /// Stores `data` for the session unless the same bytes of the same type are there
    /// already; either way returns the file's id.
    pub async fn insert_file(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        content_type: &str,
        data: &[u8],
    ) -> Result<FileId, StoreError> {
        let digest = crate::model::sha256_hex(data);
        let id = FileId::generate();
        let stored: FileId = with_writer!(self, |pool| {
            sqlx::query_scalar(
                "INSERT INTO files (id, tenant_id, session_id, content_type, sha256, size, data, \
                 created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (tenant_id, session_id, sha256, content_type) \
                 DO UPDATE SET size = excluded.size RETURNING id",
            )
            .bind(id)
            .bind(tenant)
            .bind(session)
            .bind(content_type)
            .bind(&digest)
            .bind(data.len() as i64)
            .bind(data)
            .bind(Stamp(crate::model::now()))
            .fetch_one(pool)
            .await
        })?;
        Ok(stored)
    }

    pub async fn get_file(&self, tenant: &TenantId, id: &FileId) -> Result<StoredFile, StoreError> {
        let file = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT id, content_type, size, data, created_at FROM files \
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(id)
            .fetch_one(pool)
            .await
        })?;
        Ok(file)
    }
}
