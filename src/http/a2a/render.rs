//! A task's event log as A2A events, and the task they build up. Rendering is a pure
//! function of the log (plus a cancellation while input was required), so a replay renders
//! exactly what the live stream sent, and every frame has a unique id: the seq of the event
//! it came from and its place among that event's frames.
//!
//! - A turn's start is a `working` status.
//! - Each assistant message with text is an artifact (`artifact-<seq of its start>`): its
//!   first text delta starts it (`append` false), later deltas append parts, and its end is
//!   one more chunk, an empty text part with `lastChunk` true.
//! - Thinking, tool calls and server tools' results are `working` status messages: thinking
//!   as a text part with metadata `{"agentry": {"kind": "thinking"}}` (sent when the
//!   thinking ends), calls and results as data parts `{"toolCall": …}`, `{"toolResult": …}`.
//! - A turn that stops on calls the client must answer is `input-required`; its status
//!   message holds a text part and a data part `{"toolCalls": [{id, name, arguments,
//!   answer: "result" | "permission"}]}`. Any other stop is `completed`, `failed` (the
//!   error's message and code) or `canceled`.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::wire::{Artifact, Body, MessageOut, PartOut, Role, State, Status, StreamEvent, Task};
use crate::agents::Agent;
use crate::http::frame_id::FrameId;
use crate::model::{Event, EventData, Run, RunStatus, StopReason, TurnError, TurnId, TurnStatus};

/// What the task is and where it belongs.
#[derive(Debug, Clone)]
pub struct TaskIdentity {
    pub task_id: String,
    pub context_id: String,
    /// The turn that answered the calls of a run cancelled while it awaited: it renders as
    /// the task's `canceled` alone.
    pub cancel_turn: Option<TurnId>,
    pub created_at: DateTime<Utc>,
    /// The agent (none once it is no longer configured): its server tools' calls wait for
    /// a permission, not a result.
    pub agent: Option<Arc<Agent>>,
}

#[derive(Debug, Clone)]
struct Call {
    id: String,
    name: String,
    input: Map<String, Value>,
}

#[derive(Debug)]
pub struct TaskRenderer {
    identity: TaskIdentity,
    status: Status,
    artifacts: Vec<Artifact>,
    /// The seq of the open message's start, and its artifact's index once it has text.
    message: Option<(i64, Option<usize>)>,
    thinking: String,
    calls: Vec<Call>,
    call_names: HashMap<String, String>,
    last_seq: i64,
    last_frames: u32,
}

impl TaskRenderer {
    pub fn new(identity: TaskIdentity) -> Self {
        let status = Status {
            state: State::Submitted,
            message: None,
            timestamp: identity.created_at,
        };
        Self {
            identity,
            status,
            artifacts: Vec::new(),
            message: None,
            thinking: String::new(),
            calls: Vec::new(),
            call_names: HashMap::new(),
            last_seq: 0,
            last_frames: 0,
        }
    }

    /// The task as it stands (its history is the caller's to add).
    pub fn task(&self) -> Task {
        Task {
            id: self.identity.task_id.clone(),
            context_id: self.identity.context_id.clone(),
            status: self.status.clone(),
            artifacts: self.artifacts.clone(),
            history: Vec::new(),
        }
    }

    /// A cursor after every frame rendered so far (`START` before any event).
    pub fn last_frame(&self) -> FrameId {
        match self.last_frames {
            0 if self.last_seq == 0 => FrameId::START,
            0 => FrameId::new(self.last_seq, 0),
            n => FrameId::new(self.last_seq, n - 1),
        }
    }

    /// The A2A events one engine event becomes (often none), each with its frame id.
    pub fn render(&mut self, event: &Event) -> Vec<(FrameId, StreamEvent)> {
        let mut out = Vec::new();
        if self.identity.cancel_turn.is_some() && self.identity.cancel_turn == event.turn_id {
            if event.data.is_turn_stop() && self.status.state == State::InputRequired {
                self.calls.clear();
                out.push(self.set_status(State::Canceled, None, event.created_at));
            }
        } else {
            self.render_data(event, &mut out);
        }
        self.last_seq = event.seq;
        self.last_frames = out.len() as u32;
        out.into_iter()
            .enumerate()
            .map(|(k, e)| (FrameId::new(event.seq, k as u32), e))
            .collect()
    }

    fn render_data(&mut self, event: &Event, out: &mut Vec<StreamEvent>) {
        let at = event.created_at;
        if !matches!(event.data, EventData::ThinkingDelta { .. }) && !self.thinking.is_empty() {
            let thinking = std::mem::take(&mut self.thinking);
            let mut part = PartOut::text(thinking);
            part.metadata = Some(json!({"agentry": {"kind": "thinking"}}));
            let message = self.agent_message(event, out.len(), vec![part]);
            out.push(self.set_status(State::Working, Some(message), at));
        }
        match &event.data {
            EventData::TurnStart {} => {
                self.calls.clear();
                out.push(self.set_status(State::Working, None, at));
            }
            EventData::MessageStart {} => self.message = Some((event.seq, None)),
            EventData::TextDelta { delta } => out.push(self.text(event.seq, delta)),
            EventData::ThinkingDelta { delta } => self.thinking.push_str(delta),
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
                });
                let part = PartOut::data(json!({"toolCall": {
                    "id": tool_call_id, "name": name, "arguments": input,
                }}));
                let message = self.agent_message(event, out.len(), vec![part]);
                out.push(self.set_status(State::Working, Some(message), at));
            }
            EventData::ToolResult {
                tool_call_id,
                content,
            } => {
                self.calls.retain(|c| c.id != *tool_call_id);
                let part = PartOut::data(json!({"toolResult": {
                    "toolCallId": tool_call_id,
                    "name": self.call_names.get(tool_call_id),
                    "content": content,
                }}));
                let message = self.agent_message(event, out.len(), vec![part]);
                out.push(self.set_status(State::Working, Some(message), at));
            }
            EventData::MessageStop {} => out.extend(self.close_message()),
            EventData::Usage { .. } | EventData::Compaction { .. } => {}
            // A session's own event is in no turn, so in no task's stream (a task follows
            // its turns); A2A has no event for it.
            EventData::AgentVersionChange { .. } => {}
            EventData::TurnStop {
                stop_reason, error, ..
            } => {
                out.extend(self.close_message());
                out.push(self.stop(event, out.len(), *stop_reason, error.as_ref()));
            }
        }
    }

    /// A text delta: the open message's artifact starts or grows.
    fn text(&mut self, seq: i64, delta: &str) -> StreamEvent {
        let (start, artifact) = self.message.get_or_insert((seq, None));
        let (index, append) = match artifact {
            Some(index) => {
                if let Some(PartOut {
                    body: Body::Text(text),
                    ..
                }) = self.artifacts[*index].parts.last_mut()
                {
                    text.push_str(delta);
                }
                (*index, true)
            }
            None => {
                self.artifacts.push(Artifact {
                    artifact_id: format!("artifact-{start}"),
                    parts: vec![PartOut::text(delta)],
                });
                *artifact = Some(self.artifacts.len() - 1);
                (self.artifacts.len() - 1, false)
            }
        };
        self.chunk(index, delta, append, false)
    }

    fn chunk(&self, index: usize, text: &str, append: bool, last_chunk: bool) -> StreamEvent {
        StreamEvent::Artifact {
            task_id: self.identity.task_id.clone(),
            context_id: self.identity.context_id.clone(),
            artifact: Artifact {
                artifact_id: self.artifacts[index].artifact_id.clone(),
                parts: vec![PartOut::text(text)],
            },
            append,
            last_chunk,
        }
    }

    /// The open message ends: its artifact's last chunk, when it has one.
    fn close_message(&mut self) -> Option<StreamEvent> {
        let (_, artifact) = self.message.take()?;
        Some(self.chunk(artifact?, "", true, true))
    }

    fn stop(
        &mut self,
        event: &Event,
        k: usize,
        reason: StopReason,
        error: Option<&TurnError>,
    ) -> StreamEvent {
        let at = event.created_at;
        if reason == StopReason::ToolUse && error.is_none() && !self.calls.is_empty() {
            let message = self.agent_message(event, k, self.input_request());
            return self.set_status(State::InputRequired, Some(message), at);
        }
        self.calls.clear();
        match TurnStatus::after_stop(reason, error) {
            TurnStatus::Cancelled => self.set_status(State::Canceled, None, at),
            TurnStatus::Failed | TurnStatus::Interrupted => {
                let (code, text) = error.map_or(("failed", "the task failed"), |e| {
                    (e.code.as_str(), e.message.as_str())
                });
                let parts = vec![PartOut::text(text), PartOut::data(json!({"code": code}))];
                let message = self.agent_message(event, k, parts);
                self.set_status(State::Failed, Some(message), at)
            }
            _ => self.set_status(State::Completed, None, at),
        }
    }

    /// What an input-required task asks: the calls to answer, and a line for people.
    fn input_request(&self) -> Vec<PartOut> {
        let server_tool = |name: &str| {
            self.identity
                .agent
                .as_ref()
                .is_some_and(|a| a.has_server_tool(name))
        };
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(|c| {
                let answer = if server_tool(&c.name) {
                    "permission"
                } else {
                    "result"
                };
                json!({"id": c.id, "name": c.name, "arguments": c.input, "answer": answer})
            })
            .collect();
        let names: Vec<String> = self
            .calls
            .iter()
            .map(|c| {
                if server_tool(&c.name) {
                    format!("permission to run {}", c.name)
                } else {
                    format!("the result of {}", c.name)
                }
            })
            .collect();
        vec![
            PartOut::text(format!("The agent needs {}.", names.join(", "))),
            PartOut::data(json!({ "toolCalls": calls })),
        ]
    }

    fn agent_message(&self, event: &Event, k: usize, parts: Vec<PartOut>) -> MessageOut {
        MessageOut {
            message_id: format!("{}-{}.{k}", self.identity.task_id, event.seq),
            context_id: self.identity.context_id.clone(),
            task_id: Some(self.identity.task_id.clone()),
            role: Role::Agent,
            parts,
        }
    }

    fn set_status(
        &mut self,
        state: State,
        message: Option<MessageOut>,
        at: DateTime<Utc>,
    ) -> StreamEvent {
        self.status = Status {
            state,
            message,
            timestamp: at,
        };
        StreamEvent::Status {
            task_id: self.identity.task_id.clone(),
            context_id: self.identity.context_id.clone(),
            status: self.status.clone(),
        }
    }

    /// Brings a task rendered from its log to the status the engine keeps for its run,
    /// where the log alone cannot tell: a resume whose turn has not started is working;
    /// calls a turn outside the run answered leave it completed; a run cancelled while it
    /// awaited, before cancelling wrote a turn of its own, is canceled (that frame follows
    /// the last event's).
    pub fn settle(&mut self, run: &Run) -> Option<(FrameId, StreamEvent)> {
        if self.status.state != State::InputRequired {
            return None;
        }
        let at = run.updated_at;
        match run.status {
            RunStatus::Running | RunStatus::Created => {
                self.set_status(State::Working, None, at);
                None
            }
            RunStatus::Completed => {
                self.set_status(State::Completed, None, at);
                None
            }
            RunStatus::Cancelled => {
                let event = self.set_status(State::Canceled, None, run.cancelled_at.unwrap_or(at));
                let id = FrameId::new(self.last_seq, self.last_frames);
                self.last_frames += 1;
                Some((id, event))
            }
            _ => None,
        }
    }
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
    fn a_reply_streams_as_one_artifact_and_a_tool_stop_requires_input() {
        let turn = TurnId::generate();
        let mut renderer = TaskRenderer::new(TaskIdentity {
            task_id: "run_1".into(),
            context_id: "ctx".into(),
            cancel_turn: None,
            created_at: crate::model::now(),
            agent: None,
        });
        let events = [
            EventData::TurnStart {},
            EventData::MessageStart {},
            EventData::ThinkingDelta { delta: "hm".into() },
            EventData::TextDelta {
                delta: "Hel".into(),
            },
            EventData::TextDelta { delta: "lo".into() },
            EventData::ToolCall {
                tool_call_id: "c1".into(),
                name: "weather".into(),
                input: Map::new(),
            },
            EventData::MessageStop {},
            EventData::TurnStop {
                stop_reason: StopReason::ToolUse,
                error: None,
                usage: Usage::default(),
            },
        ];
        let mut frames = Vec::new();
        for (seq, data) in events.into_iter().enumerate() {
            for (id, rendered) in renderer.render(&event(&turn, seq as i64 + 1, data)) {
                frames.push((id.to_string(), rendered));
            }
        }
        let ids: Vec<&str> = frames.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["1", "4", "4.1", "5", "6", "7", "8"]);
        let StreamEvent::Artifact {
            append, last_chunk, ..
        } = &frames[2].1
        else {
            panic!("the first text starts the artifact: {:?}", frames[2]);
        };
        assert!(!*append && !*last_chunk);
        let StreamEvent::Artifact {
            append, last_chunk, ..
        } = &frames[5].1
        else {
            panic!("the message's end is the last chunk");
        };
        assert!(*append && *last_chunk);
        let task = renderer.task();
        assert_eq!(task.status.state, State::InputRequired);
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(task.artifacts[0].artifact_id, "artifact-2");
        assert_eq!(task.artifacts[0].parts, vec![PartOut::text("Hello")]);
        let asked = &task.status.message.as_ref().unwrap().parts[1];
        assert_eq!(
            asked.body,
            Body::Data(
                json!({"toolCalls": [{"id": "c1", "name": "weather", "arguments": {}, "answer": "result"}]})
            )
        );
        assert_eq!(renderer.last_frame(), FrameId::new(8, 0));
    }
}
