//! `/admin/tenants/{tenant_id}/agents…`: a tenant's agents, managed by an admin exactly as
//! the tenant manages them at `/agents`, by the same handlers (`routes.rs`; versions an
//! admin makes are by `admin`). Here: how the OpenAPI document describes these paths.

use super::{AgentBody, AgentList, AgentVersionList, PublishRequest};
use crate::http::openapi::schemas::ErrorBody;
use crate::http::pagination::ListQuery;
use crate::model::TenantAgent;

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
pub fn create_agent() {}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/agents", tag = "admin", operation_id = "admin_list_agents",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ListQuery),
    responses(
        (status = 200, description = "A page of the tenant's agents", body = AgentList),
        (status = 400, description = "A bad `limit` or `after`", body = ErrorBody),
        (status = 404, description = "No such tenant", body = ErrorBody),
    ))]
pub fn list_agents() {}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/agents/{name}", tag = "admin", operation_id = "admin_get_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent with its newest version", body = AgentBody),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub fn get_agent() {}

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
pub fn update_agent() {}

#[utoipa::path(delete, path = "/admin/tenants/{tenant_id}/agents/{name}", tag = "admin", operation_id = "admin_delete_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub fn delete_agent() {}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/agents/{name}/versions", tag = "admin", operation_id = "admin_list_agent_versions",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name"), ListQuery),
    responses(
        (status = 200, description = "A page of versions", body = AgentVersionList),
        (status = 400, description = "A bad `limit` or `after`", body = ErrorBody),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub fn list_agent_versions() {}

#[utoipa::path(get, path = "/admin/tenants/{tenant_id}/agents/{name}/versions/{version}", tag = "admin", operation_id = "admin_get_agent_version",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name"),
           ("version" = i64, Path, description = "A version number")),
    responses(
        (status = 200, description = "The agent with that version", body = AgentBody),
        (status = 404, description = "No such tenant, agent or version", body = ErrorBody),
    ))]
pub fn get_agent_version() {}

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
pub fn publish_agent() {}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/agents/{name}/archive", tag = "admin", operation_id = "admin_archive_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent", body = TenantAgent),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub fn archive_agent() {}

#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/agents/{name}/restore", tag = "admin", operation_id = "admin_restore_agent",
    security(("admin" = [])),
    params(("tenant_id" = String, Path, description = "A tenant id (`ten_…`)"), ("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent", body = TenantAgent),
        (status = 404, description = "No such tenant or agent", body = ErrorBody),
    ))]
pub fn restore_agent() {}
