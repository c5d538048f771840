//! Tenants, and the per-request check of a tenant token against stored state.

use super::Stamp;
use super::keyset::Keyset;
use super::quotas::{QUOTA_COLUMNS, QuotaRow};
use super::{Page, Store, StoreError, with_db, with_writer};
use crate::model::{CredentialId, QuotaOverrides, Tenant, TenantId, TenantStatus, TokenId};

#[derive(sqlx::FromRow)]
struct TenantRow {
    id: TenantId,
    name: String,
    status: String,
    created_at: Stamp,
}

impl TryFrom<TenantRow> for Tenant {
    type Error = StoreError;

    fn try_from(row: TenantRow) -> Result<Self, StoreError> {
        Ok(Tenant {
            id: row.id,
            name: row.name,
            status: row.status.parse().map_err(StoreError::Corrupt)?,
            created_at: row.created_at.into(),
        })
    }
}

/// What a tenant token's holder may do, as the store sees it right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthState {
    /// With the tenant's own quota values, read in the same statement.
    Active(QuotaOverrides),
    Suspended,
    /// The tenant, the token or the credential that obtained it is gone or revoked.
    Revoked,
}

#[derive(sqlx::FromRow)]
struct AuthRow {
    status: String,
    revoked: bool,
    credential_ok: bool,
    #[sqlx(flatten)]
    quotas: QuotaRow,
}

impl Store {
    pub async fn insert_tenant(&self, tenant: &Tenant) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO tenants (id, name, status, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $4)",
            )
            .bind(tenant.id)
            .bind(&tenant.name)
            .bind(tenant.status.as_str())
            .bind(Stamp(tenant.created_at))
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    pub async fn get_tenant(&self, tenant: &TenantId) -> Result<Tenant, StoreError> {
        let row: TenantRow = with_db!(self, |pool| {
            sqlx::query_as("SELECT id, name, status, created_at FROM tenants WHERE id = $1")
                .bind(tenant)
                .fetch_one(pool)
                .await
        })?;
        row.try_into()
    }

    /// Tenants, newest first.
    pub async fn list_tenants(&self, page: Page) -> Result<(Vec<Tenant>, bool), StoreError> {
        let keyset = Keyset {
            columns: "id, name, status, created_at",
            table: "tenants",
            scope: &[],
            key: "id",
        };
        let (rows, more): (Vec<TenantRow>, bool) = self.keyset_page(keyset, page).await?;
        let tenants = rows
            .into_iter()
            .map(Tenant::try_from)
            .collect::<Result<_, _>>()?;
        Ok((tenants, more))
    }

    pub async fn update_tenant(
        &self,
        tenant: &TenantId,
        name: Option<&str>,
        status: Option<TenantStatus>,
    ) -> Result<Tenant, StoreError> {
        let row: TenantRow = with_writer!(self, |pool| {
            sqlx::query_as(
                "UPDATE tenants SET name = COALESCE($2, name), status = COALESCE($3, status), \
                 updated_at = $4 WHERE id = $1 RETURNING id, name, status, created_at",
            )
            .bind(tenant)
            .bind(name)
            .bind(status.map(TenantStatus::as_str))
            .bind(Stamp(crate::model::now()))
            .fetch_one(pool)
            .await
        })?;
        row.try_into()
    }

    /// Deletes the tenant and, by cascade, everything it owns.
    pub async fn delete_tenant(&self, tenant: &TenantId) -> Result<(), StoreError> {
        let result = with_writer!(self, |pool| {
            sqlx::query("DELETE FROM tenants WHERE id = $1")
                .bind(tenant)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        if result == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// One round trip per authenticated request: the tenant's status, whether the token was
    /// revoked, and whether the credential that obtained it (if any) still exists.
    pub async fn auth_state(
        &self,
        tenant: &TenantId,
        jti: &TokenId,
        credential: Option<&CredentialId>,
    ) -> Result<AuthState, StoreError> {
        let row: Option<AuthRow> = with_db!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT t.status, \
                   EXISTS (SELECT 1 FROM api_tokens k WHERE k.id = $2 AND k.tenant_id = t.id \
                           AND k.revoked_at IS NOT NULL) AS revoked, \
                   ($3 IS NULL OR EXISTS (SELECT 1 FROM credentials c \
                           WHERE c.id = $3 AND c.tenant_id = t.id)) AS credential_ok, \
                   {QUOTA_COLUMNS} \
                 FROM tenants t LEFT JOIN tenant_quotas q ON q.tenant_id = t.id WHERE t.id = $1",
            )))
            .bind(tenant)
            .bind(jti)
            .bind(credential.copied())
            .fetch_optional(pool)
            .await
        })?;
        Ok(match row {
            None => AuthState::Revoked,
            Some(row) if row.revoked || !row.credential_ok => AuthState::Revoked,
            Some(row) if row.status == TenantStatus::Suspended.as_str() => AuthState::Suspended,
            Some(row) => AuthState::Active(row.quotas.into()),
        })
    }
}
