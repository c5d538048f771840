//! Creating sessions, and the two views of their options: redacted for every reader,
//! decrypted only for the agent that runs a turn.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::request::Idempotency;
use super::{Engine, EngineError};
use crate::agents::SessionConfigRequest;
use crate::crypto::SecretBox;
use crate::model::{
    FieldError, HistoryMessage, Quota, QuotaExceeded, ServerToolRef, Session, SessionId, TenantId,
    ToolSpec,
};
use crate::store::StoreError;

/// What every read of a session shows: secret option values are `"***"`.
pub use crate::agents::REDACTED;

/// A session as readers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionView {
    pub id: SessionId,
    pub agent: String,
    /// The tenant agent's version the session runs; `None` for a configured agent.
    pub agent_version: Option<i64>,
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
        agent_version: session.agent_version.map(|(_, v)| v),
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

/// How a client names a session: an agentry id, the UUID such an id is written from
/// (protocols that name sessions by UUID), or a key of its own (an alias), which names a
/// session created on first use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionRef {
    Id(SessionId),
    Uuid(uuid::Uuid),
    Key(String),
}

impl SessionRef {
    /// `None` for a string that claims to be an agentry id (`sess_…`) and is not one.
    pub fn parse(raw: &str) -> Option<SessionRef> {
        if raw.starts_with(SessionId::PREFIX) {
            return raw.parse().ok().map(SessionRef::Id);
        }
        Some(match uuid::Uuid::parse_str(raw) {
            Ok(uuid) => SessionRef::Uuid(uuid),
            Err(_) => SessionRef::Key(raw.to_owned()),
        })
    }

    /// The alias a session created for this reference is known by.
    fn alias(&self) -> Option<String> {
        match self {
            SessionRef::Id(_) => None,
            SessionRef::Uuid(uuid) => Some(uuid.hyphenated().to_string()),
            SessionRef::Key(key) => Some(key.clone()),
        }
    }
}

/// A session's id as a UUID, as protocols that name sessions by UUID write it: its alias
/// when that is a UUID, else the UUID of its id.
pub fn session_uuid(session: &Session) -> uuid::Uuid {
    session
        .alias
        .as_deref()
        .and_then(|alias| uuid::Uuid::parse_str(alias).ok())
        .unwrap_or_else(|| session.id.to_uuid())
}

impl Engine {
    /// Validates and records a new session with its seed messages.
    pub async fn create_session(
        &self,
        tenant: &TenantId,
        agent_name: &str,
        config: SessionConfigRequest,
        seed: Vec<HistoryMessage>,
    ) -> Result<Session, EngineError> {
        self.insert_session(tenant, agent_name, None, config, seed, None, None)
            .await
    }

    /// Creates a session on a tenant agent's named version (a draft may be tried so), or,
    /// without one, as [`Engine::create_session`].
    pub async fn create_session_on_version(
        &self,
        tenant: &TenantId,
        agent_name: &str,
        version: Option<i64>,
        config: SessionConfigRequest,
        seed: Vec<HistoryMessage>,
    ) -> Result<Session, EngineError> {
        self.insert_session(tenant, agent_name, version, config, seed, None, None)
            .await
    }

    /// The tenant's session a reference names, if it exists.
    pub async fn find_session(
        &self,
        tenant: &TenantId,
        reference: &SessionRef,
    ) -> Result<Option<Session>, EngineError> {
        let by_id = |id: SessionId| async move {
            match self.store.get_session(tenant, &id).await {
                Ok(session) => Ok(Some(session)),
                Err(StoreError::NotFound) => Ok(None),
                Err(e) => Err(EngineError::from(e)),
            }
        };
        let found = match reference {
            SessionRef::Id(id) => by_id(*id).await?,
            SessionRef::Uuid(uuid) => match by_id(SessionId::from_uuid(*uuid)).await? {
                Some(session) => Some(session),
                None => self.find_by_alias(tenant, reference).await?,
            },
            SessionRef::Key(_) => self.find_by_alias(tenant, reference).await?,
        };
        if let Some(session) = &found {
            crate::telemetry::record_session(&session.id);
        }
        Ok(found)
    }

    async fn find_by_alias(
        &self,
        tenant: &TenantId,
        reference: &SessionRef,
    ) -> Result<Option<Session>, EngineError> {
        match reference.alias() {
            // No session is known by a key no session could have been created with.
            Some(alias) if alias.chars().any(char::is_control) => Ok(None),
            Some(alias) => Ok(self.store.find_session_by_alias(tenant, &alias).await?),
            None => Ok(None),
        }
    }

    /// The session a reference names: an agentry id (which must exist), or a client's UUID
    /// or key, which names a new session of `agent_name` (seeded with `seed`) on first
    /// use. `true` when it was created.
    pub async fn session_for_key(
        &self,
        tenant: &TenantId,
        reference: &SessionRef,
        agent_name: &str,
        seed: Vec<HistoryMessage>,
    ) -> Result<(Session, bool), EngineError> {
        if let Some(session) = self.find_session(tenant, reference).await? {
            return Ok((session, false));
        }
        let Some(alias) = reference.alias() else {
            return Err(EngineError::NotFound("session"));
        };
        if alias.is_empty() || alias.len() > 256 || alias.chars().any(char::is_control) {
            return Err(FieldError::new("session_id", "must be 1-256 printable characters").into());
        }
        let config = SessionConfigRequest::default();
        match self
            .insert_session(tenant, agent_name, None, config, seed, Some(alias), None)
            .await
        {
            Ok(session) => Ok((session, true)),
            // Another request created it first.
            Err(EngineError::Store(StoreError::Conflict(_))) => self
                .find_by_alias(tenant, reference)
                .await?
                .map(|session| (session, false))
                .ok_or(EngineError::NotFound("session")),
            Err(e) => Err(e),
        }
    }

    /// The session a client continues with the history it holds (`history`): a new one
    /// seeded with it when `reference` is `None` or names no session yet; else `history`
    /// must be the end of what the session stored, compared as `render` writes messages
    /// (a protocol's own rendering: what it sent is what it gets back).
    pub async fn session_with_history<R>(
        &self,
        tenant: &TenantId,
        reference: Option<&SessionRef>,
        agent_name: &str,
        history: Vec<HistoryMessage>,
        render: impl Fn(&[HistoryMessage]) -> Vec<R>,
    ) -> Result<Session, EngineError>
    where
        R: PartialEq,
    {
        let Some(reference) = reference else {
            let config = SessionConfigRequest::default();
            return self
                .create_session(tenant, agent_name, config, history)
                .await;
        };
        let repeated = (!history.is_empty()).then(|| render(&history));
        let history_len = history.len();
        let (session, created) = self
            .session_for_key(tenant, reference, agent_name, history)
            .await?;
        if let Some(repeated) = repeated.filter(|_| !created) {
            // The stored end the repeated history must match: as many messages, no more.
            let stored = self
                .store
                .list_recent_history(tenant, &session.id, history_len as i64)
                .await?;
            if !render(&stored).ends_with(&repeated) {
                return Err(EngineError::HistoryMismatch);
            }
        }
        Ok(session)
    }

    /// A new session for a request its client may retry with an idempotency key (`keyed`,
    /// in `scope`), as [`Engine::create_session_on_version`]. Its id is derived from the
    /// tenant, scope, key and the request's fingerprint, so a retry sent while the first
    /// request is still being answered finds the first's session (and, there, its turn)
    /// instead of making another: the session of that id when it exists. Another request
    /// with the key gets a session of its own.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_keyed_session(
        &self,
        tenant: &TenantId,
        agent_name: &str,
        version: Option<i64>,
        config: SessionConfigRequest,
        seed: Vec<HistoryMessage>,
        scope: &str,
        keyed: &Idempotency,
    ) -> Result<Session, EngineError> {
        let Idempotency { key, fingerprint } = keyed;
        let digest = self.secrets.mac_hex(
            "keyed-session",
            format!("{tenant}\0{scope}\0{key}\0{fingerprint}").as_bytes(),
        );
        let uuid = uuid::Uuid::parse_str(&digest[..32]).map_err(|e| {
            EngineError::Store(StoreError::Corrupt(format!("a keyed session id: {e}")))
        })?;
        let id = SessionId::from_uuid(uuid);
        if let Ok(session) = self.store.get_session(tenant, &id).await {
            return Ok(session);
        }
        let inserted = self
            .insert_session(tenant, agent_name, version, config, seed, None, Some(id))
            .await;
        match inserted {
            // The first request made it meanwhile.
            Err(EngineError::Store(StoreError::Conflict(_))) => {
                Ok(self.store.get_session(tenant, &id).await?)
            }
            other => other,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn insert_session(
        &self,
        tenant: &TenantId,
        agent_name: &str,
        version: Option<i64>,
        config: SessionConfigRequest,
        seed: Vec<HistoryMessage>,
        alias: Option<String>,
        id: Option<SessionId>,
    ) -> Result<Session, EngineError> {
        let (agent, agent_version) = self
            .agent_for_new_session(tenant, agent_name, version)
            .await?;
        let resolved = agent.resolve_new_session(config)?;
        let max = self.settings.max_seed_messages;
        if seed.len() > max {
            return Err(FieldError::new(
                "messages",
                format!("a new session may bring at most {max} messages of history"),
            )
            .into());
        }
        agent.check_messages(&seed)?;
        let id = id.unwrap_or_else(SessionId::generate);
        let sealed_options = resolved
            .secret_options
            .iter()
            .map(|(name, value)| {
                let sealed = seal_option(&self.secrets, tenant, &id, name, value);
                (name.clone(), sealed)
            })
            .collect();
        let now = crate::model::now();
        let session = Session {
            id,
            tenant_id: *tenant,
            agent: agent.name().to_owned(),
            agent_version,
            server_tools: resolved.server_tools,
            options: resolved.options,
            sealed_options,
            client_tools: resolved.client_tools,
            alias,
            created_at: now,
            updated_at: now,
        };
        let max = self.quotas.of(tenant).limit(Quota::StoredSessions);
        if !self
            .store
            .insert_session(tenant, &session, &seed, max)
            .await?
        {
            return Err(EngineError::QuotaExceeded(QuotaExceeded {
                quota: Quota::StoredSessions,
                limit: max.unwrap_or(0),
                // Nothing frees a place by itself: a hint, not a promise.
                retry_after: 60,
            }));
        }
        crate::telemetry::record_session(&session.id);
        Ok(session)
    }
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
