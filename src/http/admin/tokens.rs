//! `/admin/tenants/{id}/tokens`: long-lived tenant tokens ("API keys") and their revocation.

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::existing_tenant;
use crate::app::AppState;
use crate::http::AdminAuth;
use crate::http::error::{ApiError, OrNotFound};
use crate::http::parse_optional_json;
use crate::model::TokenId;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct IssueToken {
    #[serde(default)]
    ttl_seconds: Option<u64>,
    #[serde(default)]
    name: Option<String>,
}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/tokens", tag = "admin", operation_id = "admin_issue_token",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    request_body = Option<crate::http::openapi::schemas::IssueToken>,
    responses(
        (status = 201, description = "The token, shown only here, with its record", body = crate::http::openapi::schemas::IssuedToken),
        (status = 400, description = "The body is not valid JSON or a field is wrong", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn issue_token(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let request: IssueToken = parse_optional_json(&body)?;
    let issued = state
        .admin()
        .issue_api_token(
            state.tokens(),
            &state.settings().auth,
            &tenant,
            request.ttl_seconds,
            request.name,
        )
        .await?;
    tracing::info!(tenant_id = %tenant, jti = %issued.record.jti, "API token issued");
    Ok(HttpResponse::Created()
        .insert_header(("Cache-Control", "no-store"))
        .json(issued))
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/tokens", tag = "admin", operation_id = "admin_list_tokens",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    responses(
        (status = 200, description = "The tenant's API tokens", body = crate::http::openapi::schemas::TokenList),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_tokens(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    let tokens = state.admin().list_api_tokens(&tenant).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "tokens": tokens })))
}

#[utoipa::path(delete, path = "/admin/tenants/{tenant_id}/tokens/{jti}", tag = "admin", operation_id = "admin_revoke_token",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("jti" = String, Path, description = "A token's id (`tok_…`)")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 404, description = "No such tenant or token", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn revoke_token(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, jti) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    let jti: TokenId = jti.parse().map_err(|_| ApiError::not_found("token"))?;
    state
        .admin()
        .revoke_api_token(&tenant, &jti)
        .await
        .or_not_found("token")?;
    state.auth_cache().forget_tenant(&tenant);
    tracing::info!(tenant_id = %tenant, jti = %jti, "API token revoked");
    Ok(HttpResponse::NoContent().finish())
}
