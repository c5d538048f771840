//! Reading a session's log in pages of bounded size. Every reader of the log goes through
//! here: followers replaying before they go live, a run's replay, a turn's durable events,
//! and the reads of other processes' commits.

use crate::model::{Event, RunId, SessionId, TenantId, TurnId};
use crate::store::{Deltas, Store, StoreError};

/// Events read per query.
pub(super) const PAGE: i64 = 1000;

/// One session's log (or one turn's part of it), as one kind of reader wants its deltas.
#[derive(Debug, Clone)]
pub(super) struct LogPager {
    store: Store,
    tenant: TenantId,
    session: SessionId,
    turn: Option<TurnId>,
    /// Only the events of this run's turns (one read for all of them).
    run: Option<RunId>,
    deltas: Deltas,
}

/// One page: its events, and whether the log may hold more after them.
pub(super) struct Page {
    pub events: Vec<Event>,
    pub more: bool,
}

impl LogPager {
    pub(super) fn new(
        store: Store,
        tenant: TenantId,
        session: SessionId,
        turn: Option<TurnId>,
        deltas: Deltas,
    ) -> Self {
        Self {
            store,
            tenant,
            session,
            turn,
            run: None,
            deltas,
        }
    }

    /// The events of a run's turns.
    pub(super) fn of_run(
        store: Store,
        tenant: TenantId,
        session: SessionId,
        run: RunId,
        deltas: Deltas,
    ) -> Self {
        Self {
            store,
            tenant,
            session,
            turn: None,
            run: Some(run),
            deltas,
        }
    }

    /// The events with a seq greater than `after`, at most a page of them.
    pub(super) async fn page(&self, after: i64) -> Result<Page, StoreError> {
        let events = match &self.run {
            Some(run) => {
                self.store
                    .list_run_events(&self.tenant, &self.session, run, after, PAGE, self.deltas)
                    .await?
            }
            None => {
                self.store
                    .list_events(
                        &self.tenant,
                        &self.session,
                        self.turn.as_ref(),
                        after,
                        PAGE,
                        self.deltas,
                    )
                    .await?
            }
        };
        let more = events.len() as i64 >= PAGE;
        Ok(Page { events, more })
    }

    /// Every event with a seq greater than `after`, page by page.
    pub(super) async fn all_after(&self, mut after: i64) -> Result<Vec<Event>, StoreError> {
        let mut events = Vec::new();
        loop {
            let page = self.page(after).await?;
            after = page.events.last().map_or(after, |last| last.seq);
            events.extend(page.events);
            if !page.more {
                return Ok(events);
            }
        }
    }
}
