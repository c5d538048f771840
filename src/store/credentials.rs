//! Client credentials: stored as argon2id hashes, looked up by `client_id` at login.

use super::Stamp;
use super::{Store, StoreError, with_db, with_writer};
use crate::model::{Credential, CredentialId, TenantId, TenantStatus};

#[derive(sqlx::FromRow)]
struct CredentialRow {
    id: CredentialId,
    tenant_id: TenantId,
    name: Option<String>,
    created_at: Stamp,
}

impl From<CredentialRow> for Credential {
    fn from(row: CredentialRow) -> Self {
        Credential {
            client_id: row.id,
            tenant_id: row.tenant_id,
            name: row.name,
            created_at: row.created_at.into(),
        }
    }
}

/// What a login needs to know about a `client_id`.
#[derive(Debug, Clone)]
pub struct LoginCredential {
    pub tenant_id: TenantId,
    pub secret_hash: String,
    pub tenant_status: TenantStatus,
}

#[derive(sqlx::FromRow)]
struct LoginRow {
    tenant_id: TenantId,
    secret_hash: String,
    status: String,
}

impl Store {
    pub async fn insert_credential(
        &self,
        tenant: &TenantId,
        credential: &Credential,
        secret_hash: &str,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO credentials (id, tenant_id, name, secret_hash, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(credential.client_id)
            .bind(tenant)
            .bind(&credential.name)
            .bind(secret_hash)
            .bind(Stamp(credential.created_at))
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    pub async fn list_credentials(&self, tenant: &TenantId) -> Result<Vec<Credential>, StoreError> {
        let rows: Vec<CredentialRow> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT id, tenant_id, name, created_at FROM credentials \
                 WHERE tenant_id = $1 ORDER BY id",
            )
            .bind(tenant)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(Credential::from).collect())
    }

    pub async fn delete_credential(
        &self,
        tenant: &TenantId,
        credential: &CredentialId,
    ) -> Result<(), StoreError> {
        let result = with_writer!(self, |pool| {
            sqlx::query("DELETE FROM credentials WHERE tenant_id = $1 AND id = $2")
                .bind(tenant)
                .bind(credential)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if result == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// The one lookup not scoped by tenant: at login the tenant is what we are finding out.
    pub async fn get_login_credential(
        &self,
        credential: &CredentialId,
    ) -> Result<LoginCredential, StoreError> {
        let row: LoginRow = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT c.tenant_id, c.secret_hash, t.status FROM credentials c \
                 JOIN tenants t ON t.id = c.tenant_id WHERE c.id = $1",
            )
            .bind(credential)
            .fetch_one(pool)
            .await
        })?;
        Ok(LoginCredential {
            tenant_id: row.tenant_id,
            secret_hash: row.secret_hash,
            tenant_status: row.status.parse().map_err(StoreError::Corrupt)?,
        })
    }
}
