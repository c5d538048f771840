//! A run's event log as ACP events, and the `Run` they build up. Rendering is a pure
//! function of the log (plus a cancellation while awaiting), so a replay renders exactly
//! what the live stream sent, and every frame carries a unique id: the seq of the event
//! it came from and its place among that event's frames.
//!
//! - The first turn's start is `run.created` then `run.in-progress`; a resumed turn's
//!   start is `run.in-progress`.
//! - An agent message opens at its first part (`message.created`); text deltas are
//!   `message.part`s; thinking, tool calls and server tools' results are parts with
//!   trajectory metadata. It completes when the next model step begins or the turn ends.
//! - A turn's end is a `generic` event `{agentry: {turn_id, stop_reason, usage}}`, then
//!   `run.awaiting` (a `tool_use` stop: the calls are the await request's parts),
//!   `run.completed`, `run.failed` or `run.cancelled`.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::wire::{
    AwaitRequest, ErrorObject, EventObject, MessageObject, PartMetadata, PartObject, RunObject,
    RunStatus, Trajectory, timestamp,
};
use crate::agents::Agent;
use crate::http::frame_id::FrameId;
use crate::model::{
    Content, Event, EventData, Run, RunStatus as EngineStatus, StopReason, TurnError, TurnId,
    TurnStatus,
};

/// Where a run's pending calls' names start (`/tool_calls/<id>`), and the names of the
/// answers a resume brings.
pub const TOOL_CALLS: &str = "/tool_calls/";
pub const TOOL_RESULTS: &str = "/tool_results/";
pub const TOOL_PERMISSIONS: &str = "/tool_permissions/";

/// What the run is and where it belongs.
#[derive(Debug, Clone)]
pub struct RunIdentity {
    pub run_id: String,
    pub first_turn: TurnId,
    /// The turn that answered the calls of a run cancelled while it awaited: it renders as
    /// the run's `run.cancelled` alone.
    pub cancel_turn: Option<TurnId>,
    pub agent_name: String,
    pub session_id: String,
    pub created_at: DateTime<Utc>,
    /// The agent (none once it is no longer configured): its server tools' calls wait for
    /// a permission, not a result.
    pub agent: Option<Arc<Agent>>,
}

/// The kind of the last part of the open message, to merge deltas in the run's output.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Last {
    Text,
    Thinking,
    Other,
}

/// A call of the current turn not answered within it.
#[derive(Debug, Clone)]
struct Call {
    id: String,
    name: String,
    input: serde_json::Map<String, Value>,
    /// When the model made the call.
    at: DateTime<Utc>,
}

#[derive(Debug)]
pub struct RunRenderer {
    identity: RunIdentity,
    status: RunStatus,
    output: Vec<MessageObject>,
    /// Index of the open message in `output`, and the kind of its last part.
    open: Option<(usize, Last)>,
    calls: Vec<Call>,
    call_names: HashMap<String, String>,
    await_request: Option<AwaitRequest>,
    error: Option<ErrorObject>,
    finished_at: Option<String>,
    /// The seq of the last event rendered, and how many frames it rendered to.
    last_seq: i64,
    last_frames: u32,
}

impl RunRenderer {
    pub fn new(identity: RunIdentity) -> Self {
        Self {
            identity,
            status: RunStatus::Created,
            output: Vec::new(),
            open: None,
            calls: Vec::new(),
            call_names: HashMap::new(),
            await_request: None,
            error: None,
            finished_at: None,
            last_seq: 0,
            last_frames: 0,
        }
    }

    /// The run as it stands.
    pub fn run(&self) -> RunObject {
        RunObject {
            run_id: self.identity.run_id.clone(),
            agent_name: self.identity.agent_name.clone(),
            session_id: self.identity.session_id.clone(),
            status: self.status,
            await_request: self.await_request.clone(),
            output: self.output.clone(),
            error: self.error.clone(),
            created_at: timestamp(self.identity.created_at),
            finished_at: self.finished_at.clone(),
        }
    }

    fn role(&self) -> String {
        agent_role(&self.identity.agent_name)
    }

    /// The ACP events one engine event becomes (often none), each with its frame id.
    pub fn render(&mut self, event: &Event) -> Vec<(FrameId, EventObject)> {
        self.last_seq = event.seq;
        let mut out = Vec::new();
        if self.identity.cancel_turn.is_some() && self.identity.cancel_turn == event.turn_id {
            if event.data.is_turn_stop() {
                out.extend(self.cancel_awaiting(event.created_at));
            }
        } else {
            self.render_data(event, &mut out);
        }
        self.last_frames = out.len() as u32;
        out.into_iter()
            .enumerate()
            .map(|(k, e)| (FrameId::new(event.seq, k as u32), e))
            .collect()
    }

    fn render_data(&mut self, event: &Event, out: &mut Vec<EventObject>) {
        match &event.data {
            EventData::TurnStart {} => {
                self.calls.clear();
                self.await_request = None;
                if event.turn_id == Some(self.identity.first_turn) {
                    out.push(EventObject::for_run(self.run()));
                }
                self.status = RunStatus::InProgress;
                out.push(EventObject::for_run(self.run()));
            }
            EventData::MessageStart {} => self.close(out, event.created_at),
            EventData::TextDelta { delta } => {
                self.part(out, event, Last::Text, PartObject::text(delta.clone()));
            }
            EventData::ThinkingDelta { delta } => {
                let part = PartObject {
                    content: None,
                    metadata: Some(PartMetadata::Trajectory(Trajectory::message(delta.clone()))),
                    ..PartObject::text("")
                };
                self.part(out, event, Last::Thinking, part);
            }
            EventData::ToolCall {
                tool_call_id,
                name,
                input,
            } => {
                self.call_names.insert(tool_call_id.clone(), name.clone());
                self.calls.push(Call {
                    id: tool_call_id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                    at: event.created_at,
                });
                let part = tool_call_part(tool_call_id, name, input);
                self.part(out, event, Last::Other, part);
            }
            EventData::ToolResult {
                tool_call_id,
                content,
            } => {
                self.calls.retain(|c| c.id != *tool_call_id);
                let name = self.call_names.get(tool_call_id).cloned();
                let output = content_value(content);
                let part = PartObject::json(
                    None,
                    &json!({"id": tool_call_id, "output": output}),
                    Some(PartMetadata::Trajectory(Trajectory::tool(
                        name,
                        None,
                        Some(json!({"output": output})),
                    ))),
                );
                self.part(out, event, Last::Other, part);
            }
            EventData::Usage { .. } | EventData::Compaction { .. } | EventData::MessageStop {} => {}
            // A session's own event is in no turn, so in no run's stream (a run follows its
            // turns), and changes nothing of a run.
            EventData::AgentVersionChange { .. } => {}
            EventData::TurnStop {
                stop_reason,
                error,
                usage,
            } => {
                self.close(out, event.created_at);
                out.push(EventObject::Generic {
                    generic: json!({"agentry": {
                        "turn_id": event.turn_id,
                        "stop_reason": stop_reason,
                        "usage": usage,
                    }}),
                });
                self.stop(*stop_reason, error.as_ref(), event.created_at);
                out.push(EventObject::for_run(self.run()));
            }
        }
    }

    /// A run that awaited and was cancelled: `run.cancelled`, its await request cleared.
    fn cancel_awaiting(&mut self, at: DateTime<Utc>) -> Option<EventObject> {
        if self.status != RunStatus::Awaiting {
            return None;
        }
        self.status = RunStatus::Cancelled;
        self.await_request = None;
        self.calls.clear();
        self.finished_at = Some(timestamp(at));
        Some(EventObject::for_run(self.run()))
    }

    /// Brings a run rendered from its log to the status the engine keeps for it, where the
    /// log alone cannot tell: a resume whose turn has not started is going on; calls a turn
    /// outside the run answered leave it `completed`; a run cancelled while it awaited,
    /// before cancelling wrote a turn of its own, is `cancelled` (that frame follows the
    /// last event's).
    pub fn settle(&mut self, run: &Run) -> Option<(FrameId, EventObject)> {
        if self.status != RunStatus::Awaiting {
            return None;
        }
        match run.status {
            EngineStatus::Running | EngineStatus::Created => {
                self.status = RunStatus::InProgress;
                self.await_request = None;
                self.calls.clear();
                None
            }
            EngineStatus::Completed => {
                self.status = RunStatus::Completed;
                self.finished_at = self
                    .await_request
                    .take()
                    .and_then(|request| request.message.completed_at);
                self.calls.clear();
                None
            }
            EngineStatus::Cancelled => {
                let event = self.cancel_awaiting(run.cancelled_at.unwrap_or(run.updated_at))?;
                let id = FrameId::new(self.last_seq, self.last_frames);
                self.last_frames += 1;
                Some((id, event))
            }
            _ => None,
        }
    }

    fn stop(&mut self, stop_reason: StopReason, error: Option<&TurnError>, at: DateTime<Utc>) {
        if stop_reason == StopReason::ToolUse && error.is_none() && !self.calls.is_empty() {
            self.status = RunStatus::Awaiting;
            self.await_request = Some(self.await_request_of(at));
            return;
        }
        self.calls.clear();
        self.await_request = None;
        self.finished_at = Some(timestamp(at));
        match TurnStatus::after_stop(stop_reason, error) {
            TurnStatus::Cancelled => self.status = RunStatus::Cancelled,
            TurnStatus::Failed | TurnStatus::Interrupted => {
                self.status = RunStatus::Failed;
                let (code, message) = error.map_or(("failed", "the run failed"), |e| {
                    (e.code.as_str(), e.message.as_str())
                });
                self.error = Some(ErrorObject {
                    code: "server_error",
                    message: message.to_owned(),
                    data: Some(json!({"code": code})),
                });
            }
            _ => self.status = RunStatus::Completed,
        }
    }

    /// The calls the client must answer, one JSON part each: a message created with the
    /// first call and completed when the turn stopped (`at`).
    fn await_request_of(&self, at: DateTime<Utc>) -> AwaitRequest {
        let parts = self
            .calls
            .iter()
            .map(|call| {
                let server_tool = self.identity.agent.as_ref();
                let answer = if server_tool.is_some_and(|a| a.has_server_tool(&call.name)) {
                    "permission"
                } else {
                    "result"
                };
                PartObject::json(
                    Some(format!("{TOOL_CALLS}{}", call.id)),
                    &json!({"id": call.id, "name": call.name, "input": call.input,
                            "answer": answer}),
                    None,
                )
            })
            .collect();
        AwaitRequest {
            kind: "message",
            message: MessageObject {
                role: self.role(),
                parts,
                created_at: Some(timestamp(self.calls.first().map_or(at, |c| c.at))),
                completed_at: Some(timestamp(at)),
            },
        }
    }

    /// Adds a part to the open message (opening one first), as a `message.part`.
    fn part(&mut self, out: &mut Vec<EventObject>, event: &Event, kind: Last, part: PartObject) {
        let (index, last) = match self.open {
            Some(open) => open,
            None => {
                let message = MessageObject {
                    role: self.role(),
                    parts: Vec::new(),
                    created_at: Some(timestamp(event.created_at)),
                    completed_at: None,
                };
                out.push(EventObject::MessageCreated {
                    message: message.clone(),
                });
                self.output.push(message);
                (self.output.len() - 1, Last::Other)
            }
        };
        let parts = &mut self.output[index].parts;
        match (kind, last, parts.last_mut()) {
            (Last::Text, Last::Text, Some(previous)) => {
                let text = previous.content.get_or_insert_with(String::new);
                text.push_str(part.content.as_deref().unwrap_or_default());
            }
            (Last::Thinking, Last::Thinking, Some(previous)) => {
                if let (
                    Some(PartMetadata::Trajectory(Trajectory {
                        message: Some(thinking),
                        ..
                    })),
                    Some(PartMetadata::Trajectory(Trajectory {
                        message: Some(delta),
                        ..
                    })),
                ) = (previous.metadata.as_mut(), part.metadata.as_ref())
                {
                    thinking.push_str(delta);
                }
            }
            _ => parts.push(part.clone()),
        }
        self.open = Some((index, kind));
        out.push(EventObject::MessagePart { part });
    }

    fn close(&mut self, out: &mut Vec<EventObject>, at: DateTime<Utc>) {
        if let Some((index, _)) = self.open.take() {
            let message = &mut self.output[index];
            message.completed_at = Some(timestamp(at));
            out.push(EventObject::MessageCompleted {
                message: message.clone(),
            });
        }
    }
}

/// `agent/<name>`, with characters the role pattern refuses written as `-`.
pub fn agent_role(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("agent/{name}")
}

/// A tool result as JSON: its text, or its blocks.
fn content_value(content: &Content) -> Value {
    match content {
        Content::Text(text) => Value::String(text.clone()),
        Content::Blocks(blocks) => serde_json::to_value(blocks).unwrap_or(Value::Null),
    }
}

/// A tool call as an output part: `{"id", "name", "input"}` as JSON, with trajectory
/// metadata naming the tool and its input.
pub fn tool_call_part(id: &str, name: &str, input: &serde_json::Map<String, Value>) -> PartObject {
    PartObject::json(
        None,
        &json!({"id": id, "name": name, "input": input}),
        Some(PartMetadata::Trajectory(Trajectory::tool(
            Some(name.to_owned()),
            Some(Value::Object(input.clone())),
            None,
        ))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SessionId, Usage};

    fn event(turn: &TurnId, seq: i64, data: EventData) -> Event {
        Event {
            session_id: SessionId::generate(),
            seq,
            turn_id: Some(*turn),
            data,
            created_at: crate::model::now(),
        }
    }

    #[test]
    fn deltas_stream_as_parts_and_merge_in_the_output() {
        let turn = TurnId::generate();
        let mut renderer = RunRenderer::new(RunIdentity {
            run_id: "r".into(),
            first_turn: turn,
            cancel_turn: None,
            agent_name: "my.agent".into(),
            session_id: "s".into(),
            created_at: crate::model::now(),
            agent: None,
        });
        let events = [
            EventData::TurnStart {},
            EventData::MessageStart {},
            EventData::ThinkingDelta { delta: "hm".into() },
            EventData::ThinkingDelta { delta: "m".into() },
            EventData::TextDelta {
                delta: "Hel".into(),
            },
            EventData::TextDelta { delta: "lo".into() },
            EventData::MessageStop {},
            EventData::TurnStop {
                stop_reason: StopReason::EndTurn,
                error: None,
                usage: Usage::default(),
            },
        ];
        let mut kinds = Vec::new();
        let mut ids = Vec::new();
        for (seq, data) in events.into_iter().enumerate() {
            for (id, rendered) in renderer.render(&event(&turn, seq as i64 + 1, data)) {
                assert_eq!(id.seq, seq as i64 + 1);
                ids.push(id.to_string());
                kinds.push(rendered.kind());
            }
        }
        assert_eq!(
            kinds,
            [
                "run.created",
                "run.in-progress",
                "message.created",
                "message.part",
                "message.part",
                "message.part",
                "message.part",
                "message.completed",
                "generic",
                "run.completed"
            ]
        );
        assert_eq!(
            ids,
            ["1", "1.1", "3", "3.1", "4", "5", "6", "8", "8.1", "8.2"]
        );
        let run = renderer.run();
        assert_eq!(run.status, RunStatus::Completed);
        assert_eq!(run.output.len(), 1);
        assert_eq!(run.output[0].role, "agent/my-agent");
        let parts = &run.output[0].parts;
        assert_eq!(parts.len(), 2);
        assert_eq!(
            serde_json::to_string(&parts[0].metadata).unwrap(),
            r#"{"kind":"trajectory","message":"hmm","tool_name":null,"tool_input":null,"tool_output":null}"#
        );
        assert_eq!(parts[1].content.as_deref(), Some("Hello"));
    }
}
