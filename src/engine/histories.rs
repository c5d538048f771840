//! The histories of recently active sessions, kept in memory so that a turn reads only the
//! messages added since the last one: the full history is append-only, so what was read
//! stays true, and the compacted overlay is read again only when the position it stands
//! for moves (another process's compaction included).
//!
//! Bounded by `engine.history_cache_kib` of message text over all sessions; the least
//! recently used sessions go first, and a history larger than a quarter of it is not kept.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::model::{HistoryMessage, SessionId, TenantId};
use crate::store::{Store, StoreError};

#[derive(Debug)]
pub struct Histories {
    budget: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<SessionId, Entry>,
    bytes: usize,
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    tenant: TenantId,
    history: Cached,
    used: u64,
}

/// A session's history as last read.
#[derive(Debug)]
struct Cached {
    full: Vec<HistoryMessage>,
    full_bytes: usize,
    through: Option<i64>,
    overlay: Vec<HistoryMessage>,
    overlay_bytes: usize,
}

impl Cached {
    fn bytes(&self) -> usize {
        self.full_bytes + self.overlay_bytes
    }

    /// The compacted history: the overlay, then the full history after what it stands for.
    fn compacted(&self) -> Vec<HistoryMessage> {
        let after = self.through.map_or(0, |t| (t + 1).max(0) as usize);
        let mut messages = self.overlay.clone();
        messages.extend(self.full.iter().skip(after).cloned());
        messages
    }
}

fn size_of(messages: &[HistoryMessage]) -> usize {
    messages
        .iter()
        .map(|m| serde_json::to_vec(m).map_or(0, |v| v.len()))
        .sum()
}

impl Histories {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            budget: budget_bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// The session's compacted history, reading only what was added since the last call.
    /// One turn of a session runs at a time, so the entry is taken out while it is read.
    pub async fn compacted(
        &self,
        store: &Store,
        tenant: &TenantId,
        session: &SessionId,
    ) -> Result<Vec<HistoryMessage>, StoreError> {
        let known = self.take(tenant, session);
        let fresh = known.is_none();
        let from = known.as_ref().map_or(0, |k| k.full.len() as i64);
        let (through, added) = store.list_history_since(tenant, session, from).await?;
        let mut cached = match known {
            Some(known) => known,
            None => Cached {
                full: Vec::new(),
                full_bytes: 0,
                through: None,
                overlay: Vec::new(),
                overlay_bytes: 0,
            },
        };
        if fresh || cached.through != through {
            cached.overlay = match through {
                None => Vec::new(),
                Some(_) => store.list_compaction_overlay(tenant, session).await?,
            };
            cached.overlay_bytes = size_of(&cached.overlay);
            cached.through = through;
        }
        cached.full_bytes += size_of(&added);
        cached.full.extend(added);
        let messages = cached.compacted();
        self.put(tenant, session, cached);
        Ok(messages)
    }

    fn take(&self, tenant: &TenantId, session: &SessionId) -> Option<Cached> {
        let mut state = self.state.lock().expect("histories lock");
        let entry = state.entries.remove(session)?;
        state.bytes -= entry.history.bytes();
        (entry.tenant == *tenant).then_some(entry.history)
    }

    fn put(&self, tenant: &TenantId, session: &SessionId, cached: Cached) {
        if cached.bytes() > self.budget / 4 {
            return;
        }
        let mut state = self.state.lock().expect("histories lock");
        while state.bytes + cached.bytes() > self.budget {
            let Some(oldest) = state
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(id, _)| *id)
            else {
                break;
            };
            if let Some(old) = state.entries.remove(&oldest) {
                state.bytes -= old.history.bytes();
            }
        }
        state.clock += 1;
        let used = state.clock;
        state.bytes += cached.bytes();
        state.entries.insert(
            *session,
            Entry {
                tenant: *tenant,
                history: cached,
                used,
            },
        );
    }
}
