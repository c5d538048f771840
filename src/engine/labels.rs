//! A turn's own reads: the history it recorded, and its labels: a JSON object a client
//! attaches to a turn (or to a session) and reads back with it. The engine keeps labels and never interprets
//! them; a face stores there what its protocol's request names that a turn does not (a
//! caller's metadata, how the request asked to be answered).

use serde_json::{Map, Value};

use super::error::{EngineError, not_found};
use super::runner::Engine;
use crate::model::{HistoryMessage, SessionId, TenantId, TurnId};
use crate::store::Labelled;

impl Engine {
    /// Attaches `labels` to the tenant's turn, replacing any it had.
    pub async fn set_turn_labels(
        &self,
        tenant: &TenantId,
        turn: &TurnId,
        labels: &Map<String, Value>,
    ) -> Result<(), EngineError> {
        self.set_labels(tenant, Labelled::Turn(*turn), labels).await
    }

    /// The labels attached to the tenant's turn (empty when none were).
    pub async fn turn_labels(
        &self,
        tenant: &TenantId,
        turn: &TurnId,
    ) -> Result<Map<String, Value>, EngineError> {
        self.labels(tenant, Labelled::Turn(*turn)).await
    }

    /// Attaches `labels` to the tenant's session, replacing any it had.
    pub async fn set_session_labels(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        labels: &Map<String, Value>,
    ) -> Result<(), EngineError> {
        self.set_labels(tenant, Labelled::Session(*session), labels)
            .await
    }

    /// The labels attached to the tenant's session (empty when none were).
    pub async fn session_labels(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Map<String, Value>, EngineError> {
        self.labels(tenant, Labelled::Session(*session)).await
    }

    async fn set_labels(
        &self,
        tenant: &TenantId,
        of: Labelled,
        labels: &Map<String, Value>,
    ) -> Result<(), EngineError> {
        let text = Value::Object(labels.clone()).to_string();
        self.store
            .set_labels(tenant, of, &text)
            .await
            .map_err(|e| not_found(e, of.kind()))
    }

    async fn labels(
        &self,
        tenant: &TenantId,
        of: Labelled,
    ) -> Result<Map<String, Value>, EngineError> {
        let text = self
            .store
            .get_labels(tenant, of)
            .await
            .map_err(|e| not_found(e, of.kind()))?;
        Ok(text
            .and_then(|t| serde_json::from_str::<Map<String, Value>>(&t).ok())
            .unwrap_or_default())
    }

    /// The full-history messages a turn recorded: the user messages and tool results it
    /// brought, and what the agent wrote, in order.
    pub async fn turn_history(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn: &TurnId,
    ) -> Result<Vec<HistoryMessage>, EngineError> {
        Ok(self.store.list_turn_history(tenant, session, turn).await?)
    }
}
