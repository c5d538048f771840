//! What admission reads and checks besides the session itself: the turn an idempotency key
//! already started, the calls the history leaves pending, and the overrides a turn makes to
//! its session.

use crate::agents::SessionConfigRequest;
use crate::config::{HistoryType, OptionKind};
use crate::engine::error::EngineError;
use crate::engine::input::{PendingCall, pending_tool_calls};
use crate::engine::request::{Idempotency, scoped_key};
use crate::engine::runner::Engine;
use crate::engine::sessions::seal_option;
use crate::model::{HistoryMessage, Session, SessionId, TenantId, Turn};

impl Engine {
    /// The tenant's latest turn a client started with `key` in `scope`, in any session.
    pub async fn find_turn_by_key(
        &self,
        tenant: &TenantId,
        scope: &str,
        key: &str,
    ) -> Result<Option<Turn>, EngineError> {
        // No turn is known by a key no request could have been admitted with.
        if key.chars().any(char::is_control) {
            return Ok(None);
        }
        Ok(self
            .store
            .find_latest_turn_by_key(tenant, &scoped_key(scope, key))
            .await?)
    }

    /// The tenant's turn a client started with `keyed`'s key in `scope` (in any session),
    /// if this request (its fingerprint) is the one that started it; `IdempotencyMismatch`
    /// when another request used the key. For faces whose retry may not name the session.
    pub async fn retried_turn(
        &self,
        tenant: &TenantId,
        scope: &str,
        keyed: &Idempotency,
    ) -> Result<Option<Turn>, EngineError> {
        let Some(turn) = self.find_turn_by_key(tenant, scope, &keyed.key).await? else {
            return Ok(None);
        };
        if turn.request_hash.as_deref() == Some(self.fingerprint_hash(&keyed.fingerprint).as_str())
        {
            Ok(Some(turn))
        } else {
            Err(EngineError::IdempotencyMismatch)
        }
    }

    /// Tool calls still unanswered. They can only follow the last user message, so the tail
    /// of the history usually answers; the whole history is read when it does not.
    pub async fn pending_tool_calls(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Vec<PendingCall>, EngineError> {
        const TAIL: i64 = 8;
        let tail = self
            .store
            .list_recent_history(tenant, session, TAIL)
            .await?;
        let has_user = tail
            .iter()
            .any(|m| matches!(m, HistoryMessage::User { .. }));
        if has_user || (tail.len() as i64) < TAIL {
            return Ok(pending_tool_calls(&tail));
        }
        let history = self
            .store
            .list_history(tenant, session, HistoryType::Full)
            .await?;
        Ok(pending_tool_calls(&history))
    }

    /// The turn an idempotency key already started, if the request is the same one.
    pub(super) async fn earlier_turn(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        idempotency: &Idempotency,
    ) -> Result<Option<Turn>, EngineError> {
        match self
            .store
            .find_turn_by_idempotency_key(tenant, session, &idempotency.key)
            .await?
        {
            Some(turn)
                if turn.request_hash.as_deref()
                    == Some(self.request_hash(idempotency).as_str()) =>
            {
                Ok(Some(turn))
            }
            Some(_) => Err(EngineError::IdempotencyMismatch),
            None => Ok(None),
        }
    }

    /// What a turn stores to tell a retry from another request: the request's digest keyed
    /// with the secrets key, so the database holds no guessing oracle for what a request
    /// carried (secret options included).
    pub(super) fn request_hash(&self, idempotency: &Idempotency) -> String {
        self.fingerprint_hash(&idempotency.fingerprint)
    }

    fn fingerprint_hash(&self, fingerprint: &str) -> String {
        self.secrets.mac_hex("turn-request", fingerprint.as_bytes())
    }

    /// The session as the turn's overrides leave it, or `None` if they change nothing.
    pub(super) fn apply_overrides(
        &self,
        agent: &crate::agents::Agent,
        session: &Session,
        overrides: &SessionConfigRequest,
    ) -> Result<Option<Session>, EngineError> {
        if overrides.server_tools.is_none()
            && overrides.options.is_empty()
            && overrides.client_tools.is_none()
        {
            return Ok(None);
        }
        let mut updated = session.clone();
        if let Some(tools) = &overrides.server_tools {
            agent.check_server_tools(tools)?;
            updated.server_tools = tools.clone();
        }
        for (name, value) in &overrides.options {
            match agent.check_option(name, value)? {
                // A secret as a read showed it: the stored one stays.
                OptionKind::Secret
                    if value == crate::agents::REDACTED
                        && session.sealed_options.contains_key(name) => {}
                OptionKind::Secret if value == crate::agents::REDACTED => {
                    return Err(crate::model::FieldError::new(
                        format!("agent.options.{name}"),
                        format!(
                            "`{}` keeps a stored secret, and this session has none: send the \
                             value itself",
                            crate::agents::REDACTED
                        ),
                    )
                    .into());
                }
                OptionKind::Secret => {
                    let sealed =
                        seal_option(&self.secrets, &session.tenant_id, &session.id, name, value);
                    updated.options.remove(name);
                    updated.sealed_options.insert(name.clone(), sealed);
                }
                OptionKind::Text | OptionKind::Select => {
                    updated.sealed_options.remove(name);
                    updated.options.insert(name.clone(), value.clone());
                }
            }
        }
        if let Some(tools) = &overrides.client_tools {
            agent.check_client_tools(tools)?;
            updated.client_tools = tools.clone();
        }
        updated.updated_at = crate::model::now();
        Ok(Some(updated))
    }
}
