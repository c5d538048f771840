//! ACP sessions are agentry sessions. ACP names them by UUID: an agentry session is
//! written as the UUID of its id (`sess_<hex>`), and a client's own UUID names a session
//! created on first use (its alias). `GET /acp/sessions/{id}` describes one, with history
//! URLs agentry serves (`/acp/sessions/{id}/history/{position}`, tenant-authenticated).

use actix_web::{HttpRequest, HttpResponse, web};

use super::error::AcpError;
use super::history::history_message;
use super::wire::SessionObject;
use crate::app::AppState;
use crate::auth::TenantAuth;
use crate::config::HistoryType;
use crate::engine::session_for_key;
use crate::error::ApiError;
use crate::model::{Session, SessionId, TenantId};

/// The session's id on this face: its alias when that is a UUID, else its id as one.
pub fn session_uuid(session: &Session) -> String {
    if let Some(alias) = &session.alias
        && let Ok(uuid) = uuid::Uuid::parse_str(alias)
    {
        return uuid.hyphenated().to_string();
    }
    let hex = session.id.as_str().trim_start_matches(SessionId::PREFIX);
    uuid::Uuid::parse_str(hex)
        .map(|u| u.hyphenated().to_string())
        .unwrap_or_else(|_| session.id.to_string())
}

/// The tenant's session a client names: an agentry id, the UUID of one, or an alias.
pub async fn find_session(
    state: &AppState,
    tenant: &TenantId,
    key: &str,
) -> Result<Option<Session>, AcpError> {
    let lookup = |id: SessionId| async move {
        match state.store.get_session(tenant, &id).await {
            Ok(session) => Ok(Some(session)),
            Err(crate::store::StoreError::NotFound) => Ok(None),
            Err(e) => Err(AcpError::from(e)),
        }
    };
    if key.starts_with(SessionId::PREFIX) {
        return match key.parse() {
            Ok(id) => lookup(id).await,
            Err(_) => Ok(None),
        };
    }
    let alias = match uuid::Uuid::parse_str(key) {
        Ok(uuid) => {
            let id = format!("{}{}", SessionId::PREFIX, uuid.simple());
            if let Ok(id) = id.parse()
                && let Some(session) = lookup(id).await?
            {
                return Ok(Some(session));
            }
            uuid.hyphenated().to_string()
        }
        Err(_) => key.to_owned(),
    };
    Ok(state.store.find_session_by_alias(tenant, &alias).await?)
}

/// A run's session key as the reference takes it, a UUID, or an agentry id (`sess_…`);
/// anything else is refused naming `field`.
pub fn check_session_key(key: &str, field: &str) -> Result<(), AcpError> {
    if key.starts_with(SessionId::PREFIX) || uuid::Uuid::parse_str(key).is_ok() {
        return Ok(());
    }
    Err(AcpError::invalid(
        field,
        format!("`{key}`: must be a UUID or an agentry session id (`sess_…`)"),
    ))
}

/// The session a run names (created on first use for a client's key).
pub async fn session_for_run(
    state: &AppState,
    tenant: &TenantId,
    key: &str,
    agent: &str,
) -> Result<Session, AcpError> {
    if let Some(session) = find_session(state, tenant, key).await? {
        return Ok(session);
    }
    if key.starts_with(SessionId::PREFIX) {
        return Err(AcpError::not_found(format!("Session {key}")));
    }
    check_session_key(key, "session_id")?;
    let alias = uuid::Uuid::parse_str(key)
        .map(|u| u.hyphenated().to_string())
        .unwrap_or_else(|_| key.to_owned());
    let (session, _) = session_for_key(state, tenant, &alias, agent, Vec::new())
        .await
        .map_err(|e| match e {
            crate::engine::EngineError::Invalid(field) => {
                AcpError::invalid("session_id", field.message)
            }
            other => other.into(),
        })?;
    Ok(session)
}

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
    let history = state
        .store
        .list_history(&auth.tenant_id, &session.id, HistoryType::Full)
        .await?;
    let id = session_uuid(&session);
    let base = crate::http::forwarded::base_url(&req, &state.settings);
    Ok(HttpResponse::Ok().json(SessionObject {
        history: (0..history.len())
            .map(|position| format!("{base}/acp/sessions/{id}/history/{position}"))
            .collect(),
        id,
        state: None,
    }))
}

/// `GET /acp/sessions/{id}/history/{position}`: one history message as an ACP message.
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
        .store
        .get_history_entry(&auth.tenant_id, &session.id, position)
        .await?
        .ok_or_else(missing)?;
    Ok(HttpResponse::Ok().json(history_message(
        &message,
        stored_at,
        &session.agent,
        &crate::http::forwarded::base_url(&req, &state.settings),
    )))
}
