//! `/admin/tenants/{id}/credentials`: client credentials for `POST /auth/token`.

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::existing_tenant;
use crate::app::AppState;
use crate::http::AdminAuth;
use crate::http::error::{ApiError, OrNotFound};
use crate::http::parse_optional_json;
use crate::model::CredentialId;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CreateCredential {
    #[serde(default)]
    name: Option<String>,
}

/// Creates a credential; the response is the only place its secret ever appears.
#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/credentials", tag = "admin", operation_id = "admin_create_credential",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    request_body = Option<crate::http::openapi::schemas::CreateCredential>,
    responses(
        (status = 201, description = "The credential with its secret, shown only here", body = crate::http::openapi::schemas::NewCredential),
        (status = 400, description = "The body is not valid JSON or a field is wrong", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn create_credential(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let request: CreateCredential = parse_optional_json(&body)?;
    let created = state
        .admin()
        .create_credential(&tenant, request.name)
        .await?;
    tracing::info!(tenant_id = %tenant, client_id = %created.credential.client_id, "credential created");
    Ok(HttpResponse::Created()
        .insert_header(("Cache-Control", "no-store"))
        .json(created))
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/credentials", tag = "admin", operation_id = "admin_list_credentials",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    responses(
        (status = 200, description = "The tenant's credentials", body = crate::http::openapi::schemas::CredentialList),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_credentials(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let credentials = state.admin().list_credentials(&tenant).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "credentials": credentials })))
}

#[utoipa::path(delete, path = "/admin/tenants/{tenant_id}/credentials/{client_id}", tag = "admin", operation_id = "admin_delete_credential",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("client_id" = String, Path, description = "A credential's client id (`cred_…`)")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such tenant or credential", body = crate::http::openapi::schemas::ErrorBody),
    ))]
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
        .admin()
        .delete_credential(&tenant, &client_id)
        .await
        .or_not_found("credential")?;
    state.auth_cache().forget_tenant(&tenant);
    tracing::info!(tenant_id = %tenant, client_id = %client_id, "credential deleted");
    Ok(HttpResponse::NoContent().finish())
}
