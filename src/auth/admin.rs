//! The admin service: what `/admin` and authentication need of the store (tenants, their
//! credentials, API tokens and quota overrides, logins, a caller's auth state). Faces reach
//! the database only through it and the engine.

use std::net::IpAddr;

use super::tenancy::{self, IssuedApiToken, LoginContext, NewCredential};
use super::{AuthCache, AuthError, LoginLimits, SignedToken, TokenKeys};
use crate::config::AuthSettings;
use crate::model::{ApiToken, Credential, CredentialId, QuotaOverrides, Tenant, TenantId, TokenId};
use crate::store::{AuthState, Page, Store, StoreError};

#[derive(Debug, Clone)]
pub struct Admin {
    store: Store,
}

impl Admin {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    pub async fn get_tenant(&self, tenant: &TenantId) -> Result<Tenant, StoreError> {
        self.store.get_tenant(tenant).await
    }

    pub async fn create_tenant(&self, name: &str) -> Result<Tenant, AuthError> {
        tenancy::create_tenant(&self.store, name).await
    }

    /// A page of tenants, and whether more follow.
    pub async fn list_tenants(&self, page: Page) -> Result<(Vec<Tenant>, bool), StoreError> {
        self.store.list_tenants(page).await
    }

    pub async fn issue_api_token(
        &self,
        tokens: &TokenKeys,
        settings: &AuthSettings,
        tenant: &TenantId,
        ttl_seconds: Option<u64>,
        name: Option<String>,
    ) -> Result<IssuedApiToken, AuthError> {
        tenancy::issue_api_token(&self.store, tokens, settings, tenant, ttl_seconds, name).await
    }

    pub async fn list_api_tokens(&self, tenant: &TenantId) -> Result<Vec<ApiToken>, StoreError> {
        self.store.list_api_tokens(tenant).await
    }

    pub async fn revoke_api_token(
        &self,
        tenant: &TenantId,
        jti: &TokenId,
    ) -> Result<(), StoreError> {
        self.store.revoke_api_token(tenant, jti).await
    }

    pub async fn create_credential(
        &self,
        tenant: &TenantId,
        name: Option<String>,
    ) -> Result<NewCredential, AuthError> {
        tenancy::create_credential(&self.store, tenant, name).await
    }

    pub async fn list_credentials(&self, tenant: &TenantId) -> Result<Vec<Credential>, StoreError> {
        self.store.list_credentials(tenant).await
    }

    pub async fn delete_credential(
        &self,
        tenant: &TenantId,
        credential: &CredentialId,
    ) -> Result<(), StoreError> {
        self.store.delete_credential(tenant, credential).await
    }

    pub async fn get_quota_overrides(
        &self,
        tenant: &TenantId,
    ) -> Result<QuotaOverrides, StoreError> {
        self.store.get_quota_overrides(tenant).await
    }

    pub async fn put_quota_overrides(
        &self,
        tenant: &TenantId,
        quotas: &QuotaOverrides,
    ) -> Result<(), StoreError> {
        self.store.put_quota_overrides(tenant, quotas).await
    }

    /// Exchanges client credentials for a short-lived token (see [`tenancy::login`]).
    pub async fn login(
        &self,
        tokens: &TokenKeys,
        settings: &AuthSettings,
        limits: &LoginLimits,
        client_id: &str,
        client_secret: &str,
        address: Option<IpAddr>,
    ) -> Result<SignedToken, AuthError> {
        let context = LoginContext {
            store: &self.store,
            tokens,
            settings,
            limits,
        };
        tenancy::login(context, client_id, client_secret, address).await
    }

    /// A token's state, from `cache` while its answer is fresh.
    pub async fn auth_state(
        &self,
        cache: &AuthCache,
        tenant: &TenantId,
        jti: &TokenId,
        credential: Option<&CredentialId>,
    ) -> Result<AuthState, StoreError> {
        cache.auth_state(&self.store, tenant, jti, credential).await
    }
}
