//! `/sessions` and `/sessions/{id}`: create, list, read and delete sessions.

use actix_web::{HttpResponse, web};
use serde_json::Value;

use super::wire::{CreateSessionRequest, CreateSessionResponse, SessionInfo, SessionList};
use super::{PathSession, session_id};
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::redact;
use crate::http::Query;
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::http::openapi::schemas as doc;
use crate::http::pagination::{ListQuery, next_cursor};
use crate::http::parse_json;
use crate::model::HistoryMessage;

/// Creates a session of an agent.
///
/// The session keeps the agent's configuration (`agent.tools` enabled, with `trust`;
/// `agent.options`, each omitted one at its default, `secret` ones encrypted and read back
/// as `"***"`), the client `tools`, and the optional seed `messages` as its history. It does
/// not run the agent: `POST /sessions/{session_id}/turns` does. Unknown fields are refused,
/// naming them.
#[utoipa::path(post, path = "/sessions", tag = "AAP",
    security(("tenant" = [])),
    request_body = CreateSessionRequest,
    responses(
        (status = 201, description = "The session was created", body = CreateSessionResponse),
        (status = 400, description = "The body is not valid JSON or a field is wrong (an unknown agent, tool or option)", body = doc::ErrorBody),
    ))]
pub async fn create_session(
    auth: TenantAuth,
    state: web::Data<AppState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let request: CreateSessionRequest = parse_json(body.into_inner())?;
    let seed = request
        .messages
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, m)| HistoryMessage::parse(m, &format!("messages[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let config = SessionConfigRequest {
        server_tools: request.agent.tools,
        options: request.agent.options.unwrap_or_default(),
        client_tools: request.tools,
    };
    let session = state
        .engine()
        .create_session_on_version(
            &auth.tenant_id,
            &request.agent.name,
            request.agent.version,
            config,
            seed,
        )
        .await?;
    tracing::info!(session_id = %session.id, agent = %session.agent, "session created");
    Ok(HttpResponse::Created().json(CreateSessionResponse {
        session_id: session.id.to_string(),
    }))
}

/// The tenant's sessions, newest first, a page at a time.
#[utoipa::path(get, path = "/sessions", tag = "AAP",
    security(("tenant" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "A page of sessions", body = SessionList),
        (status = 400, description = "A bad `limit` or `after`", body = doc::ErrorBody),
    ))]
pub async fn list_sessions(
    auth: TenantAuth,
    state: web::Data<AppState>,
    query: Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let cursor = query.cursor()?;
    let (sessions, more) = state
        .engine()
        .list_sessions(&auth.tenant_id, cursor.page())
        .await?;
    let next = next_cursor(&sessions, more, |s| s.id.to_string());
    let sessions = sessions
        .into_iter()
        .map(|s| SessionInfo::from(redact(s)))
        .collect();
    Ok(HttpResponse::Ok().json(SessionList { sessions, next }))
}

/// Reads a session.
///
/// Its agent (name, enabled server tools, options with `secret` values as `"***"`), its
/// client tools and when it was created. The session is the same whichever face made it
/// (AAP, AgentScope, ACP or A2A).
#[utoipa::path(get, path = "/sessions/{session_id}", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)")),
    responses(
        (status = 200, description = "The session", body = SessionInfo),
        (status = 404, description = "No such session of this tenant", body = doc::ErrorBody),
    ))]
pub async fn get_session(path: PathSession) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(SessionInfo::from(redact(path.session))))
}

/// Moves a session on a tenant agent to another kept version of the agent
/// (`{"agent": {"version": 3}}`, an agentry extension): its next turns run that version.
/// The move is an `agent_version_change` event of the session's log, between its turns
/// (`GET /sessions/{id}/events` streams it); it is refused while a turn runs. A session on
/// a configured agent has no versions to move to.
#[utoipa::path(patch, path = "/sessions/{session_id}", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)")),
    request_body = super::wire::UpdateSessionRequest,
    responses(
        (status = 200, description = "The session", body = SessionInfo),
        (status = 400, description = "No such version kept, or the session's agent is a configured one", body = doc::ErrorBody),
        (status = 404, description = "No such session of this tenant", body = doc::ErrorBody),
        (status = 409, description = "The session has a turn running (`session_busy`): move it once the turn ends", body = doc::ErrorBody),
    ))]
pub async fn update_session(
    path: PathSession,
    state: web::Data<AppState>,
    body: web::Json<Value>,
) -> Result<HttpResponse, ApiError> {
    let request: super::wire::UpdateSessionRequest = parse_json(body.into_inner())?;
    let session = state
        .engine()
        .move_session(&path.session, request.agent.version)
        .await?;
    Ok(HttpResponse::Ok().json(SessionInfo::from(redact(session))))
}

/// Deletes the session with its history and events; its running turn is stopped.
#[utoipa::path(delete, path = "/sessions/{session_id}", tag = "AAP",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session id (`sess_…`)")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such session of this tenant", body = doc::ErrorBody),
    ))]
pub async fn delete_session(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = session_id(&path)?;
    state.engine().delete_session(&auth.tenant_id, &id).await?;
    tracing::info!(session_id = %id, "session deleted");
    Ok(HttpResponse::NoContent().finish())
}
