//! ACP sessions are agentry sessions. ACP names them by UUID: an agentry session is
//! written as the UUID of its id (`sess_<hex>`), and a client's own UUID names a session
//! created on first use (its alias). `GET /acp/sessions/{id}` describes one, with history
//! URLs agentry serves (`/acp/sessions/{id}/history/{position}`, tenant-authenticated).

use actix_web::{HttpRequest, HttpResponse, web};

use super::error::AcpError;
use super::history::history_message;
use super::wire::{ErrorObject as AcpErrorBody, MessageObject, SessionObject};
use crate::app::AppState;
use crate::engine::{self, SessionRef};
use crate::http::TenantAuth;
use crate::http::error::ApiError;
use crate::model::{Session, TenantId};

/// The session's id on this face: its alias when that is a UUID, else its id as one.
pub fn session_uuid(session: &Session) -> String {
    engine::session_uuid(session).hyphenated().to_string()
}

/// The tenant's session a client names: an agentry id, the UUID of one, or an alias.
pub async fn find_session(
    state: &AppState,
    tenant: &TenantId,
    key: &str,
) -> Result<Option<Session>, AcpError> {
    match SessionRef::parse(key) {
        Some(reference) => Ok(state.engine().find_session(tenant, &reference).await?),
        None => Ok(None),
    }
}

/// A run's session key as the reference takes it, a UUID, or an agentry id (`sess_…`);
/// anything else is refused naming `field`.
pub fn check_session_key(key: &str, field: &str) -> Result<(), AcpError> {
    match SessionRef::parse(key) {
        Some(SessionRef::Key(_)) => Err(AcpError::invalid(
            field,
            format!("`{key}`: must be a UUID or an agentry session id (`sess_…`)"),
        )),
        _ => Ok(()),
    }
}

#[utoipa::path(get, path = "/acp/sessions/{session_id}", tag = "ACP", operation_id = "acp_get_session",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session's UUID, or an agentry session id")),
    responses(
        (status = 200, description = "The session, with the URLs of its history messages", body = SessionObject),
        (status = 404, description = "No such session of this tenant", body = AcpErrorBody),
    ))]
pub async fn get_session(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<String>,
    req: HttpRequest,
) -> Result<HttpResponse, AcpError> {
    let auth = auth?;
    let key = path.into_inner();
    let session = find_session(&state, &auth.tenant_id, &key)
        .await?
        .ok_or_else(|| AcpError::not_found(format!("Session {key}")))?;
    // The URLs need the history's length only, never its messages.
    let (messages, _) = state
        .engine()
        .history_size(&auth.tenant_id, &session.id)
        .await?;
    let id = session_uuid(&session);
    let base = crate::http::forwarded::base_url(&req, state.settings());
    Ok(HttpResponse::Ok().json(SessionObject {
        history: (0..messages)
            .map(|position| format!("{base}/acp/sessions/{id}/history/{position}"))
            .collect(),
        id,
        state: None,
    }))
}

/// `GET /acp/sessions/{id}/history/{position}`: one history message as an ACP message.
#[utoipa::path(get, path = "/acp/sessions/{session_id}/history/{position}", tag = "ACP", operation_id = "acp_get_history_message",
    security(("tenant" = [])),
    params(("session_id" = String, Path, description = "A session's UUID, or an agentry session id"), ("position" = String, Path, description = "The message's position in the history, from 0")),
    responses(
        (status = 200, description = "The message", body = MessageObject),
        (status = 404, description = "No such session or message", body = AcpErrorBody),
    ))]
pub async fn get_history_message(
    auth: Result<TenantAuth, ApiError>,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    req: HttpRequest,
) -> Result<HttpResponse, AcpError> {
    let auth = auth?;
    let (key, position) = path.into_inner();
    let session = find_session(&state, &auth.tenant_id, &key)
        .await?
        .ok_or_else(|| AcpError::not_found(format!("Session {key}")))?;
    let missing = || AcpError::not_found(format!("History message {position}"));
    let position = position.parse::<i64>().map_err(|_| missing())?;
    let (message, stored_at) = state
        .engine()
        .history_entry(&auth.tenant_id, &session.id, position)
        .await?
        .ok_or_else(missing)?;
    Ok(HttpResponse::Ok().json(history_message(
        &message,
        stored_at,
        &session.agent,
        &crate::http::forwarded::base_url(&req, state.settings()),
    )))
}
