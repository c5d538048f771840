//! API keys: long-lived tenant tokens an admin minted, kept so they can be revoked.

use super::Stamp;
use super::{Store, StoreError, with_db, with_writer};
use crate::model::{ApiToken, TenantId, TokenId};

#[derive(sqlx::FromRow)]
struct TokenRow {
    id: TokenId,
    tenant_id: TenantId,
    name: Option<String>,
    created_at: Stamp,
    expires_at: Stamp,
    revoked_at: Option<Stamp>,
}

impl From<TokenRow> for ApiToken {
    fn from(row: TokenRow) -> Self {
        ApiToken {
            jti: row.id,
            tenant_id: row.tenant_id,
            name: row.name,
            created_at: row.created_at.into(),
            expires_at: row.expires_at.into(),
            revoked_at: row.revoked_at.map(|s| s.0),
        }
    }
}

impl Store {
    pub async fn insert_api_token(
        &self,
        tenant: &TenantId,
        token: &ApiToken,
    ) -> Result<(), StoreError> {
        with_writer!(self, |pool| {
            sqlx::query(
                "INSERT INTO api_tokens (id, tenant_id, name, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(token.jti)
            .bind(tenant)
            .bind(&token.name)
            .bind(Stamp(token.created_at))
            .bind(Stamp(token.expires_at))
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    pub async fn list_api_tokens(&self, tenant: &TenantId) -> Result<Vec<ApiToken>, StoreError> {
        let rows: Vec<TokenRow> = with_db!(self, |pool| {
            sqlx::query_as(
                "SELECT id, tenant_id, name, created_at, expires_at, revoked_at FROM api_tokens \
                 WHERE tenant_id = $1 ORDER BY id",
            )
            .bind(tenant)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(ApiToken::from).collect())
    }

    /// Marks the token revoked (idempotently); `NotFound` if the tenant never had it.
    pub async fn revoke_api_token(
        &self,
        tenant: &TenantId,
        jti: &TokenId,
    ) -> Result<(), StoreError> {
        let result = with_writer!(self, |pool| {
            sqlx::query(
                "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, $3) \
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant)
            .bind(jti)
            .bind(Stamp(crate::model::now()))
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        if result == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }
}
