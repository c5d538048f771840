//! `/admin/tenants/{id}/credentials`: client credentials for `POST /auth/token`.

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::existing_tenant;
use crate::app::AppState;
use crate::auth;
use crate::error::{ApiError, OrNotFound};
use crate::http::AdminAuth;
use crate::http::parse_optional_json;
use crate::model::CredentialId;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateCredential {
    #[serde(default)]
    name: Option<String>,
}

/// Creates a credential; the response is the only place its secret ever appears.
pub async fn create_credential(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let request: CreateCredential = parse_optional_json(&body)?;
    let created = auth::create_credential(&state.store, &tenant, request.name).await?;
    tracing::info!(tenant_id = %tenant, client_id = %created.credential.client_id, "credential created");
    Ok(HttpResponse::Created()
        .insert_header(("Cache-Control", "no-store"))
        .json(created))
}

pub async fn list_credentials(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let credentials = state.store.list_credentials(&tenant).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "credentials": credentials })))
}

pub async fn delete_credential(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, client_id) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    let client_id: CredentialId = client_id
        .parse()
        .map_err(|_| ApiError::not_found("credential"))?;
    state
        .store
        .delete_credential(&tenant, &client_id)
        .await
        .or_not_found("credential")?;
    state.auth_cache.forget_tenant(&tenant);
    tracing::info!(tenant_id = %tenant, client_id = %client_id, "credential deleted");
    Ok(HttpResponse::NoContent().finish())
}
