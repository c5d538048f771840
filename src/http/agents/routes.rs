//! The tenant's `/agents` routes.

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use super::{AgentBody, AgentList, AgentVersionList, PublishRequest, ops};
use crate::app::AppState;
use crate::http::Query;
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::http::openapi::schemas::ErrorBody;
use crate::http::pagination::ListQuery;
use crate::model::TenantAgent;

/// Creates one of the tenant's agents: its version 1, a draft.
///
/// The body holds the keys of an `[[agents]]` entry (`name`, `title`, `version` (a label),
/// `description`, `model`, `system_prompt`, `image_inputs`, `options`, `tools`, `history`,
/// `input_schema`, `output_schema`, `max_steps`) with `connection` naming an operator's
/// `[[connections]]` entry instead of a provider's keys. It is checked as `[[agents]]` is
/// (the same message for the same mistake), then against what the operator allows tenants;
/// the field at fault is named as a JSON pointer. A name of a configured agent is a
/// conflict. Publish a version to open sessions on it by name.
#[utoipa::path(post, path = "/agents", tag = "agents",
    security(("tenant" = [])),
    request_body(content = Object, description = "The agent: `[[agents]]` keys with `connection`"),
    responses(
        (status = 201, description = "The agent and its version 1; `ETag` is its revision", body = AgentBody),
        (status = 400, description = "A field is wrong (named in `field`, a JSON pointer)", body = ErrorBody),
        (status = 409, description = "The name is taken (by a configured agent or another of the tenant's), or the tenant keeps its most agents", body = ErrorBody),
    ))]
pub async fn create_agent(
    auth: TenantAuth,
    state: web::Data<AppState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    ops::create(
        &state,
        &auth.tenant_id,
        body.into_inner(),
        &auth.token_id.to_string(),
    )
    .await
}

/// The tenant's agents, newest first, a page at a time.
#[utoipa::path(get, path = "/agents", tag = "agents",
    security(("tenant" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "A page of agents", body = AgentList),
        (status = 400, description = "A bad `limit` or `after`", body = ErrorBody),
    ))]
pub async fn list_agents(
    auth: TenantAuth,
    state: web::Data<AppState>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    ops::list(&state, &auth.tenant_id, &query).await
}

/// Reads one of the tenant's agents with its newest version.
#[utoipa::path(get, path = "/agents/{name}", tag = "agents",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent; `ETag` is its revision", body = AgentBody),
        (status = 404, description = "No such agent of this tenant", body = ErrorBody),
    ))]
pub async fn get_agent(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::get(&state, &auth.tenant_id, &path).await
}

/// Makes the agent's next version from the whole body (as on create), a draft: the
/// published version and the sessions on it do not change. `If-Match` with the agent's
/// `ETag` makes the change only if nobody changed the agent since (else 412).
#[utoipa::path(put, path = "/agents/{name}", tag = "agents",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "The agent's name"),
           ("If-Match" = Option<String>, Header, description = "The agent's ETag")),
    request_body(content = Object, description = "The agent: `[[agents]]` keys with `connection`"),
    responses(
        (status = 200, description = "The agent and its new version", body = AgentBody),
        (status = 400, description = "A field is wrong (named in `field`, a JSON pointer)", body = ErrorBody),
        (status = 404, description = "No such agent of this tenant", body = ErrorBody),
        (status = 412, description = "The agent changed since the ETag in If-Match: nothing was changed", body = ErrorBody),
    ))]
pub async fn update_agent(
    auth: TenantAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let by = auth.token_id.to_string();
    ops::update(&state, &req, &auth.tenant_id, &path, body.into_inner(), &by).await
}

/// Deletes the agent and its versions. Its sessions stay; their next turn fails with
/// `agent_unavailable`.
#[utoipa::path(delete, path = "/agents/{name}", tag = "agents",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such agent of this tenant", body = ErrorBody),
    ))]
pub async fn delete_agent(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::delete(&state, &auth.tenant_id, &path).await
}

/// The agent's kept versions, newest first, a page at a time.
#[utoipa::path(get, path = "/agents/{name}/versions", tag = "agents",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "The agent's name"), ListQuery),
    responses(
        (status = 200, description = "A page of versions", body = AgentVersionList),
        (status = 400, description = "A bad `limit` or `after`", body = ErrorBody),
        (status = 404, description = "No such agent of this tenant", body = ErrorBody),
    ))]
pub async fn list_agent_versions(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    ops::versions(&state, &auth.tenant_id, &path, &query).await
}

/// One version of the agent.
#[utoipa::path(get, path = "/agents/{name}/versions/{version}", tag = "agents",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "The agent's name"),
           ("version" = i64, Path, description = "A version number")),
    responses(
        (status = 200, description = "The agent with that version", body = AgentBody),
        (status = 404, description = "No such agent of this tenant, or version kept", body = ErrorBody),
    ))]
pub async fn get_agent_version(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (name, version) = path.into_inner();
    ops::version(&state, &auth.tenant_id, &name, &version).await
}

/// Publishes a kept version: new sessions on the agent run it; open sessions keep theirs.
/// Publishing an older version is a rollback.
#[utoipa::path(post, path = "/agents/{name}/publish", tag = "agents",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "The agent's name"),
           ("If-Match" = Option<String>, Header, description = "The agent's ETag")),
    request_body = PublishRequest,
    responses(
        (status = 200, description = "The agent", body = TenantAgent),
        (status = 400, description = "The body is not a version to publish (`version`, a number)", body = ErrorBody),
        (status = 404, description = "No such agent of this tenant, or version kept", body = ErrorBody),
        (status = 412, description = "The agent changed since the ETag in If-Match", body = ErrorBody),
    ))]
pub async fn publish_agent(
    auth: TenantAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    ops::publish(&state, &req, &auth.tenant_id, &path, body.into_inner()).await
}

/// Archives the agent: it takes no new sessions and leaves `/meta` and the other faces;
/// its open sessions go on.
#[utoipa::path(post, path = "/agents/{name}/archive", tag = "agents",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent", body = TenantAgent),
        (status = 404, description = "No such agent of this tenant", body = ErrorBody),
        (status = 412, description = "The agent changed since the ETag in If-Match", body = ErrorBody),
    ))]
pub async fn archive_agent(
    auth: TenantAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::archive(&state, &req, &auth.tenant_id, &path, true).await
}

/// Restores an archived agent.
#[utoipa::path(post, path = "/agents/{name}/restore", tag = "agents",
    security(("tenant" = [])),
    params(("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "The agent", body = TenantAgent),
        (status = 404, description = "No such agent of this tenant", body = ErrorBody),
        (status = 412, description = "The agent changed since the ETag in If-Match", body = ErrorBody),
    ))]
pub async fn restore_agent(
    auth: TenantAuth,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    ops::archive(&state, &req, &auth.tenant_id, &path, false).await
}
