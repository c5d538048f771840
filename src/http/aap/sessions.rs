//! `/sessions` and `/sessions/{id}`: create, list, read and delete sessions.

use actix_web::{HttpResponse, web};
use serde_json::Value;

use super::wire::{CreateSessionRequest, CreateSessionResponse, SessionInfo, SessionList};
use super::{PathSession, session_id};
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::engine::redact;
use crate::error::ApiError;
use crate::http::TenantAuth;
use crate::http::pagination::{ListQuery, next_cursor};
use crate::http::parse_json;
use crate::model::HistoryMessage;

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
        .engine
        .create_session(&auth.tenant_id, &request.agent.name, config, seed)
        .await?;
    tracing::info!(session_id = %session.id, agent = %session.agent, "session created");
    Ok(HttpResponse::Created().json(CreateSessionResponse {
        session_id: session.id.to_string(),
    }))
}

pub async fn list_sessions(
    auth: TenantAuth,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let cursor = query.cursor()?;
    let (sessions, more) = state
        .store
        .list_sessions(&auth.tenant_id, cursor.page())
        .await?;
    let next = next_cursor(&sessions, more, |s| s.id.to_string());
    let sessions = sessions
        .into_iter()
        .map(|s| SessionInfo::from(redact(s)))
        .collect();
    Ok(HttpResponse::Ok().json(SessionList { sessions, next }))
}

pub async fn get_session(path: PathSession) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(SessionInfo::from(redact(path.session))))
}

pub async fn delete_session(
    auth: TenantAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = session_id(&path)?;
    state.engine.delete_session(&auth.tenant_id, &id).await?;
    tracing::info!(session_id = %id, "session deleted");
    Ok(HttpResponse::NoContent().finish())
}
