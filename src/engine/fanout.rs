//! Live delivery: one broadcast channel per session with subscribers, fed after commit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::model::{Event, SessionId};

/// Per-session broadcast of committed events. A subscriber that falls more than `capacity`
/// events behind is told it lagged and reads the log instead, so memory stays bounded.
#[derive(Debug)]
pub struct Fanout {
    capacity: usize,
    channels: Mutex<HashMap<SessionId, broadcast::Sender<Arc<Event>>>>,
}

impl Fanout {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            channels: Mutex::new(HashMap::new()),
        }
    }

    pub fn subscribe(&self, session: &SessionId) -> broadcast::Receiver<Arc<Event>> {
        let mut channels = self.channels.lock().expect("fanout lock");
        channels
            .entry(session.clone())
            .or_insert_with(|| broadcast::channel(self.capacity).0)
            .subscribe()
    }

    /// Closes the session's channel: its followers' streams end.
    pub fn close(&self, session: &SessionId) {
        self.channels.lock().expect("fanout lock").remove(session);
    }

    /// Sends committed events to the session's subscribers, if it has any.
    pub fn publish(&self, session: &SessionId, events: &[Arc<Event>]) {
        let mut channels = self.channels.lock().expect("fanout lock");
        let Some(sender) = channels.get(session) else {
            return;
        };
        if sender.receiver_count() == 0 {
            channels.remove(session);
            return;
        }
        for event in events {
            let _ = sender.send(event.clone());
        }
    }
}
