//! The use cases of every protocol whose unit is a context (a session) holding tasks (runs),
//! written once for all its faces: open or continue a context for an agent, find a run of
//! an agent, resume an awaiting run with the client's answers, wait until a run stops, and
//! a run's view (what a face renders a task or a run from). A face parses its wire format
//! into these calls and renders what they return; it decides none of the rules below.
//!
//! - A context belongs to the agent it was opened for: continuing it for another agent is
//!   [`EngineError::WrongAgent`].
//! - A resume's parts are answers (a tool's result, a permission) or text. With no answer
//!   among them, the text (every text part, joined) answers the single pending call when
//!   that call is a client tool's and the text is not empty; else the resume is
//!   [`EngineError::NoAnswer`]. A part that is neither an answer nor text, or any text
//!   beside answers, is [`EngineError::UnexpectedPart`], named by its index.
//! - Only an awaiting run is resumed ([`EngineError::RunNotAwaiting`] otherwise); the store
//!   checks it again in the transaction that adds the resume's turn.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::error::EngineError;
use super::follow::Follow;
use super::input::{InputMessage, PendingCall};
use super::request::{StartedTurn, TurnRequest};
use super::runner::Engine;
use super::sessions::SessionRef;
use crate::agents::{Agent, SessionConfigRequest};
use crate::model::{Content, Event, Run, RunId, RunStatus, Session, TenantId};
use crate::store::{Deltas, RunMessage};

/// One part of a resume, as a face read it from its wire format.
#[derive(Debug, Clone, PartialEq)]
pub enum ResumePart {
    /// A tool's result or a permission, naming the call it answers.
    Answer(InputMessage),
    /// Plain text.
    Text(String),
    /// Anything else (a file, bytes): never an answer.
    Other,
}

/// What a face reads of a run to render it, read once: the run's row, its session and
/// agent, every stored event of its turns (one log read, deltas as they were streamed),
/// and, when asked for, the messages its turns brought, each with its turn's client key.
#[derive(Debug, Clone)]
pub struct RunView {
    pub run: Run,
    pub session: Session,
    /// The session's agent (when asked for); `None` once it is no longer configured.
    pub agent: Option<Arc<Agent>>,
    pub events: Vec<Event>,
    pub messages: Vec<RunMessage>,
}

impl RunView {
    /// The run's status, as the event writer keeps it.
    pub fn status(&self) -> RunStatus {
        self.run.status
    }
}

/// Which parts of a run's view a face needs (the run and its session always come).
#[derive(Debug, Clone, Copy, Default)]
pub struct ViewParts {
    pub agent: bool,
    pub events: bool,
    pub messages: bool,
}

impl ViewParts {
    /// The run and its session only.
    pub const ROW: ViewParts = ViewParts {
        agent: false,
        events: false,
        messages: false,
    };
    pub const AGENT: ViewParts = ViewParts {
        agent: true,
        ..ViewParts::ROW
    };
    pub const EVENTS: ViewParts = ViewParts {
        events: true,
        ..ViewParts::AGENT
    };
    pub const ALL: ViewParts = ViewParts {
        messages: true,
        ..ViewParts::EVENTS
    };
}

impl Engine {
    /// The context a client opens or continues for `agent`: a new session when `reference`
    /// is `None`; else the session it names (a client's UUID or key names a new session on
    /// first use), which must be `agent`'s.
    pub async fn open_context(
        &self,
        tenant: &TenantId,
        agent: &str,
        reference: Option<&SessionRef>,
    ) -> Result<Session, EngineError> {
        let session = match reference {
            None => {
                let config = SessionConfigRequest::default();
                return self.create_session(tenant, agent, config, Vec::new()).await;
            }
            Some(reference) => {
                self.session_for_key(tenant, reference, agent, Vec::new())
                    .await?
                    .0
            }
        };
        check_agent(&session, Some(agent))?;
        Ok(session)
    }

    /// The tenant's run with its session; when `agent` is given, the run must be in one of
    /// that agent's contexts.
    pub async fn run_in_context(
        &self,
        tenant: &TenantId,
        id: &RunId,
        agent: Option<&str>,
    ) -> Result<(Run, Session), EngineError> {
        let run = self.get_run(tenant, id).await?;
        let session = self
            .store
            .get_session(tenant, &run.session_id)
            .await
            .map_err(|e| super::error::not_found(e, "session"))?;
        check_agent(&session, agent)?;
        Ok((run, session))
    }

    /// Resumes an awaiting run with a turn of the client's answers (`parts`, resolved as
    /// this module's rules say); `request` is the turn's request, its messages aside.
    pub async fn resume_with(
        self: &Arc<Self>,
        tenant: &TenantId,
        run: &Run,
        parts: Vec<ResumePart>,
        request: TurnRequest,
    ) -> Result<(Run, StartedTurn), EngineError> {
        if run.status != RunStatus::Awaiting {
            return Err(EngineError::RunNotAwaiting(run.status));
        }
        let session = self
            .store
            .get_session(tenant, &run.session_id)
            .await
            .map_err(|e| super::error::not_found(e, "session"))?;
        let agent = self
            .agent_of(&session)
            .await?
            .ok_or(EngineError::AgentUnavailable)?;
        let pending = self.pending_tool_calls(tenant, &run.session_id).await?;
        let messages = resolve_answers(parts, &pending, |name| agent.has_server_tool(name))?;
        let request = TurnRequest {
            messages,
            ..request
        };
        self.resume_run(tenant, &run.id, request).await
    }

    /// Waits until the run's last turn stops (completed, failed, cancelled, or waiting for
    /// the client), at most `limit` when one is given, and reads the run again. `started`,
    /// the turn this process just started for it, is followed from its live subscription.
    pub async fn wait_for_run(
        &self,
        run: &Run,
        started: Option<StartedTurn>,
        limit: Option<Duration>,
    ) -> Result<Run, EngineError> {
        let stopped = match started {
            Some(started) => self.follow_started(started).boxed_local(),
            None => self
                .follow(Follow {
                    tenant: run.tenant_id,
                    session: run.session_id,
                    turn: Some(*run.last_turn()),
                    after: -1,
                    deltas: Deltas::Merged,
                })
                .boxed_local(),
        }
        .for_each(|_| async {});
        match limit {
            Some(limit) => {
                let _ = tokio::time::timeout(limit, stopped).await;
            }
            None => stopped.await,
        }
        self.get_run(&run.tenant_id, &run.id).await
    }

    /// The run's view (see [`RunView`]); `session` when the caller holds it already.
    pub async fn run_view(
        &self,
        run: Run,
        session: Option<Session>,
        parts: ViewParts,
    ) -> Result<RunView, EngineError> {
        let session = match session {
            Some(session) => session,
            None => self
                .store
                .get_session(&run.tenant_id, &run.session_id)
                .await
                .map_err(|e| super::error::not_found(e, "session"))?,
        };
        let agent = match parts.agent {
            true => self.agent_of(&session).await?,
            false => None,
        };
        let events = match parts.events {
            true => self.run_events(&run).await?,
            false => Vec::new(),
        };
        let messages = match parts.messages {
            true => {
                self.store
                    .list_run_history(&run.tenant_id, &run.session_id, &run.id)
                    .await?
            }
            false => Vec::new(),
        };
        Ok(RunView {
            run,
            session,
            agent,
            events,
            messages,
        })
    }

    /// The views of a page of the tenant's runs (`ids`, a list's page), in that order: each
    /// part is one read for the whole page (runs, sessions, events, messages), never one
    /// per run. An id that names none of the tenant's runs is left out.
    pub async fn run_views(
        &self,
        tenant: &TenantId,
        ids: &[RunId],
        parts: ViewParts,
    ) -> Result<Vec<RunView>, EngineError> {
        use std::collections::HashMap;
        let runs = self.store.get_runs(tenant, ids).await?;
        let mut session_ids: Vec<_> = runs.iter().map(|r| r.session_id).collect();
        session_ids.sort();
        session_ids.dedup();
        let sessions: HashMap<_, _> = self
            .store
            .get_sessions(tenant, &session_ids)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let mut events: HashMap<_, Vec<Event>> = HashMap::new();
        if parts.events {
            let run_of: HashMap<_, _> = runs
                .iter()
                .flat_map(|r| r.turns.iter().map(|t| (*t, r.id)))
                .collect();
            for event in self
                .store
                .list_events_of_runs(tenant, ids, Deltas::AsStreamed)
                .await?
            {
                if let Some(run) = event.turn_id.and_then(|turn| run_of.get(&turn)) {
                    events.entry(*run).or_default().push(event);
                }
            }
        }
        let mut messages: HashMap<_, Vec<RunMessage>> = HashMap::new();
        if parts.messages {
            for (run, message) in self.store.list_history_of_runs(tenant, ids).await? {
                messages.entry(run).or_default().push(message);
            }
        }
        // One agent per version (a configured agent costs no read).
        let mut agents: HashMap<_, Option<Arc<Agent>>> = HashMap::new();
        let mut by_id: HashMap<_, _> = runs.into_iter().map(|r| (r.id, r)).collect();
        let mut views = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(run) = by_id.remove(id) else {
                continue;
            };
            let session = sessions
                .get(&run.session_id)
                .cloned()
                .ok_or(EngineError::NotFound("session"))?;
            let key = (session.agent.clone(), session.agent_version);
            let agent = match agents.get(&key) {
                _ if !parts.agent => None,
                Some(agent) => agent.clone(),
                None => {
                    let agent = self.agent_of(&session).await?;
                    agents.insert(key, agent.clone());
                    agent
                }
            };
            views.push(RunView {
                events: events.remove(id).unwrap_or_default(),
                messages: messages.remove(id).unwrap_or_default(),
                run,
                session,
                agent,
            });
        }
        Ok(views)
    }
}

fn check_agent(session: &Session, agent: Option<&str>) -> Result<(), EngineError> {
    match agent {
        Some(agent) if session.agent != agent => Err(EngineError::WrongAgent {
            owner: session.agent.clone(),
        }),
        _ => Ok(()),
    }
}

/// A resume's parts as the turn's messages (the rules are this module's).
pub fn resolve_answers(
    parts: Vec<ResumePart>,
    pending: &[PendingCall],
    is_server_tool: impl Fn(&str) -> bool,
) -> Result<Vec<InputMessage>, EngineError> {
    let has_answers = parts.iter().any(|p| matches!(p, ResumePart::Answer(_)));
    let mut answers = Vec::new();
    let mut text = String::new();
    let mut unexpected = None;
    for (index, part) in parts.into_iter().enumerate() {
        match part {
            ResumePart::Answer(answer) => answers.push(answer),
            ResumePart::Text(t) if !has_answers => text.push_str(&t),
            ResumePart::Text(_) | ResumePart::Other => {
                unexpected.get_or_insert(index);
            }
        }
    }
    if has_answers {
        return match unexpected {
            Some(part) => Err(EngineError::UnexpectedPart { part }),
            None => Ok(answers),
        };
    }
    match pending {
        [call] if !is_server_tool(&call.name) && !text.is_empty() => match unexpected {
            Some(part) => Err(EngineError::UnexpectedPart { part }),
            None => Ok(vec![InputMessage::ToolResult {
                tool_call_id: call.id.clone(),
                content: Content::Text(text),
            }]),
        },
        _ => Err(EngineError::NoAnswer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn call(id: &str, name: &str) -> PendingCall {
        PendingCall {
            id: id.into(),
            name: name.into(),
            input: Map::new(),
        }
    }

    fn result(id: &str, text: &str) -> InputMessage {
        InputMessage::ToolResult {
            tool_call_id: id.into(),
            content: Content::Text(text.into()),
        }
    }

    #[test]
    fn text_answers_the_single_pending_client_call() {
        let parts = vec![ResumePart::Text("4".into()), ResumePart::Text("2".into())];
        let answers = resolve_answers(parts, &[call("c1", "lookup")], |_| false).unwrap();
        assert_eq!(answers, [result("c1", "42")]);
    }

    #[test]
    fn text_cannot_answer_a_server_tool_two_calls_or_be_empty() {
        let text = || vec![ResumePart::Text("yes".into())];
        for (pending, server) in [
            (vec![call("c1", "clock")], true),
            (vec![call("a", "x"), call("b", "y")], false),
            (vec![], false),
        ] {
            let refused = resolve_answers(text(), &pending, |_| server);
            assert!(matches!(refused, Err(EngineError::NoAnswer)), "{refused:?}");
        }
        let empty = resolve_answers(
            vec![ResumePart::Text(String::new())],
            &[call("c1", "lookup")],
            |_| false,
        );
        assert!(matches!(empty, Err(EngineError::NoAnswer)), "{empty:?}");
    }

    #[test]
    fn answers_come_alone_and_other_parts_are_named() {
        let answers = vec![
            ResumePart::Answer(result("c1", "a")),
            ResumePart::Answer(result("c2", "b")),
        ];
        let pending = [call("c1", "x"), call("c2", "y")];
        assert_eq!(
            resolve_answers(answers, &pending, |_| false).unwrap(),
            [result("c1", "a"), result("c2", "b")]
        );
        let beside = vec![
            ResumePart::Answer(result("c1", "a")),
            ResumePart::Text("and some words".into()),
        ];
        let refused = resolve_answers(beside, &pending, |_| false);
        assert!(
            matches!(refused, Err(EngineError::UnexpectedPart { part: 1 })),
            "{refused:?}"
        );
        let file = vec![ResumePart::Text("see".into()), ResumePart::Other];
        let refused = resolve_answers(file, &[call("c1", "x")], |_| false);
        assert!(
            matches!(refused, Err(EngineError::UnexpectedPart { part: 1 })),
            "{refused:?}"
        );
    }
}
