//! Recently active sessions kept in memory: the session's row and its history, so that a
//! turn in steady state reads neither. The full history is append-only, so what was read
//! stays true; what may have changed since is checked where it costs nothing:
//!
//! - admission commits the turn only if the session's row, its compaction point and its
//!   history length are still those remembered (one condition of the turn's own `INSERT`);
//!   a mismatch (another process's turn, compaction or change) drops the entry and the
//!   turn is admitted again from the database;
//! - while a turn runs, no one else writes its session's history (one active turn per
//!   session, enforced by the database), so the entry admission checked stays exact if the
//!   turn adds what it makes durable, and its model steps read nothing;
//! - an entry admission did not check is brought up to date by reading only the messages
//!   after it (the compacted overlay again only when the compaction point moved); a session
//!   not remembered at all is read whole, or, for a provider that reads only the end of
//!   the history, from its last user message on, the rest measured by the database.
//!
//! Bounded by `engine.history_cache_kib` of message text over all sessions; the least
//! recently used sessions go first, and a history larger than a quarter of it is not kept.
//! A session whose provider reads only the end of its history (from the last user message
//! on, the echo) keeps only that end, with the whole history's length and size: a turn's
//! work then does not grow with the session, and many long sessions fit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::input::{PendingCall, pending_tool_calls};
use crate::model::{HistoryMessage, Session, SessionId, TenantId, TurnId, json_len};
use crate::store::{Remembered, Store, StoreError};

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

/// A session as last read or written.
#[derive(Debug)]
struct Cached {
    /// The session's row, as the last turn ran with it.
    session: Session,
    /// The full history from position `from` on (shared with the model requests made from
    /// it), and each message's JSON length.
    full: Vec<Arc<HistoryMessage>>,
    sizes: Vec<usize>,
    from: usize,
    /// The JSON length of the whole full history, and of what `full` keeps of it.
    full_bytes: usize,
    kept_bytes: usize,
    through: Option<i64>,
    overlay: Vec<Arc<HistoryMessage>>,
    overlay_bytes: usize,
    /// The turn for which this is known to be the whole history: its admission checked it,
    /// or it read it, and it adds what it writes.
    exact_for: Option<TurnId>,
    /// Only the end of the history is kept, from its last user message on (never while a
    /// compaction overlay stands for part of it).
    tail_only: bool,
}

/// The compacted history as a model request carries it.
#[derive(Debug, Clone, Default)]
pub struct ModelHistory {
    /// All of it, or only its end from the last user message on (for a provider that reads
    /// no more).
    pub messages: Vec<Arc<HistoryMessage>>,
    /// The JSON length of all of it, whatever `messages` holds.
    pub chars: usize,
}

impl ModelHistory {
    /// The whole history, measured.
    pub fn whole(messages: Vec<Arc<HistoryMessage>>) -> Self {
        let chars = size_of(&messages);
        ModelHistory { messages, chars }
    }
}

impl Cached {
    fn new(session: Session) -> Self {
        Cached {
            session,
            full: Vec::new(),
            sizes: Vec::new(),
            from: 0,
            full_bytes: 0,
            kept_bytes: 0,
            through: None,
            overlay: Vec::new(),
            overlay_bytes: 0,
            exact_for: None,
            tail_only: false,
        }
    }

    /// The full history's length in messages.
    fn len(&self) -> usize {
        self.from + self.full.len()
    }

    /// What the entry counts against the budget: its messages' text, and a fixed share for
    /// the session's row and the entry itself, so many small sessions are bounded too.
    fn bytes(&self) -> usize {
        ENTRY_BYTES + self.kept_bytes + self.overlay_bytes
    }

    /// The compacted history: the overlay, then the full history after what it stands for
    /// (pointers copied, not messages); only the kept end when `tail_only`.
    fn compacted(&self) -> ModelHistory {
        let after = self.through.map_or(0, |t| (t + 1).max(0) as usize);
        debug_assert!(
            after == 0 || self.from == 0,
            "a compacted history is kept whole"
        );
        let skip = after.saturating_sub(self.from);
        let mut messages = self.overlay.clone();
        messages.extend(self.full.iter().skip(skip).cloned());
        let skipped: usize = self.sizes[..skip.min(self.sizes.len())].iter().sum();
        ModelHistory {
            messages,
            chars: self.overlay_bytes + self.full_bytes - skipped,
        }
    }

    fn extend(&mut self, messages: Vec<HistoryMessage>) {
        for message in messages {
            let size = json_len(&message);
            self.full_bytes += size;
            self.kept_bytes += size;
            self.sizes.push(size);
            self.full.push(Arc::new(message));
        }
        self.trim();
    }

    /// Drops what a `tail_only` entry no longer needs: the messages before the last user
    /// message.
    fn trim(&mut self) {
        if !self.tail_only || self.through.is_some() {
            return;
        }
        let Some(last_user) = self
            .full
            .iter()
            .rposition(|m| matches!(**m, HistoryMessage::User { .. }))
        else {
            return;
        };
        if last_user > 0 {
            self.full.drain(..last_user);
            self.kept_bytes -= self.sizes.drain(..last_user).sum::<usize>();
            self.from += last_user;
        }
    }
}

/// The share of the budget an entry takes besides its messages.
const ENTRY_BYTES: usize = 512;

/// What admission may use instead of reading the database, and what its `INSERT` checks.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub session: Session,
    /// The tool calls the history leaves unanswered.
    pub pending: Vec<PendingCall>,
    pub remembered: Remembered,
    /// The full history's size: its messages' JSON text, in bytes.
    pub history_bytes: u64,
}

/// The messages' JSON text length.
fn size_of<M: std::borrow::Borrow<HistoryMessage>>(messages: &[M]) -> usize {
    messages.iter().map(|m| json_len(m.borrow())).sum()
}

impl Histories {
    pub fn new(budget_bytes: usize) -> Self {
        Self {
            budget: budget_bytes,
            state: Mutex::new(State::default()),
        }
    }

    /// The session as remembered, for a turn's admission; `None` when it is not.
    pub fn snapshot(&self, tenant: &TenantId, session: &SessionId) -> Option<Snapshot> {
        let state = self.state.lock().expect("histories lock");
        let entry = state.entries.get(session).filter(|e| e.tenant == *tenant)?;
        let cached = &entry.history;
        let row = cached.session.clone();
        // Calls can only be pending after the last user message.
        let from = cached
            .full
            .iter()
            .rposition(|m| matches!(**m, HistoryMessage::User { .. }))
            .unwrap_or(0);
        Some(Snapshot {
            remembered: Remembered {
                updated_at: row.updated_at,
                history_len: cached.len() as i64,
                compacted_through: cached.through,
            },
            pending: pending_tool_calls(&cached.full[from..]),
            history_bytes: cached.full_bytes as u64,
            session: row,
        })
    }

    /// A turn was admitted on `snapshot` with `input` and the session as `session`: the
    /// entry is that turn's whole history, if nothing moved it since the snapshot.
    pub fn admitted(
        &self,
        turn: &TurnId,
        snapshot: &Snapshot,
        session: &Session,
        input: Vec<HistoryMessage>,
    ) {
        let remembered = &snapshot.remembered;
        self.change(&session.id, |cached| {
            let unmoved = cached.len() as i64 == remembered.history_len
                && cached.through == remembered.compacted_through;
            if unmoved {
                cached.extend(input);
                cached.session = session.clone();
                cached.exact_for = Some(*turn);
            }
            unmoved
        });
    }

    /// Messages `turn` made durable in its session's history.
    pub fn added(&self, turn: &TurnId, session: &SessionId, messages: Vec<HistoryMessage>) {
        self.change(session, |cached| {
            // Another turn's entry is not this turn's to extend; a later read fills it.
            if cached.exact_for == Some(*turn) {
                cached.extend(messages);
            }
            true
        });
    }

    /// Changes a session's entry in place, keeping the budget; `change` returning false
    /// drops the entry.
    fn change(&self, session: &SessionId, change: impl FnOnce(&mut Cached) -> bool) {
        let mut state = self.state.lock().expect("histories lock");
        let Some(entry) = state.entries.get_mut(session) else {
            return;
        };
        let before = entry.history.bytes();
        let keep = change(&mut entry.history);
        let after = entry.history.bytes();
        state.bytes = state.bytes - before + after;
        if keep {
            self.evict(&mut state, session);
        } else if let Some(gone) = state.entries.remove(session) {
            state.bytes -= gone.history.bytes();
        }
    }

    /// Drops what is remembered of a session.
    pub fn forget(&self, session: &SessionId) {
        let mut state = self.state.lock().expect("histories lock");
        if let Some(gone) = state.entries.remove(session) {
            state.bytes -= gone.history.bytes();
        }
    }

    /// The compacted history `turn` feeds its model, read from the database only where
    /// the entry is not known to be exact. One turn of a session runs at a time, so the
    /// entry is taken out while it is read. `tail_only`: the model reads only the end of
    /// the history, from its last user message on (the entry then keeps no more).
    pub async fn compacted(
        &self,
        store: &Store,
        session: &Session,
        turn: &TurnId,
        tail_only: bool,
    ) -> Result<ModelHistory, StoreError> {
        let (tenant, id) = (&session.tenant_id, &session.id);
        let known = self
            .take(tenant, id)
            .filter(|known| known.tail_only == (tail_only && known.through.is_none()));
        let mut fresh = known.is_none();
        let mut cached = match known {
            Some(mut known) if known.exact_for == Some(*turn) => {
                known.trim();
                let messages = known.compacted();
                self.put(tenant, id, known);
                return Ok(messages);
            }
            Some(known) => known,
            // Only the end is needed: what comes before it is measured, not read.
            None if tail_only => {
                let tail = store.list_history_tail(tenant, id).await?;
                if tail.compacted_through.is_none() {
                    let mut cached = Cached::new(session.clone());
                    cached.tail_only = true;
                    cached.from = tail.from as usize;
                    cached.full_bytes = tail.bytes_before as usize;
                    cached.extend(tail.messages);
                    cached.exact_for = Some(*turn);
                    let messages = cached.compacted();
                    self.put(tenant, id, cached);
                    return Ok(messages);
                }
                Cached::new(session.clone())
            }
            None => Cached::new(session.clone()),
        };
        let from = cached.len() as i64;
        let (mut through, mut added) = store.list_history_since(tenant, id, from).await?;
        if through.is_some() && cached.from > 0 {
            // Compacted meanwhile: what the overlay leaves of the full history may start
            // before what the entry kept.
            cached = Cached::new(session.clone());
            fresh = true;
            (through, added) = store.list_history_since(tenant, id, 0).await?;
        }
        cached.tail_only = tail_only && through.is_none();
        if fresh || cached.through != through {
            cached.overlay = match through {
                None => Vec::new(),
                Some(_) => store
                    .list_compaction_overlay(tenant, id)
                    .await?
                    .into_iter()
                    .map(Arc::new)
                    .collect(),
            };
            cached.overlay_bytes = size_of(&cached.overlay);
            cached.through = through;
        }
        cached.extend(added);
        cached.session = session.clone();
        cached.exact_for = Some(*turn);
        let messages = cached.compacted();
        self.put(tenant, id, cached);
        Ok(messages)
    }

    fn take(&self, tenant: &TenantId, session: &SessionId) -> Option<Cached> {
        let mut state = self.state.lock().expect("histories lock");
        let entry = state.entries.remove(session)?;
        state.bytes -= entry.history.bytes();
        (entry.tenant == *tenant).then_some(entry.history)
    }

    fn put(&self, tenant: &TenantId, session: &SessionId, cached: Cached) {
        let mut state = self.state.lock().expect("histories lock");
        state.bytes += cached.bytes();
        let entry = Entry {
            tenant: *tenant,
            history: cached,
            used: 0,
        };
        if let Some(replaced) = state.entries.insert(*session, entry) {
            state.bytes -= replaced.history.bytes();
        }
        self.evict(&mut state, session);
    }

    /// Evicts the least recently used entries (never `keep`) until within the budget;
    /// `keep` itself goes if it alone is over a quarter of it.
    fn evict(&self, state: &mut State, keep: &SessionId) {
        if state
            .entries
            .get(keep)
            .is_some_and(|e| e.history.bytes() > self.budget / 4)
        {
            let gone = state.entries.remove(keep).expect("present");
            state.bytes -= gone.history.bytes();
        }
        while state.bytes > self.budget {
            let Some(oldest) = state
                .entries
                .iter()
                .filter(|(id, _)| *id != keep)
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
        let clock = state.clock;
        if let Some(entry) = state.entries.get_mut(keep) {
            entry.used = clock;
        }
    }
}

#[cfg(test)]
mod tests;
