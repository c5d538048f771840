//! The agents routes: the tenant's `/agents…`, and the same handlers at the admin's
//! `/admin/tenants/{tenant_id}/agents…` (documented in `admin.rs`), the tenant found by
//! [`AgentOwner`].

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::Value;

use super::{
    AgentBody, AgentList, AgentOwner, AgentPath, AgentVersionList, PublishRequest, VersionPath,
    body_of, if_match, version_number, with_etag,
};
use crate::app::AppState;
use crate::http::Query;
use crate::http::error::{ApiError, ErrorCode};
use crate::http::openapi::schemas::ErrorBody;
use crate::http::pagination::{DEFAULT_LIMIT, ListQuery, MAX_LIMIT, decode, next_cursor};
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let tenant = &owner.tenant;
    let made = state
        .engine()
        .create_agent(tenant, body.into_inner(), &owner.by)
        .await?;
    tracing::info!(tenant_id = %tenant, agent = %made.agent.name, "agent created");
    Ok(with_etag(HttpResponse::Created(), &made.agent).json(body_of(made)))
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let cursor = query.cursor()?;
    let (agents, more) = state
        .engine()
        .list_agents(&owner.tenant, cursor.page())
        .await?;
    let next = next_cursor(&agents, more, |a| a.id.to_string());
    Ok(HttpResponse::Ok().json(AgentList { agents, next }))
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    path: web::Path<AgentPath>,
) -> Result<HttpResponse, ApiError> {
    let found = state.engine().get_agent(&owner.tenant, &path.name).await?;
    Ok(with_etag(HttpResponse::Ok(), &found.agent).json(body_of(found)))
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<AgentPath>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let expected = if_match(&req)?;
    let (tenant, name) = (&owner.tenant, &path.name);
    let made = state
        .engine()
        .update_agent(tenant, name, body.into_inner(), expected, &owner.by)
        .await?;
    tracing::info!(tenant_id = %tenant, agent = %name, version = made.version.version, "agent version made");
    Ok(with_etag(HttpResponse::Ok(), &made.agent).json(body_of(made)))
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    path: web::Path<AgentPath>,
) -> Result<HttpResponse, ApiError> {
    state
        .engine()
        .delete_agent(&owner.tenant, &path.name)
        .await?;
    tracing::info!(tenant_id = %owner.tenant, agent = %path.name, "agent deleted");
    Ok(HttpResponse::NoContent().finish())
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    path: web::Path<AgentPath>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            format!("limit: must be between 1 and {MAX_LIMIT}"),
        ));
    }
    let after = match query.after.as_deref() {
        None | Some("") => None,
        Some(cursor) => Some(
            decode(cursor)
                .and_then(|v| v.parse::<i64>().ok())
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidQuery,
                        "after: not a cursor this server issued",
                    )
                })?,
        ),
    };
    let (agent, versions, more) = state
        .engine()
        .list_agent_versions(&owner.tenant, &path.name, after, limit)
        .await?;
    let next = next_cursor(&versions, more, |v| v.version.to_string());
    Ok(with_etag(HttpResponse::Ok(), &agent).json(AgentVersionList { versions, next }))
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    path: web::Path<VersionPath>,
) -> Result<HttpResponse, ApiError> {
    let number = version_number(&path.version)?;
    let found = state
        .engine()
        .get_agent_version(&owner.tenant, &path.name, number)
        .await?;
    Ok(with_etag(HttpResponse::Ok(), &found.agent).json(body_of(found)))
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<AgentPath>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let expected = if_match(&req)?;
    let request: PublishRequest = crate::http::parse_json(body.into_inner())?;
    let (tenant, name) = (&owner.tenant, &path.name);
    let agent = state
        .engine()
        .publish_agent(tenant, name, request.version, expected)
        .await?;
    tracing::info!(tenant_id = %tenant, agent = %name, version = request.version, "agent version published");
    Ok(with_etag(HttpResponse::Ok(), &agent).json(agent))
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<AgentPath>,
) -> Result<HttpResponse, ApiError> {
    set_archived(&owner, &state, &req, &path.name, true).await
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
    owner: AgentOwner,
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<AgentPath>,
) -> Result<HttpResponse, ApiError> {
    set_archived(&owner, &state, &req, &path.name, false).await
}

async fn set_archived(
    owner: &AgentOwner,
    state: &AppState,
    req: &HttpRequest,
    name: &str,
    archived: bool,
) -> Result<HttpResponse, ApiError> {
    let expected = if_match(req)?;
    let tenant = &owner.tenant;
    let agent = state
        .engine()
        .archive_agent(tenant, name, archived, expected)
        .await?;
    tracing::info!(tenant_id = %tenant, agent = %name, archived, "agent archive state set");
    Ok(with_etag(HttpResponse::Ok(), &agent).json(agent))
}
