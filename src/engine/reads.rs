//! What faces read of a tenant's data, through the engine: sessions, turns, the log, the
//! history, runs, files and usage. Each read filters on the tenant; a store `NotFound`
//! comes back as `EngineError::Store(StoreError::NotFound)`, for the face to name what was
//! missing in its own error shape.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::error::EngineError;
use super::runner::Engine;
use crate::config::HistoryType;
use crate::model::{
    Event, FileId, HistoryMessage, RunId, Session, SessionId, TenantId, Turn, TurnId,
};
use crate::store::{
    DayUsage, Deltas, ListedRun, Page, RunCursor, RunFilter, RunMessage, StoredFile,
};

impl Engine {
    pub async fn get_session(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Session, EngineError> {
        Ok(self.store.get_session(tenant, session).await?)
    }

    /// A page of the tenant's sessions, and whether more follow.
    pub async fn list_sessions(
        &self,
        tenant: &TenantId,
        page: Page,
    ) -> Result<(Vec<Session>, bool), EngineError> {
        Ok(self.store.list_sessions(tenant, page).await?)
    }

    pub async fn get_turn(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn: &TurnId,
    ) -> Result<Turn, EngineError> {
        Ok(self.store.get_turn(tenant, session, turn).await?)
    }

    /// The tenant's turn, in whichever session.
    pub async fn find_turn(
        &self,
        tenant: &TenantId,
        turn: &TurnId,
    ) -> Result<Option<Turn>, EngineError> {
        Ok(self.store.find_turn(tenant, turn).await?)
    }

    /// A page of a session's turns, and whether more follow.
    pub async fn list_turns(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        page: Page,
    ) -> Result<(Vec<Turn>, bool), EngineError> {
        Ok(self.store.list_turns(tenant, session, page).await?)
    }

    /// Up to `limit` events of the session's log (or of one turn) after `after`.
    pub async fn list_events(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        turn: Option<&TurnId>,
        after: i64,
        limit: i64,
        deltas: Deltas,
    ) -> Result<Vec<Event>, EngineError> {
        Ok(self
            .store
            .list_events(tenant, session, turn, after, limit, deltas)
            .await?)
    }

    /// A page of the history from `offset`, within `max_bytes`, and whether more follow.
    pub async fn history_page(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        kind: HistoryType,
        offset: i64,
        limit: i64,
        max_bytes: u64,
    ) -> Result<(Vec<HistoryMessage>, bool), EngineError> {
        Ok(self
            .store
            .list_history_page_within(tenant, session, kind, offset, limit, max_bytes)
            .await?)
    }

    /// How many messages the session's history holds, and their bytes.
    pub async fn history_size(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<(u64, u64), EngineError> {
        Ok(self.store.history_size(tenant, session).await?)
    }

    /// One message of the history by position, with when it was stored.
    pub async fn history_entry(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        position: i64,
    ) -> Result<Option<(HistoryMessage, DateTime<Utc>)>, EngineError> {
        Ok(self
            .store
            .get_history_entry(tenant, session, position)
            .await?)
    }

    /// A page of the tenant's runs (keyset by `cursor`), and how many match the filter.
    pub async fn list_runs(
        &self,
        tenant: &TenantId,
        filter: &RunFilter,
        cursor: Option<RunCursor>,
        limit: u32,
    ) -> Result<(Vec<ListedRun>, i64), EngineError> {
        Ok(self.store.list_runs(tenant, filter, cursor, limit).await?)
    }

    /// The messages of a run's turns, in order, each with its turn.
    pub async fn run_messages(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        run: &RunId,
    ) -> Result<Vec<RunMessage>, EngineError> {
        Ok(self.store.list_run_history(tenant, session, run).await?)
    }

    pub async fn get_file(
        &self,
        tenant: &TenantId,
        id: &FileId,
    ) -> Result<StoredFile, EngineError> {
        Ok(self.store.get_file(tenant, id).await?)
    }

    /// The tenant's usage per day in `[from, to)`.
    pub async fn usage_by_day(
        &self,
        tenant: &TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DayUsage>, EngineError> {
        Ok(self.store.usage_by_day(tenant, from, to).await?)
    }

    /// The tokens the tenant's turns used since `from`.
    pub async fn tokens_since(
        &self,
        tenant: &TenantId,
        from: DateTime<Utc>,
    ) -> Result<u64, EngineError> {
        Ok(self.store.tokens_since(tenant, from).await?)
    }

    pub async fn count_sessions(&self, tenant: &TenantId) -> Result<u64, EngineError> {
        Ok(self.store.count_sessions(tenant).await?)
    }

    /// How long one call may wait for the database (a request's budget for its reads).
    pub fn database_timeout(&self) -> Duration {
        self.store.timeout()
    }

    /// The database pools' connections: name, in use, idle.
    pub fn pool_connections(&self) -> Vec<(&'static str, u32, u32)> {
        self.store.pool_connections()
    }

    /// See [`crate::store::Store::committed_writes`].
    pub fn committed_writes(&self) -> Option<(u64, u64)> {
        self.store.committed_writes()
    }
}
