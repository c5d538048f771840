//! The relay of other processes' commits (PostgreSQL): when another process commits
//! events of a session this process has live followers for, they are read from the log
//! once (one reader per session at a time) and published here.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::fanout::Fanout;
use super::pager::LogPager;
use crate::model::SessionId;
use crate::store::{Committed, Deltas, Store};

/// Failed reads of another process's commit before its session's streams are ended.
const REMOTE_READ_RETRIES: u32 = 5;
/// The pause after a failed read, times the failures so far.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

#[derive(Debug)]
pub(super) struct Relay {
    store: Store,
    fanout: Arc<Fanout>,
    /// The reads in flight, per session, with the last commit each must reach.
    reads: Mutex<HashMap<SessionId, Committed>>,
}

impl Relay {
    pub(super) fn new(store: Store, fanout: Arc<Fanout>) -> Arc<Relay> {
        Arc::new(Relay {
            store,
            fanout,
            reads: Mutex::new(HashMap::new()),
        })
    }

    /// Another process committed events of a session: if this process has subscribers for
    /// it, read them from the log once and send them on (one reader per session at a time).
    pub(super) fn remote_commit(self: &Arc<Self>, committed: Committed) {
        let Some(watched) = self.fanout.watched(&committed.session) else {
            return;
        };
        if watched.last.is_some_and(|last| last >= committed.last) {
            return;
        }
        match self
            .reads
            .lock()
            .expect("remote reads lock")
            .entry(committed.session)
        {
            Entry::Occupied(mut reading) => {
                reading.get_mut().last = reading.get().last.max(committed.last);
                return;
            }
            Entry::Vacant(slot) => {
                slot.insert(committed);
            }
        }
        tokio::spawn(self.clone().read_remote(committed));
    }

    async fn read_remote(self: Arc<Self>, first: Committed) {
        let session = first.session;
        let mut failures = 0;
        loop {
            let wanted = self.reads.lock().expect("remote reads lock")[&session];
            let after = match self.fanout.watched(&session) {
                None => break,
                Some(watched) => match watched.last {
                    Some(last) if last >= wanted.last => {
                        let mut reads = self.reads.lock().expect("remote reads lock");
                        if reads[&session].last <= last {
                            reads.remove(&session);
                            return;
                        }
                        continue;
                    }
                    Some(last) => last,
                    // Subscribers read the log up to where they subscribed: from this
                    // commit on is what they may miss.
                    None => wanted.first - 1,
                },
            };
            let log = LogPager::new(
                self.store.clone(),
                wanted.tenant,
                session,
                None,
                Deltas::AsStreamed,
            );
            match log.page(after).await.map(|page| page.events) {
                Ok(page) if !page.is_empty() => {
                    failures = 0;
                    let events: Vec<_> = page.into_iter().map(Arc::new).collect();
                    self.fanout.publish(&session, &events);
                }
                // Nothing (more) in the log: the session is gone, or the announced events
                // were coalesced into ones already sent.
                Ok(_) => break,
                Err(error) => {
                    failures += 1;
                    tracing::warn!(%error, session_id = %session, "cannot read another process's events");
                    if failures > REMOTE_READ_RETRIES {
                        // Its followers would wait for events that never come: end their
                        // streams, so their clients resume from the log.
                        self.fanout.close(&session);
                        break;
                    }
                    tokio::time::sleep(RETRY_PAUSE * failures).await;
                }
            }
        }
        self.reads
            .lock()
            .expect("remote reads lock")
            .remove(&session);
    }

    /// After missing notifications: every session with subscribers gets its latest event
    /// (subscribers further behind see the gap and read the log).
    pub(super) fn catch_up_all(self: &Arc<Self>) {
        for watched in self.fanout.all_watched() {
            let relay = self.clone();
            tokio::spawn(async move {
                match relay
                    .store
                    .max_event_seq(&watched.tenant, &watched.session)
                    .await
                {
                    Ok(0) => {}
                    Ok(last) => relay.remote_commit(Committed {
                        tenant: watched.tenant,
                        session: watched.session,
                        first: last,
                        last,
                    }),
                    Err(error) => tracing::warn!(%error, "cannot catch up with a session"),
                }
            });
        }
    }
}
