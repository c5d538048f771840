//! `/admin/tenants`: create, list, read, update, delete.

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::tenant_id;
use crate::app::AppState;
use crate::auth;
use crate::http::AdminAuth;
use crate::http::Query;
use crate::http::error::{ApiError, OrNotFound};
use crate::http::pagination::{ListQuery, next_cursor};
use crate::http::parse_json;
use crate::model::{Tenant, TenantStatus};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTenant {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateTenant {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    status: Option<TenantStatus>,
}

#[derive(Serialize)]
struct TenantList {
    tenants: Vec<Tenant>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

#[utoipa::path(post, path = "/admin/tenants", tag = "admin", operation_id = "admin_create_tenant",
    security(("admin" = [])),
    request_body = crate::http::openapi::schemas::CreateTenant,
    responses(
        (status = 201, description = "The tenant", body = crate::model::Tenant),
        (status = 400, description = "The body is not valid JSON or a field is wrong", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "A tenant of this name exists", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn create_tenant(
    _: AdminAuth,
    state: web::Data<AppState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let request: CreateTenant = parse_json(body.into_inner())?;
    let tenant = state.admin().create_tenant(&request.name).await?;
    tracing::info!(tenant_id = %tenant.id, "tenant created");
    Ok(HttpResponse::Created().json(tenant))
}

#[utoipa::path(get, path = "/admin/tenants", tag = "admin", operation_id = "admin_list_tenants",
    security(("admin" = [])),
    params(crate::http::pagination::ListQuery),
    responses(
        (status = 200, description = "A page of tenants", body = crate::http::openapi::schemas::TenantList),
        (status = 400, description = "A bad `limit` or `after`", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn list_tenants(
    _: AdminAuth,
    state: web::Data<AppState>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let cursor = query.cursor()?;
    let (tenants, more) = state.admin().list_tenants(cursor.page()).await?;
    let next = next_cursor(&tenants, more, |t| t.id.to_string());
    Ok(HttpResponse::Ok().json(TenantList { tenants, next }))
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}", tag = "admin", operation_id = "admin_get_tenant",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    responses(
        (status = 200, description = "The tenant", body = crate::model::Tenant),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn get_tenant(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = tenant_id(&path)?;
    let tenant = state.admin().get_tenant(&id).await.or_not_found("tenant")?;
    Ok(HttpResponse::Ok().json(tenant))
}

#[utoipa::path(patch, path = "/admin/tenants/{tenant_id}", tag = "admin", operation_id = "admin_update_tenant",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    request_body = crate::http::openapi::schemas::UpdateTenant,
    responses(
        (status = 200, description = "The tenant", body = crate::model::Tenant),
        (status = 400, description = "The body is not valid JSON or a field is wrong", body = crate::http::openapi::schemas::ErrorBody),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
        (status = 409, description = "A tenant of this name exists", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn update_tenant(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let id = tenant_id(&path)?;
    let request: UpdateTenant = parse_json(body.into_inner())?;
    let name = request
        .name
        .as_deref()
        .map(auth::validate_tenant_name)
        .transpose()?;
    let tenant = state
        .engine()
        .update_tenant(&id, name.as_deref(), request.status)
        .await?;
    state.auth_cache().forget_tenant(&id);
    tracing::info!(tenant_id = %tenant.id, status = %tenant.status, "tenant updated");
    Ok(HttpResponse::Ok().json(tenant))
}

#[utoipa::path(delete, path = "/admin/tenants/{tenant_id}", tag = "admin", operation_id = "admin_delete_tenant",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    responses(
        (status = 204, description = "Deleted with all its data"),
        (status = 404, description = "No such tenant", body = crate::http::openapi::schemas::ErrorBody),
    ))]
pub async fn delete_tenant(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = tenant_id(&path)?;
    state.engine().delete_tenant(&id).await?;
    state.auth_cache().forget_tenant(&id);
    tracing::info!(tenant_id = %id, "tenant deleted with all its data");
    Ok(HttpResponse::NoContent().finish())
}
