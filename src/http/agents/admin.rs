//! `/admin/tenants/{tenant_id}/agents…`: a tenant's agents, managed by an admin exactly as
//! the tenant manages them at `/agents` (versions an admin makes are by `admin`).

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use super::{AgentBody, AgentList, AgentVersionList, PublishRequest, ops};
use crate::app::AppState;
use crate::http::AdminAuth;
use crate::http::Query;
use crate::http::admin::existing_tenant;
use crate::http::error::ApiError;
use crate::http::openapi::schemas::ErrorBody;
use crate::http::pagination::ListQuery;
use crate::model::TenantAgent;

const BY: &str = "admin";

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/agents", tag = "admin", operation_id = "admin_create_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)")),
    request_body(content = Object, description = "The agent, as `POST /agents` takes it"),
    responses(
        (status = 201, description = "The agent and its version 1", body = AgentBody),
        (status = 400, description = "A field is wrong (named in `field`, a JSON pointer)", body = ErrorBody),
        (status = 404, description = "No such tenant", body = ErrorBody),
        (status = 409, description = "The name is taken, or the tenant keeps its most agents", body = ErrorBody),
    ))]
pub async fn create_agent(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    ops::create(&state, &tenant, body.into_inner(), BY).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/agents", tag = "admin", operation_id = "admin_list_agents",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ListQuery),
    responses(
        (status = 200, description = "A page of the tenant's agents", body = AgentList),
        (status = 400, description = "A bad `limit` or `after`", body = ErrorBody),
        (status = 404, description = "No such tenant", body = ErrorBody),
    ))]
pub async fn list_agents(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let tenant = existing_tenant(&state, &path).await?;
    ops::list(&state, &tenant, &query).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/agents/{name}", tag = "admin", operation_id = "admin_get_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent with its newest version", body = AgentBody),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub async fn get_agent(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::get(&state, &tenant, &name).await
}

#[utoipa::path(put, path = "/admin/tenants/{tenant_id}/agents/{name}", tag = "admin", operation_id = "admin_update_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name"),
           ("If-Match" = Option<String>, Header, description = "The agent's ETag")),
    request_body(content = Object, description = "The agent, as `PUT /agents/{name}` takes it"),
    responses(
        (status = 200, description = "The agent and its new version", body = AgentBody),
        (status = 400, description = "A field is wrong", body = ErrorBody),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
        (status = 412, description = "The agent changed since the ETag in If-Match", body = ErrorBody),
    ))]
pub async fn update_agent(
    _: AdminAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::update(&state, &req, &tenant, &name, body.into_inner(), BY).await
}

#[utoipa::path(delete, path = "/admin/tenants/{tenant_id}/agents/{name}", tag = "admin", operation_id = "admin_delete_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub async fn delete_agent(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::delete(&state, &tenant, &name).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/agents/{name}/versions", tag = "admin", operation_id = "admin_list_agent_versions",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name"), ListQuery),
    responses(
        (status = 200, description = "A page of versions", body = AgentVersionList),
        (status = 400, description = "A bad `limit` or `after`", body = ErrorBody),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub async fn list_agent_versions(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::versions(&state, &tenant, &name, &query).await
}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/agents/{name}/versions/{version}", tag = "admin", operation_id = "admin_get_agent_version",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name"),
           ("version" = i64, Path, description = "A version number")),
    responses(
        (status = 200, description = "The agent with that version", body = AgentBody),
        (status = 404, description = "No such tenant, agent or version", body = ErrorBody),
    ))]
pub async fn get_agent_version(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name, version) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::version(&state, &tenant, &name, &version).await
}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/agents/{name}/publish", tag = "admin", operation_id = "admin_publish_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name"),
           ("If-Match" = Option<String>, Header, description = "The agent's ETag")),
    request_body = PublishRequest,
    responses(
        (status = 200, description = "The agent", body = TenantAgent),
        (status = 400, description = "The body is not a version to publish (`version`, a number)", body = ErrorBody),
        (status = 404, description = "No such tenant, agent or version", body = ErrorBody),
        (status = 412, description = "The agent changed since the ETag in If-Match", body = ErrorBody),
    ))]
pub async fn publish_agent(
    _: AdminAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::publish(&state, &req, &tenant, &name, body.into_inner()).await
}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/agents/{name}/archive", tag = "admin", operation_id = "admin_archive_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent", body = TenantAgent),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub async fn archive_agent(
    _: AdminAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::archive(&state, &req, &tenant, &name, true).await
}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/agents/{name}/restore", tag = "admin", operation_id = "admin_restore_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent", body = TenantAgent),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub async fn restore_agent(
    _: AdminAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (tenant, name) = path.into_inner();
    let tenant = existing_tenant(&state, &tenant).await?;
    ops::archive(&state, &req, &tenant, &name, false).await
}
