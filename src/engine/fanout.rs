//! Live delivery: one broadcast channel per session with subscribers, fed after commit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use crate::metrics::{GaugeGuard, Metrics};
use crate::model::{Event, SessionId, TenantId};

/// Per-session broadcast of committed events. A subscriber that falls more than `capacity`
/// events behind is told it lagged and reads the log instead, so memory stays bounded. A
/// session's channel lives while it has subscribers.
#[derive(Debug)]
pub struct Fanout {
    capacity: usize,
    channels: Mutex<HashMap<SessionId, Channel>>,
    metrics: Arc<Metrics>,
}

#[derive(Debug)]
struct Channel {
    sender: broadcast::Sender<Arc<Event>>,
    tenant: TenantId,
    /// The last seq sent: events are sent once each, in order, whichever process wrote them.
    last: Option<i64>,
}

impl Channel {
    fn watched(&self, session: &SessionId) -> Watched {
        Watched {
            tenant: self.tenant,
            session: *session,
            last: self.last,
        }
    }
}

/// A session with live subscribers, and the last seq they were sent.
#[derive(Debug, Clone, Copy)]
pub struct Watched {
    pub tenant: TenantId,
    pub session: SessionId,
    pub last: Option<i64>,
}

/// One subscriber of a session's events; the session's channel goes with its last one.
#[derive(Debug)]
pub struct Subscription {
    receiver: Option<broadcast::Receiver<Arc<Event>>>,
    fanout: Arc<Fanout>,
    session: SessionId,
    /// Counts it among the live subscribers while it lives.
    _counted: GaugeGuard,
}

impl Subscription {
    pub async fn recv(&mut self) -> Result<Arc<Event>, RecvError> {
        match self.receiver.as_mut() {
            Some(receiver) => receiver.recv().await,
            None => Err(RecvError::Closed),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Under the map's lock, so a concurrent subscribe either counts or comes after.
        let mut channels = self.fanout.channels.lock().expect("fanout lock");
        drop(self.receiver.take());
        if channels
            .get(&self.session)
            .is_some_and(|channel| channel.sender.receiver_count() == 0)
        {
            channels.remove(&self.session);
        }
    }
}

impl Fanout {
    pub fn new(capacity: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            capacity,
            channels: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    pub fn subscribe(self: &Arc<Self>, tenant: &TenantId, session: &SessionId) -> Subscription {
        let mut channels = self.channels.lock().expect("fanout lock");
        let receiver = channels
            .entry(*session)
            .or_insert_with(|| Channel {
                sender: broadcast::channel(self.capacity).0,
                tenant: *tenant,
                last: None,
            })
            .sender
            .subscribe();
        Subscription {
            receiver: Some(receiver),
            fanout: self.clone(),
            session: *session,
            _counted: self.metrics.live_subscriber(),
        }
    }

    /// Closes the session's channel: its followers' streams end.
    pub fn close(&self, session: &SessionId) {
        self.channels.lock().expect("fanout lock").remove(session);
    }

    /// Sends committed events to the session's subscribers, if it has any: those after the
    /// last sent, so an event read back from the log after another process wrote it is
    /// not sent twice.
    pub fn publish(&self, session: &SessionId, events: &[Arc<Event>]) {
        let mut channels = self.channels.lock().expect("fanout lock");
        let Some(channel) = channels.get_mut(session) else {
            return;
        };
        for event in events {
            if channel.last.is_some_and(|last| event.seq <= last) {
                continue;
            }
            channel.last = Some(event.seq);
            let _ = channel.sender.send(event.clone());
        }
    }

    /// The session's subscribers' place, if it has any.
    pub fn watched(&self, session: &SessionId) -> Option<Watched> {
        let channels = self.channels.lock().expect("fanout lock");
        channels
            .get(session)
            .map(|channel| channel.watched(session))
    }

    /// Every session with subscribers.
    pub fn all_watched(&self) -> Vec<Watched> {
        let channels = self.channels.lock().expect("fanout lock");
        channels
            .iter()
            .map(|(session, channel)| channel.watched(session))
            .collect()
    }

    /// How many sessions have a channel now.
    pub fn channel_count(&self) -> usize {
        self.channels.lock().expect("fanout lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sessions_channel_goes_with_its_last_subscriber() {
        let fanout = Arc::new(Fanout::new(8, Metrics::new(false)));
        let tenant = TenantId::generate();
        let sessions: Vec<SessionId> = (0..100).map(|_| SessionId::generate()).collect();
        let first: Vec<Subscription> = sessions
            .iter()
            .map(|s| fanout.subscribe(&tenant, s))
            .collect();
        let second = fanout.subscribe(&tenant, &sessions[0]);
        assert_eq!(fanout.channel_count(), 100);
        drop(first);
        assert_eq!(
            fanout.channel_count(),
            1,
            "a session with a subscriber keeps its channel"
        );
        drop(second);
        assert_eq!(fanout.channel_count(), 0);
        fanout.publish(&sessions[0], &[]);
        assert_eq!(
            fanout.channel_count(),
            0,
            "publishing to no one creates nothing"
        );
    }

    fn event(session: SessionId, seq: i64) -> Arc<Event> {
        Arc::new(Event {
            session_id: session,
            seq,
            turn_id: Some(crate::model::TurnId::generate()),
            data: crate::model::EventData::MessageStop {},
            created_at: crate::model::now(),
        })
    }

    #[tokio::test]
    async fn an_event_is_sent_once_in_order_whoever_publishes_it() {
        let fanout = Arc::new(Fanout::new(16, Metrics::new(false)));
        let tenant = TenantId::generate();
        let session = SessionId::generate();
        let mut subscriber = fanout.subscribe(&tenant, &session);
        assert_eq!(fanout.watched(&session).unwrap().last, None);
        // This process's writer, then a read of the log that overlaps it.
        fanout.publish(&session, &[event(session, 1), event(session, 2)]);
        fanout.publish(&session, &[event(session, 2), event(session, 3)]);
        fanout.publish(&session, &[event(session, 1)]);
        let mut received = Vec::new();
        for _ in 0..3 {
            received.push(subscriber.recv().await.unwrap().seq);
        }
        assert_eq!(received, [1, 2, 3]);
        assert_eq!(fanout.watched(&session).unwrap().last, Some(3));
        assert!(fanout.watched(&SessionId::generate()).is_none());
    }
}
