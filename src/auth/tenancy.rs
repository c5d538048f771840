//! Tenant, credential and token operations, shared by the admin API and the CLI.

use std::net::IpAddr;

use super::error::{AuthError, or_missing};
use super::{ADMIN_SUBJECT, LoginLimits, Role, SignedToken, TokenKeys};
use crate::config::{AuthSettings, MAX_TOKEN_TTL_SECONDS};
use crate::crypto;
use crate::model::{
    ApiToken, Credential, CredentialId, FieldError, Tenant, TenantId, TenantStatus,
};
use crate::store::{Store, StoreError};

/// The `client_id` of the built-in admin client.
pub const ADMIN_CLIENT_ID: &str = "admin";

pub fn validate_tenant_name(name: &str) -> Result<String, FieldError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(FieldError::new("name", "must be 1 to 100 characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(FieldError::new(
            "name",
            "must not contain control characters",
        ));
    }
    Ok(name.to_owned())
}

pub async fn create_tenant(store: &Store, name: &str) -> Result<Tenant, AuthError> {
    let tenant = Tenant {
        id: TenantId::generate(),
        name: validate_tenant_name(name)?,
        status: TenantStatus::Active,
        created_at: crate::model::now(),
    };
    match store.insert_tenant(&tenant).await {
        Err(StoreError::Conflict(_)) => Err(AuthError::Conflict(format!(
            "a tenant named `{}` already exists",
            tenant.name
        ))),
        other => other.map(|()| tenant).map_err(AuthError::from),
    }
}

/// A credential with its secret, which exists in plaintext only in this value.
#[derive(Debug, serde::Serialize)]
pub struct NewCredential {
    #[serde(flatten)]
    pub credential: Credential,
    pub client_secret: String,
}

/// A credential's or token's optional name: at most 200 characters, none of them control
/// characters (U+0000 included: PostgreSQL cannot store it).
fn check_label(name: Option<&str>) -> Result<(), FieldError> {
    match name {
        Some(name) if name.chars().count() > 200 || name.chars().any(char::is_control) => {
            Err(FieldError::new(
                "name",
                "must be at most 200 characters, none of them control characters",
            ))
        }
        _ => Ok(()),
    }
}

pub async fn create_credential(
    store: &Store,
    tenant: &TenantId,
    name: Option<String>,
) -> Result<NewCredential, AuthError> {
    check_label(name.as_deref())?;
    store
        .get_tenant(tenant)
        .await
        .map_err(or_missing("tenant"))?;
    let secret = crypto::random_token(32);
    let hash = super::hasher::hash_secret(secret.clone()).await?;
    let credential = Credential {
        client_id: CredentialId::generate(),
        tenant_id: *tenant,
        name,
        created_at: crate::model::now(),
    };
    store
        .insert_credential(tenant, &credential, &hash)
        .await
        .map_err(or_missing("tenant"))?;
    Ok(NewCredential {
        credential,
        client_secret: secret,
    })
}

/// An API key: the token and its record.
#[derive(Debug, serde::Serialize)]
pub struct IssuedApiToken {
    pub token: String,
    #[serde(flatten)]
    pub record: ApiToken,
}

pub async fn issue_api_token(
    store: &Store,
    tokens: &TokenKeys,
    settings: &AuthSettings,
    tenant: &TenantId,
    ttl_seconds: Option<u64>,
    name: Option<String>,
) -> Result<IssuedApiToken, AuthError> {
    check_label(name.as_deref())?;
    let ttl = ttl_seconds.unwrap_or(settings.api_key_ttl_seconds);
    if ttl == 0 || ttl > MAX_TOKEN_TTL_SECONDS {
        return Err(FieldError::new(
            "ttl_seconds",
            format!("must be between 1 and {MAX_TOKEN_TTL_SECONDS}"),
        )
        .into());
    }
    store
        .get_tenant(tenant)
        .await
        .map_err(or_missing("tenant"))?;
    let signed = tokens.sign(&tenant.to_string(), Role::Tenant, ttl, None);
    let record = ApiToken {
        jti: signed.jti,
        tenant_id: *tenant,
        name,
        created_at: signed.issued_at,
        expires_at: signed.expires_at,
        revoked_at: None,
    };
    store
        .insert_api_token(tenant, &record)
        .await
        .map_err(or_missing("tenant"))?;
    Ok(IssuedApiToken {
        token: signed.token,
        record,
    })
}

/// What a login needs besides the credentials.
pub struct LoginContext<'a> {
    pub store: &'a Store,
    pub tokens: &'a TokenKeys,
    pub settings: &'a AuthSettings,
    pub limits: &'a LoginLimits,
}

/// Exchanges client credentials for a short-lived token. Attempts from a client id or
/// address that failed too often are refused before any secret is checked; a `client_id`
/// that is not even well-formed is refused without a verification; a well-formed unknown
/// one is verified against the decoy hash, so it costs what a wrong secret costs.
pub async fn login(
    context: LoginContext<'_>,
    client_id: &str,
    client_secret: &str,
    address: Option<IpAddr>,
) -> Result<SignedToken, AuthError> {
    let LoginContext {
        store,
        tokens,
        settings,
        limits,
    } = context;
    let ttl = settings.token_ttl_seconds;
    let parsed = client_id.parse::<CredentialId>().ok();
    // Only names that can exist are counted per client: others would fill the counter.
    let counted = (client_id == ADMIN_CLIENT_ID || parsed.is_some()).then_some(client_id);
    // Counted as failed until it succeeds, so concurrent attempts cannot overtake the limit.
    limits.begin_attempt(counted, address)?;
    let refuse = || AuthError::InvalidCredentials;

    if client_id == ADMIN_CLIENT_ID {
        let admin_secret = &settings.admin_secret;
        if admin_secret.is_empty()
            || !crypto::constant_time_eq(admin_secret.expose().as_bytes(), client_secret.as_bytes())
        {
            return Err(refuse());
        }
        limits.record_success(client_id, address);
        return Ok(tokens.sign(ADMIN_SUBJECT, Role::Admin, ttl, None));
    }

    let Some(id) = parsed else {
        return Err(refuse());
    };
    let found = match store.get_login_credential(&id).await {
        Ok(found) => Some(found),
        Err(StoreError::NotFound) => None,
        Err(e) => return Err(e.into()),
    };
    let hash = found
        .as_ref()
        .map_or_else(|| limits.decoy_hash().to_owned(), |f| f.secret_hash.clone());
    let verified = limits.verify(client_secret.to_owned(), hash).await?;
    let Some(found) = found.filter(|_| verified) else {
        return Err(refuse());
    };
    limits.record_success(client_id, address);
    if found.tenant_status == TenantStatus::Suspended {
        return Err(AuthError::TenantSuspended);
    }
    Ok(tokens.sign(&found.tenant_id.to_string(), Role::Tenant, ttl, Some(&id)))
}
