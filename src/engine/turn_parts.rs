//! What a turn uses while it runs and ends, lent by the engine: the turn loop, its tools
//! and its log see these parts, not the engine (whose admission, scheduling and cluster
//! they have no business with).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::catalog::Catalog;
use super::error::EngineError;
use super::histories::Histories;
use super::quotas::QuotaBook;
use super::writer::EventWriter;
use crate::agents::Agent;
use crate::config::ToolsSettings;
use crate::crypto::SecretBox;
use crate::metrics::Metrics;
use crate::model::{Session, Turn, TurnError, TurnId};
use crate::store::Store;
use crate::tools::mcp::McpRegistry;

/// Turns of this process whose `turn_stop` could not be stored, with why they end: ended
/// once the database takes writes again (see `cluster.rs`).
pub(super) type Unended = Mutex<HashMap<TurnId, (Turn, TurnError)>>;

#[derive(Clone, Copy)]
pub(super) struct TurnParts<'a> {
    pub store: &'a Store,
    pub catalog: &'a Catalog,
    pub secrets: &'a SecretBox,
    pub writer: &'a EventWriter,
    /// The client model providers are called with.
    pub http: &'a reqwest::Client,
    pub tools: &'a ToolsSettings,
    pub mcp: &'a Arc<McpRegistry>,
    pub metrics: &'a Metrics,
    pub histories: &'a Histories,
    pub quotas: &'a QuotaBook,
    pub unended: &'a Unended,
}

impl TurnParts<'_> {
    /// The agent the session runs (`None`: no longer available).
    pub async fn agent_of(&self, session: &Session) -> Result<Option<Arc<Agent>>, EngineError> {
        Ok(self.catalog.agent_of(self.store, session).await?)
    }

    /// A turn of this process whose end could not be stored: ended later, with `reason`.
    pub fn end_later(&self, turn: &Turn, reason: TurnError) {
        self.unended
            .lock()
            .expect("unended lock")
            .insert(turn.id, (turn.clone(), reason));
    }
}
