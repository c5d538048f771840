//! A turn's log: appends its events in order through the event writer, keeps the cached
//! history in step with what is durable, counts its start and end, and always ends it with
//! a `turn_stop`, including for turns that end without running (stopped while waiting,
//! failed, left by a process that died, cancelled while awaiting answers).

use std::time::Instant;

use super::assemble::turn_messages;
use super::error::EngineError;
use super::pager::LogPager;
use super::turn_parts::TurnParts;
use super::writer::{Append, Receipt, unstored};
use crate::model::{Content, EventData, HistoryMessage, StopReason, Turn, TurnError, Usage};
use crate::store::{Deltas, StoreError};

/// Appends a turn's events in order; remembers the last receipt to learn of failures, and
/// the history messages not yet known durable, to add them to the session's cached history.
/// Counts the turn's start and end in the metrics.
pub(super) struct TurnLog<'a> {
    parts: TurnParts<'a>,
    turn: &'a Turn,
    last: Option<Receipt>,
    unsynced: Vec<HistoryMessage>,
    /// Whether an append of the turn failed: its end then closes what is durable of it.
    failed: bool,
    /// The turn's agent: a metrics label.
    agent: String,
    /// When the turn started running here (not set for one ended without running).
    running_since: Option<Instant>,
    /// Whether the model's first output was counted.
    first_output: bool,
    /// The span the writer records its commits of the turn's events on: the turn's, when
    /// traces are exported.
    span: tracing::Span,
}

impl<'a> TurnLog<'a> {
    /// The log of a turn of `agent`; `None` reads the agent from the turn's session.
    pub(super) async fn new(parts: TurnParts<'a>, turn: &'a Turn, agent: Option<&str>) -> Self {
        let agent = match agent {
            Some(agent) => agent.to_owned(),
            None => parts
                .store
                .get_session(&turn.tenant_id, &turn.session_id)
                .await
                .map_or_else(|_| "unknown".to_owned(), |session| session.agent),
        };
        Self {
            parts,
            turn,
            last: None,
            unsynced: Vec::new(),
            failed: false,
            agent,
            running_since: None,
            first_output: false,
            span: if crate::traces::enabled() {
                tracing::Span::current()
            } else {
                tracing::Span::none()
            },
        }
    }

    /// Appends the turn's `turn_start`; `running` when the turn now runs (its duration is
    /// measured from here).
    pub(super) async fn start(&mut self, running: bool) {
        self.parts
            .metrics
            .turn_started(&self.agent, &self.turn.tenant_id);
        if running {
            self.running_since = Some(Instant::now());
        }
        self.emit(vec![EventData::TurnStart {}], Vec::new()).await;
    }

    /// The model said something for the first time in this turn.
    pub(super) fn output(&mut self) {
        if self.first_output {
            return;
        }
        self.first_output = true;
        if let Some(since) = self.running_since {
            self.parts
                .metrics
                .turn_first_event(&self.agent, &self.turn.tenant_id, since.elapsed());
        }
    }

    pub(super) async fn emit(&mut self, events: Vec<EventData>, history: Vec<HistoryMessage>) {
        self.queue(events, history, false).await;
    }

    /// Queues an append behind the turn's earlier ones; `after_failure`: it closes the turn
    /// after one of them failed (see [`Append::after_failure`]).
    async fn queue(
        &mut self,
        events: Vec<EventData>,
        history: Vec<HistoryMessage>,
        after_failure: bool,
    ) {
        // The previous append's outcome, if known already: a failure is remembered.
        if let Some(receipt) = self.last.as_mut()
            && let Ok(Err(_)) = receipt.try_recv()
        {
            self.failed = true;
            self.last = None;
        }
        self.unsynced.extend(history.iter().cloned());
        let receipt = self
            .parts
            .writer
            .append(Append {
                tenant: self.turn.tenant_id,
                session: self.turn.session_id,
                turn: self.turn.id,
                run: self.turn.run_id,
                events,
                history,
                after_failure,
                span: self.span.clone(),
            })
            .await;
        self.last = Some(receipt);
    }

    /// Waits until everything emitted so far is durable.
    pub(super) async fn sync(&mut self) -> Result<(), StoreError> {
        let synced = match self.last.take() {
            None => Ok(()),
            Some(receipt) => settled(receipt.await),
        };
        let histories = &self.parts.histories;
        let session = &self.turn.session_id;
        if synced.is_err() || self.failed {
            self.failed = true;
        }
        match &synced {
            Ok(()) if self.failed => histories.forget(session),
            Ok(()) if !self.unsynced.is_empty() => {
                histories.added(&self.turn.id, session, std::mem::take(&mut self.unsynced));
            }
            Ok(()) => {}
            // What is durable is unknown: the history is read again.
            Err(_) => histories.forget(session),
        }
        synced
    }

    /// Ends the turn with its terminal event and waits for it to be durable.
    pub(super) async fn stop(
        &mut self,
        stop_reason: StopReason,
        error: Option<TurnError>,
        usage: Usage,
    ) {
        // Counted before the end is published: whoever sees the end sees it counted.
        self.parts.metrics.turn_ended(
            &self.agent,
            outcome_label(stop_reason, error.as_ref().map(|e| e.code.as_str())),
            &self.turn.tenant_id,
            self.running_since.map(|since| since.elapsed()),
        );
        // The tenant's tokens of the day are read again once this turn's usage is durable:
        // a client that sees the end and starts another turn is held to them.
        self.parts.quotas.turn_ended(&self.turn.tenant_id);
        // The end is queued behind the turn's last events without waiting for them: the
        // writer refuses it if any of them failed, and the turn is then closed instead.
        let earlier = self.last.take();
        let mut reason = error.clone();
        let mut ended = None;
        if !self.failed {
            self.emit(
                vec![EventData::TurnStop {
                    stop_reason,
                    error,
                    usage,
                }],
                Vec::new(),
            )
            .await;
            let earlier = match earlier {
                None => Ok(()),
                Some(receipt) => settled(receipt.await),
            };
            let stop = self.sync().await;
            match earlier {
                // It refused the end: the turn closes with why it failed.
                Err(failure) if !matches!(failure, StoreError::Fenced(_)) => {
                    reason = Some(unstored(&failure));
                }
                _ => ended = Some(stop),
            }
        }
        let stopped = match ended {
            Some(stop) => stop.map_err(EngineError::from),
            None => {
                // Some of its events are not stored: the end closes what is (the message it
                // left open, with what clients saw of it in the history) in one append.
                let reason = reason.unwrap_or_else(|| {
                    TurnError::new("internal", "the turn's events could not be stored")
                });
                close_turn(self, reason).await
            }
        };
        match stopped.map_err(|error| match error {
            EngineError::Store(error) => error,
            other => StoreError::Corrupt(other.to_string()),
        }) {
            Ok(()) => {}
            // Another process ended it (this one lost its lease): nothing more to do.
            Err(StoreError::Fenced(_)) => {
                tracing::warn!(turn_id = %self.turn.id, "another process ended this turn");
            }
            Err(error) => {
                tracing::warn!(turn_id = %self.turn.id, error = %error, "could not record the end of a turn: it ends once the database takes writes again");
                self.parts.end_later(self.turn, unstored(&error));
            }
        }
    }
}

/// What an append's receipt says of it: committed, or why not.
fn settled(
    receipt: Result<
        Result<Vec<std::sync::Arc<crate::model::Event>>, StoreError>,
        tokio::sync::oneshot::error::RecvError,
    >,
) -> Result<(), StoreError> {
    match receipt {
        Ok(result) => result.map(|_| ()),
        Err(_) => Err(StoreError::Corrupt("the event writer stopped".into())),
    }
}

/// A turn's outcome as the metrics name it: the stop reason of one that completed, else
/// `cancelled`, `interrupted` or `failed`.
fn outcome_label(stop_reason: StopReason, error_code: Option<&str>) -> &'static str {
    let error = error_code.map(|code| TurnError::new(code, ""));
    match crate::model::TurnStatus::after_stop(stop_reason, error.as_ref()) {
        crate::model::TurnStatus::Cancelled => "cancelled",
        crate::model::TurnStatus::Interrupted => "interrupted",
        crate::model::TurnStatus::Failed => "failed",
        _ => stop_reason.as_str(),
    }
}

/// A turn whose task failed unexpectedly: it still gets its end. `agent`: the turn's, if
/// known.
pub(super) async fn stop_failed(
    parts: TurnParts<'_>,
    turn: &Turn,
    agent: Option<&str>,
    reason: TurnError,
) {
    TurnLog::new(parts, turn, agent)
        .await
        .stop(StopReason::Error, Some(reason), Usage::default())
        .await;
}

/// A turn stopped while it waited for a slot: it still gets a start and an end.
pub(super) async fn stop_unstarted(
    parts: TurnParts<'_>,
    turn: &Turn,
    agent: Option<&str>,
    reason: TurnError,
) {
    let mut log = TurnLog::new(parts, turn, agent).await;
    log.start(false).await;
    log.stop(StopReason::Error, Some(reason), Usage::default())
        .await;
}

/// The turn that ends a run cancelled while it awaited answers: each pending call is
/// answered with `answer` (an event and a history message), then the turn stops cancelled.
pub(super) async fn answer_cancelled(
    parts: TurnParts<'_>,
    turn: &Turn,
    calls: &[super::PendingCall],
    answer: &str,
) {
    let mut log = TurnLog::new(parts, turn, None).await;
    log.start(false).await;
    let (events, history) = calls
        .iter()
        .map(|call| {
            let content = Content::Text(answer.to_owned());
            (
                EventData::ToolResult {
                    tool_call_id: call.id.clone(),
                    content: content.clone(),
                },
                HistoryMessage::Tool {
                    tool_call_id: call.id.clone(),
                    content,
                },
            )
        })
        .unzip();
    log.emit(events, history).await;
    log.stop(
        StopReason::Error,
        Some(TurnError::new(
            TurnError::CANCELLED,
            "the run was cancelled while it awaited answers",
        )),
        Usage::default(),
    )
    .await;
}

/// The events of a turn that are durable, text deltas merged.
async fn durable_events(parts: TurnParts<'_>, turn: &Turn) -> Result<Vec<EventData>, EngineError> {
    let log = LogPager::new(
        parts.store.clone(),
        turn.tenant_id,
        turn.session_id,
        Some(turn.id),
        Deltas::Merged,
    );
    let events = log.all_after(0).await?;
    Ok(events.into_iter().map(|e| e.data).collect())
}

/// The start of the message a turn's durable events leave open, if any.
fn open_message(events: &[EventData]) -> Option<usize> {
    events
        .iter()
        .rposition(|e| matches!(e, EventData::MessageStart {}))
        .filter(|start| {
            !events[*start..]
                .iter()
                .any(|e| matches!(e, EventData::MessageStop {}))
        })
}

/// Ends a turn of this process whose events (or end) could not be stored, once the
/// database takes writes again (see [`close_turn`]).
pub(super) async fn end_unstored(
    parts: TurnParts<'_>,
    turn: &Turn,
    reason: TurnError,
) -> Result<(), EngineError> {
    let mut log = TurnLog::new(parts, turn, Some("")).await;
    close_turn(&mut log, reason).await
}

/// Ends a turn after what is durable of it, in one append: the message it left open is
/// closed (the history holds what clients saw of it) and a `turn_stop` says why.
async fn close_turn(log: &mut TurnLog<'_>, reason: TurnError) -> Result<(), EngineError> {
    let events = durable_events(log.parts, log.turn).await?;
    let mut closing = Vec::new();
    let mut history = Vec::new();
    if events.is_empty() {
        closing.push(EventData::TurnStart {});
    }
    if let Some(start) = open_message(&events) {
        closing.push(EventData::MessageStop {});
        history = turn_messages(&events[start..]);
    }
    closing.push(EventData::TurnStop {
        stop_reason: StopReason::Error,
        error: Some(reason),
        usage: Usage::default(),
    });
    log.failed = false;
    log.queue(closing, history, true).await;
    log.sync().await?;
    Ok(())
}

/// Ends a turn a previous process left unfinished: closes the message it was writing
/// (so history holds what clients already saw) and appends an `interrupted` stop.
pub(super) async fn interrupt_orphan(parts: TurnParts<'_>, turn: &Turn) -> Result<(), EngineError> {
    let mut log = TurnLog::new(parts, turn, None).await;
    if turn.started_at.is_none() {
        parts.metrics.turn_started(&log.agent, &turn.tenant_id);
    }
    parts.metrics.turn_ended(
        &log.agent,
        outcome_label(StopReason::Error, Some(TurnError::INTERRUPTED)),
        &turn.tenant_id,
        None,
    );
    parts.quotas.turn_ended(&turn.tenant_id);
    close_turn(
        &mut log,
        TurnError::new(
            TurnError::INTERRUPTED,
            "the server stopped before the turn finished",
        ),
    )
    .await?;
    tracing::warn!(turn_id = %turn.id, "recovered a turn left unfinished: interrupted");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use crate::engine::testing::TestEngine;
    use crate::model::{Event, EventData, HistoryType, SessionId, TurnId, TurnStatus};
    use crate::store::Deltas;

    /// The turn's events as the log gives them.
    async fn logged(
        test: &TestEngine,
        session: &SessionId,
        turn: &TurnId,
        deltas: Deltas,
    ) -> Vec<Event> {
        test.store
            .list_events(&test.tenant, session, Some(turn), 0, 100, deltas)
            .await
            .unwrap()
    }

    /// A turn's end is queued behind its reply without waiting for it: when the reply
    /// cannot be stored, that end is refused and the turn is closed as failed with what is
    /// durable of it, never recorded as completed.
    #[tokio::test]
    async fn an_end_queued_behind_a_reply_that_was_not_stored_closes_the_turn_as_failed() {
        let test = TestEngine::start().await;
        // Its deltas come apart, each stored before the next: the model's end is not.
        let session = test.session("paced").await;
        let refuse = |on| {
            test.store
                .faults
                .refuse_usage_appends
                .store(on, Ordering::SeqCst)
        };
        refuse(true);
        let turn = test.run_turn(&session.id, "hello there").await;
        refuse(false);

        let stored = test
            .store
            .get_turn(&test.tenant, &session.id, &turn)
            .await
            .unwrap();
        assert_eq!(stored.status, TurnStatus::Failed, "{stored:?}");
        assert_eq!(stored.error.as_ref().unwrap().code, "internal");
        let events = logged(&test, &session.id, &turn, Deltas::Merged).await;
        let kinds: Vec<&str> = events.iter().map(|e| e.data.kind()).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == "turn_stop").count(),
            1,
            "{kinds:?}"
        );
        assert_eq!(kinds.last(), Some(&"turn_stop"));
        assert!(!kinds.contains(&"usage"), "the refused append: {kinds:?}");
        assert!(
            matches!(
                &events.last().unwrap().data,
                EventData::TurnStop { error: Some(error), .. } if error.code == "internal"
            ),
            "{:?}",
            events.last()
        );
        // The reply clients saw is closed into the history.
        let history = test
            .store
            .list_history(&test.tenant, &session.id, HistoryType::Full)
            .await
            .unwrap();
        assert_eq!(history.len(), 2, "{history:?}");
        test.stop().await;
    }

    /// What the model has ready when it is read is queued as one append: an echo's whole
    /// reply and its end are stored together or not at all, and a model that makes the turn
    /// wait has what it said so far stored before it is waited for.
    #[tokio::test]
    async fn what_the_model_has_ready_is_one_append() {
        let test = TestEngine::start().await;
        test.store
            .faults
            .refuse_usage_appends
            .store(true, Ordering::SeqCst);
        let mut deltas = Vec::new();
        for agent in ["echo", "paced"] {
            let session = test.session(agent).await;
            let turn = test.run_turn(&session.id, "hello there").await;
            let events = logged(&test, &session.id, &turn, Deltas::AsStreamed).await;
            let text: String = events
                .iter()
                .filter_map(|e| match &e.data {
                    EventData::TextDelta { delta } => Some(delta.as_str()),
                    _ => None,
                })
                .collect();
            deltas.push(text);
        }
        // The echo's deltas were in the refused append with its end.
        assert_eq!(deltas[0], "", "echo");
        // The paced model's were stored as they came, up to the last one, which came with
        // its end.
        assert_eq!(deltas[1], "hello th", "paced");
        test.stop().await;
    }
}
