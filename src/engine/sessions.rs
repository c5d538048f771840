//! Creating sessions, and the two views of their options: redacted for every reader,
//! decrypted only for the agent that runs a turn.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::EngineError;
use crate::agents::SessionConfigRequest;
use crate::app::AppState;
use crate::crypto::SecretBox;
use crate::model::{HistoryMessage, ServerToolRef, Session, SessionId, TenantId, ToolSpec};

/// What every read of a session shows: secret option values are `"***"`.
pub const REDACTED: &str = "***";

/// A session as readers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionView {
    pub id: SessionId,
    pub agent: String,
    pub server_tools: Vec<ServerToolRef>,
    pub options: BTreeMap<String, String>,
    pub client_tools: Vec<ToolSpec>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The session with every secret option replaced by `"***"`.
pub fn redact(session: Session) -> SessionView {
    let mut options = session.options;
    for name in session.sealed_options.into_keys() {
        options.insert(name, REDACTED.to_owned());
    }
    SessionView {
        id: session.id,
        agent: session.agent,
        server_tools: session.server_tools,
        options,
        client_tools: session.client_tools,
        created_at: session.created_at,
        updated_at: session.updated_at,
    }
}

/// Binds a sealed option to its tenant, session and name, so it cannot be moved.
fn seal_context(tenant: &TenantId, session: &SessionId, option: &str) -> String {
    format!("{tenant}/{session}/options/{option}")
}

/// Seals one secret option value for its session.
pub(super) fn seal_option(
    secrets: &SecretBox,
    tenant: &TenantId,
    session: &SessionId,
    name: &str,
    value: &str,
) -> String {
    secrets.seal(value.as_bytes(), &seal_context(tenant, session, name))
}

/// Validates and records a new session with its seed messages.
pub async fn create_session(
    state: &AppState,
    tenant: &TenantId,
    agent_name: &str,
    config: SessionConfigRequest,
    seed: Vec<HistoryMessage>,
) -> Result<Session, EngineError> {
    insert_session(state, tenant, agent_name, config, seed, None).await
}

/// The session a client names by `key`: an agentry session id (which must exist), or the
/// client's own key, which names a new session of `agent_name` on first use.
pub async fn session_for_key(
    state: &AppState,
    tenant: &TenantId,
    key: &str,
    agent_name: &str,
    seed: Vec<HistoryMessage>,
) -> Result<(Session, bool), EngineError> {
    if key.starts_with(SessionId::PREFIX) {
        let id: SessionId = key.parse().map_err(|_| EngineError::NotFound("session"))?;
        return match state.store.get_session(tenant, &id).await {
            Ok(session) => Ok((session, false)),
            Err(crate::store::StoreError::NotFound) => Err(EngineError::NotFound("session")),
            Err(e) => Err(e.into()),
        };
    }
    if key.is_empty() || key.len() > 256 || key.chars().any(char::is_control) {
        return Err(crate::model::FieldError::new(
            "session_id",
            "must be 1-256 printable characters",
        )
        .into());
    }
    if let Some(session) = state.store.find_session_by_alias(tenant, key).await? {
        return Ok((session, false));
    }
    let config = SessionConfigRequest::default();
    match insert_session(
        state,
        tenant,
        agent_name,
        config,
        seed,
        Some(key.to_owned()),
    )
    .await
    {
        Ok(session) => Ok((session, true)),
        // Another request created it first.
        Err(EngineError::Store(crate::store::StoreError::Conflict(_))) => state
            .store
            .find_session_by_alias(tenant, key)
            .await?
            .map(|session| (session, false))
            .ok_or(EngineError::NotFound("session")),
        Err(e) => Err(e),
    }
}

async fn insert_session(
    state: &AppState,
    tenant: &TenantId,
    agent_name: &str,
    config: SessionConfigRequest,
    seed: Vec<HistoryMessage>,
    alias: Option<String>,
) -> Result<Session, EngineError> {
    let agent = state.agents.get(agent_name).ok_or_else(|| {
        crate::model::FieldError::new("agent.name", format!("unknown agent `{agent_name}`"))
    })?;
    let resolved = agent.resolve_new_session(config)?;
    agent.check_messages(&seed)?;
    let id = SessionId::generate();
    let sealed_options = resolved
        .secret_options
        .iter()
        .map(|(name, value)| {
            let sealed = seal_option(&state.secrets, tenant, &id, name, value);
            (name.clone(), sealed)
        })
        .collect();
    let now = crate::model::now();
    let session = Session {
        id,
        tenant_id: tenant.clone(),
        agent: agent.name().to_owned(),
        server_tools: resolved.server_tools,
        options: resolved.options,
        sealed_options,
        client_tools: resolved.client_tools,
        alias,
        created_at: now,
        updated_at: now,
    };
    state.store.insert_session(tenant, &session, &seed).await?;
    Ok(session)
}

/// Every option of the session in plaintext, secrets decrypted. For the agent runner only:
/// never log, render or store the result.
pub fn open_secret_options(
    secrets: &SecretBox,
    session: &Session,
) -> Result<BTreeMap<String, String>, EngineError> {
    let mut options = session.options.clone();
    for (name, sealed) in &session.sealed_options {
        let plain = secrets.open(sealed, &seal_context(&session.tenant_id, &session.id, name))?;
        let plain = String::from_utf8(plain).map_err(|_| crate::crypto::SealError::Malformed)?;
        options.insert(name.clone(), plain);
    }
    Ok(options)
}
