//! Following a session's log: replay from a cursor, then live, with no gap and no duplicate.

use std::collections::VecDeque;
use std::sync::Arc;

use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::fanout::{Fanout, Subscription};
use super::pager::LogPager;
use crate::model::{Event, SessionId, TenantId, TurnId};
use crate::store::Deltas;
use crate::store::{Store, StoreError};

/// What to follow.
#[derive(Debug, Clone)]
pub struct Follow {
    pub tenant: TenantId,
    pub session: SessionId,
    /// Only this turn's events; the stream ends after its `turn_stop`.
    pub turn: Option<TurnId>,
    /// Events with a seq greater than this.
    pub after: i64,
    /// How the log gives finished messages' deltas.
    pub deltas: Deltas,
}

/// The events after the cursor: first from the log, then live until the client leaves,
/// the followed turn stops, or the server shuts down.
///
/// It subscribes before reading the log and drops what it has already delivered by seq, so
/// nothing committed in between is lost or repeated. A subscriber that lags the broadcast
/// catches up from the log.
///
/// `fresh` is a subscription taken before the followed turn wrote anything: then there is
/// nothing to replay, and the first event received is the turn's first.
pub fn follow(
    store: Store,
    fanout: Arc<Fanout>,
    shutdown: CancellationToken,
    follow: Follow,
    fresh: Option<Subscription>,
) -> impl Stream<Item = Result<Arc<Event>, StoreError>> {
    async_stream::try_stream! {
        let replay = fresh.is_none();
        let mut live = fresh.unwrap_or_else(|| fanout.subscribe(&follow.tenant, &follow.session));
        let log = LogPager::new(
            store.clone(),
            follow.tenant,
            follow.session,
            follow.turn,
            follow.deltas,
        );
        let mut last = follow.after;
        // Whether `last` is known: a fresh subscription learns it from its first event.
        let mut anchored = replay;
        // Events read from the log, not yet delivered; and whether the log has more.
        let mut backlog: VecDeque<Event> = VecDeque::new();
        let mut read_log = replay;
        // A turn that ended before the cursor has nothing more to give: checked once.
        let mut check_ended = replay && follow.after > 0 && follow.turn.is_some();

        loop {
            if let Some(event) = backlog.pop_front() {
                last = event.seq;
                let done = ends(&follow, &event);
                yield Arc::new(event);
                if done {
                    break;
                }
                continue;
            }
            if read_log {
                let page = log.page(last).await?;
                read_log = page.more;
                backlog.extend(page.events);
                continue;
            }
            if check_ended {
                check_ended = false;
                if let Some(turn) = &follow.turn {
                    let turn = store.get_turn(&follow.tenant, &follow.session, turn).await?;
                    if turn.status.is_terminal() && turn.last_seq.is_some_and(|s| s <= last) {
                        break;
                    }
                }
            }
            // What was published before the shutdown is delivered first: the shutdown ends
            // after the turns' last events are published, and a stream that broke off on
            // it first would lose them to its client.
            let received = tokio::select! {
                biased;
                received = live.recv() => received,
                _ = shutdown.cancelled() => break,
            };
            match received {
                Ok(event) if anchored && event.seq <= last => {}
                Ok(event) if !anchored || event.seq == last + 1 => {
                    anchored = true;
                    last = event.seq;
                    if follow.turn.is_some() && follow.turn != event.turn_id {
                        continue;
                    }
                    let done = ends(&follow, &event);
                    yield event;
                    if done {
                        break;
                    }
                }
                // A gap, or this subscriber lagged the broadcast: read what it missed.
                Ok(_) | Err(RecvError::Lagged(_)) => {
                    tracing::debug!(session_id = %follow.session, after = last, "subscriber fell behind; reading the log");
                    anchored = true;
                    read_log = true;
                }
                Err(RecvError::Closed) => break,
            }
        }
    }
}

fn ends(follow: &Follow, event: &Event) -> bool {
    follow.turn.is_some() && follow.turn == event.turn_id && event.data.is_turn_stop()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::test_store;
    use crate::metrics::Metrics;
    use crate::model::{EventData, StopReason, Usage};
    use futures_util::StreamExt;

    #[tokio::test]
    async fn a_stream_delivers_what_was_published_before_the_shutdown_then_ends() {
        let (store, _dir) = test_store().await;
        let fanout = Arc::new(Fanout::new(64, Metrics::new(false)));
        let (tenant, session, turn) = (
            TenantId::generate(),
            SessionId::generate(),
            TurnId::generate(),
        );
        let fresh = fanout.subscribe(&tenant, &session);
        let shutdown = CancellationToken::new();
        let stream = follow(
            store.clone(),
            fanout.clone(),
            shutdown.clone(),
            Follow {
                tenant,
                session,
                turn: Some(turn),
                after: 0,
                deltas: Deltas::AsStreamed,
            },
            Some(fresh),
        );
        let data = [
            EventData::TurnStart {},
            EventData::MessageStart {},
            EventData::TextDelta { delta: "a".into() },
            EventData::TextDelta { delta: "b".into() },
            EventData::MessageStop {},
            EventData::TurnStop {
                stop_reason: StopReason::EndTurn,
                error: None,
                usage: Usage::default(),
            },
        ];
        let events: Vec<Arc<Event>> = data
            .into_iter()
            .enumerate()
            .map(|(i, data)| {
                Arc::new(Event {
                    session_id: session,
                    seq: i as i64 + 1,
                    turn_id: Some(turn),
                    data,
                    created_at: crate::model::now(),
                })
            })
            .collect();
        // The turn's events are published, then the server shuts down, before the stream
        // is first polled: both are ready at every step.
        fanout.publish(&session, &events);
        shutdown.cancel();
        let got: Vec<i64> = stream
            .map(|event| event.unwrap().seq)
            .collect::<Vec<_>>()
            .await;
        assert_eq!(got, [1, 2, 3, 4, 5, 6]);
        store.close().await;
    }
}
