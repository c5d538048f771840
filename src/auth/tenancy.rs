//! Tenant, credential and token operations, shared by the admin API and the CLI.

use std::net::IpAddr;

use super::{ADMIN_SUBJECT, Role, SignedToken};
use crate::app::AppState;
use crate::config::MAX_TOKEN_TTL_SECONDS;
use crate::crypto;
use crate::error::{ApiError, ErrorCode, OrNotFound};
use crate::model::{
    ApiToken, Credential, CredentialId, FieldError, Tenant, TenantId, TenantStatus,
};
use crate::store::StoreError;

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

pub async fn create_tenant(state: &AppState, name: &str) -> Result<Tenant, ApiError> {
    let tenant = Tenant {
        id: TenantId::generate(),
        name: validate_tenant_name(name)?,
        status: TenantStatus::Active,
        created_at: crate::model::now(),
    };
    match state.store.insert_tenant(&tenant).await {
        Err(StoreError::Conflict(_)) => Err(ApiError::new(
            ErrorCode::Conflict,
            format!("a tenant named `{}` already exists", tenant.name),
        )),
        other => other.map(|()| tenant).map_err(ApiError::from),
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
fn check_label(name: Option<&str>) -> Result<(), ApiError> {
    match name {
        Some(name) if name.chars().count() > 200 || name.chars().any(char::is_control) => {
            Err(ApiError::invalid(
                "name",
                "must be at most 200 characters, none of them control characters",
            ))
        }
        _ => Ok(()),
    }
}

pub async fn create_credential(
    state: &AppState,
    tenant: &TenantId,
    name: Option<String>,
) -> Result<NewCredential, ApiError> {
    check_label(name.as_deref())?;
    state
        .store
        .get_tenant(tenant)
        .await
        .or_not_found("tenant")?;
    let secret = crypto::random_token(32);
    let hash = {
        let secret = secret.clone();
        tokio::task::spawn_blocking(move || crypto::hash_password(&secret))
            .await
            .map_err(ApiError::internal)?
    };
    let credential = Credential {
        client_id: CredentialId::generate(),
        tenant_id: tenant.clone(),
        name,
        created_at: crate::model::now(),
    };
    state
        .store
        .insert_credential(tenant, &credential, &hash)
        .await
        .or_not_found("tenant")?;
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
    state: &AppState,
    tenant: &TenantId,
    ttl_seconds: Option<u64>,
    name: Option<String>,
) -> Result<IssuedApiToken, ApiError> {
    check_label(name.as_deref())?;
    let ttl = ttl_seconds.unwrap_or(state.settings.auth.api_key_ttl_seconds);
    if ttl == 0 || ttl > MAX_TOKEN_TTL_SECONDS {
        return Err(ApiError::invalid(
            "ttl_seconds",
            format!("must be between 1 and {MAX_TOKEN_TTL_SECONDS}"),
        ));
    }
    state
        .store
        .get_tenant(tenant)
        .await
        .or_not_found("tenant")?;
    let signed = state.tokens.sign(tenant.as_str(), Role::Tenant, ttl, None);
    let record = ApiToken {
        jti: signed.jti.clone(),
        tenant_id: tenant.clone(),
        name,
        created_at: signed.issued_at,
        expires_at: signed.expires_at,
        revoked_at: None,
    };
    state
        .store
        .insert_api_token(tenant, &record)
        .await
        .or_not_found("tenant")?;
    Ok(IssuedApiToken {
        token: signed.token,
        record,
    })
}

fn invalid_credentials() -> ApiError {
    ApiError::new(
        ErrorCode::InvalidCredentials,
        "invalid client_id or client_secret",
    )
}

/// Exchanges client credentials for a short-lived token. Attempts from a client id or
/// address that failed too often are refused before any secret is checked; a `client_id`
/// that is not even well-formed is refused without a verification; a well-formed unknown
/// one is verified against the decoy hash, so it costs what a wrong secret costs.
pub async fn login(
    state: &AppState,
    client_id: &str,
    client_secret: &str,
    address: Option<IpAddr>,
) -> Result<SignedToken, ApiError> {
    let limits = &state.login_limits;
    let ttl = state.settings.auth.token_ttl_seconds;
    let parsed = client_id.parse::<CredentialId>().ok();
    // Only names that can exist are counted per client: others would fill the counter.
    let counted = (client_id == ADMIN_CLIENT_ID || parsed.is_some()).then_some(client_id);
    // Counted as failed until it succeeds, so concurrent attempts cannot overtake the limit.
    limits.begin_attempt(counted, address)?;
    let refuse = invalid_credentials;

    if client_id == ADMIN_CLIENT_ID {
        let admin_secret = &state.settings.auth.admin_secret;
        if admin_secret.is_empty()
            || !crypto::constant_time_eq(admin_secret.expose().as_bytes(), client_secret.as_bytes())
        {
            return Err(refuse());
        }
        limits.record_success(client_id, address);
        return Ok(state.tokens.sign(ADMIN_SUBJECT, Role::Admin, ttl, None));
    }

    let Some(id) = parsed else {
        return Err(refuse());
    };
    let found = match state.store.get_login_credential(&id).await {
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
        return Err(ApiError::new(
            ErrorCode::TenantSuspended,
            "this tenant is suspended",
        ));
    }
    Ok(state
        .tokens
        .sign(found.tenant_id.as_str(), Role::Tenant, ttl, Some(&id)))
}
