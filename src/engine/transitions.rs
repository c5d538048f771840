//! Which state changes a batch of appends makes: a turn's `turn_start` sets it running (and
//! its run), its `turn_stop` ends it with the status, run status and webhook event the stop
//! means. Decided here, over the whole batch; the store executes the values in the append's
//! transaction, after the fence that proves the turns are still this process's.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::model::{EventData, RunStatus, TurnId, TurnStatus, WebhookEvent};
use crate::store::{AppendGroup, TurnEnd, TurnTransition};

/// Sets each group's transition. A turn that starts and stops in one batch is written
/// once, by its stop (which carries the start).
pub(super) fn decide(groups: &mut [AppendGroup]) {
    let stopping: HashSet<TurnId> = groups
        .iter()
        .filter(|g| g.events.iter().any(|e| e.data.is_turn_stop()))
        .map(|g| g.turn)
        .collect();
    let mut started: HashMap<TurnId, (i64, DateTime<Utc>)> = HashMap::new();
    for group in groups.iter_mut() {
        group.transition = None;
        for event in &group.events {
            match &event.data {
                EventData::TurnStart {} if stopping.contains(&group.turn) => {
                    started.insert(group.turn, (event.seq, event.created_at));
                }
                EventData::TurnStart {} => {
                    group.transition = Some(TurnTransition::Start {
                        seq: event.seq,
                        at: event.created_at,
                    });
                }
                EventData::TurnStop {
                    stop_reason,
                    error,
                    usage,
                } => {
                    group.transition = Some(TurnTransition::Stop(TurnEnd {
                        seq: event.seq,
                        at: event.created_at,
                        status: TurnStatus::after_stop(*stop_reason, error.as_ref()),
                        stop_reason: *stop_reason,
                        error: error.clone(),
                        usage: *usage,
                        run_status: group
                            .run
                            .map(|_| RunStatus::after_stop(*stop_reason, error.as_ref())),
                        event: WebhookEvent::of_stop(*stop_reason, error.as_ref()),
                        started: started.get(&group.turn).copied(),
                    }));
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Event, RunId, SessionId, StopReason, TenantId, TurnError, TurnStatus, Usage,
    };

    fn group(turn: TurnId, run: Option<RunId>, events: &[(i64, EventData)]) -> AppendGroup {
        let session = SessionId::generate();
        AppendGroup {
            tenant: TenantId::generate(),
            session,
            turn,
            run,
            events: events
                .iter()
                .map(|(seq, data)| Event {
                    session_id: session,
                    seq: *seq,
                    turn_id: Some(turn),
                    data: data.clone(),
                    created_at: crate::model::now(),
                })
                .collect(),
            coalesced: Vec::new(),
            history: Vec::new(),
            transition: None,
        }
    }

    fn stop(reason: StopReason, error: Option<TurnError>) -> EventData {
        EventData::TurnStop {
            stop_reason: reason,
            error,
            usage: Usage::default(),
        }
    }

    #[test]
    fn a_start_alone_sets_the_turn_running() {
        let mut groups = [group(
            TurnId::generate(),
            None,
            &[
                (1, EventData::TurnStart {}),
                (2, EventData::MessageStart {}),
            ],
        )];
        decide(&mut groups);
        assert!(matches!(
            groups[0].transition,
            Some(TurnTransition::Start { seq: 1, .. })
        ));
    }

    #[test]
    fn a_turn_started_and_stopped_in_one_batch_is_written_once_by_its_stop() {
        let turn = TurnId::generate();
        let mut groups = [
            group(turn, None, &[(1, EventData::TurnStart {})]),
            group(TurnId::generate(), None, &[(1, EventData::MessageStop {})]),
            group(turn, None, &[(2, stop(StopReason::EndTurn, None))]),
        ];
        decide(&mut groups);
        assert_eq!(groups[0].transition, None);
        assert_eq!(groups[1].transition, None);
        let Some(TurnTransition::Stop(end)) = &groups[2].transition else {
            panic!("{:?}", groups[2].transition);
        };
        assert_eq!(end.seq, 2);
        assert_eq!(end.started.map(|(seq, _)| seq), Some(1));
        assert_eq!(end.status, TurnStatus::Completed);
        assert_eq!(end.run_status, None, "no run");
        assert_eq!(end.event, WebhookEvent::TurnCompleted);
    }

    #[test]
    fn a_stop_decides_the_turns_and_its_runs_status_and_its_webhook_event() {
        let run = Some(RunId::generate());
        let cases = [
            (
                StopReason::EndTurn,
                None,
                TurnStatus::Completed,
                RunStatus::Completed,
                WebhookEvent::TurnCompleted,
            ),
            (
                StopReason::ToolUse,
                None,
                TurnStatus::Completed,
                RunStatus::Awaiting,
                WebhookEvent::TurnAwaitingInput,
            ),
            (
                StopReason::Error,
                Some(TurnError::new(TurnError::CANCELLED, "cancelled")),
                TurnStatus::Cancelled,
                RunStatus::Cancelled,
                WebhookEvent::TurnCancelled,
            ),
            (
                StopReason::Error,
                Some(TurnError::new("internal", "failed")),
                TurnStatus::Failed,
                RunStatus::Failed,
                WebhookEvent::TurnFailed,
            ),
        ];
        for (reason, error, status, run_status, event) in cases {
            let mut groups = [group(TurnId::generate(), run, &[(7, stop(reason, error))])];
            decide(&mut groups);
            let Some(TurnTransition::Stop(end)) = &groups[0].transition else {
                panic!("{:?}", groups[0].transition);
            };
            assert_eq!(end.status, status);
            assert_eq!(end.run_status, Some(run_status));
            assert_eq!(end.event, event);
            assert_eq!(end.started, None);
        }
    }
}
