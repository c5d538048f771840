//! One turn's event log as an AgentScope response stream: response `created` and
//! `in_progress`, then per message `in_progress`, content deltas, content `completed`,
//! message `completed`, and a terminal response. Rendering is a pure function of the log,
//! so a replay numbers its frames exactly as the live stream did.

use std::collections::HashMap;

use serde_json::json;

use super::wire::{ContentBody, ContentObject, ErrorObject, MessageObject, ResponseObject};
use crate::http::sse::Frame;
use crate::model::{Content, Event, EventData, StopReason, TurnError, Usage};

/// What the response is called and where it belongs.
#[derive(Debug, Clone)]
pub struct ResponseIdentity {
    /// The request's `id`, or the turn id.
    pub id: String,
    /// The client's session key (or the agentry session id).
    pub session_id: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Distinguishes message ids between turns.
    pub turn_key: String,
    /// The agent's MCP tools (`mcp_call` rather than `plugin_call`): names, or
    /// `<server>.*` for all of a server's.
    pub mcp_tools: Vec<String>,
}

impl ResponseIdentity {
    fn is_mcp_tool(&self, name: &str) -> bool {
        self.mcp_tools
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => name.len() > prefix.len() && name.starts_with(prefix),
                None => pattern == name,
            })
    }
}

/// A text or reasoning message being streamed.
struct OpenMessage {
    id: String,
    kind: &'static str,
    text: String,
}

pub struct AgentScopeRenderer {
    identity: ResponseIdentity,
    next_seq: u64,
    messages: u32,
    open: Option<OpenMessage>,
    output: Vec<MessageObject>,
    call_names: HashMap<String, String>,
    /// The terminal response, once rendered.
    pub last: Option<ResponseObject>,
}

impl AgentScopeRenderer {
    pub fn new(identity: ResponseIdentity) -> Self {
        Self {
            identity,
            next_seq: 0,
            messages: 0,
            open: None,
            output: Vec::new(),
            call_names: HashMap::new(),
            last: None,
        }
    }

    /// The frames one engine event becomes (often none).
    pub fn render(&mut self, event: &Event) -> Vec<Frame> {
        let mut frames = Vec::new();
        match &event.data {
            EventData::TurnStart {} => {
                let created = self.response("created");
                self.push(&mut frames, created);
                let running = self.response("in_progress");
                self.push(&mut frames, running);
            }
            EventData::ThinkingDelta { delta } => self.delta(&mut frames, "reasoning", delta),
            EventData::TextDelta { delta } => self.delta(&mut frames, "message", delta),
            EventData::MessageStop {} => self.close(&mut frames),
            EventData::ToolCall {
                tool_call_id,
                name,
                input,
            } => {
                self.close(&mut frames);
                self.call_names.insert(tool_call_id.clone(), name.clone());
                let mcp = self.identity.is_mcp_tool(name);
                let kind = if mcp { "mcp_call" } else { "plugin_call" };
                let arguments = serde_json::Value::Object(input.clone()).to_string();
                let data = |arguments: &str| json!({"call_id": tool_call_id, "name": name, "arguments": arguments});
                self.data_message(&mut frames, kind, "assistant", data(""), data(&arguments));
            }
            EventData::ToolResult {
                tool_call_id,
                content,
            } => {
                self.close(&mut frames);
                let name = self
                    .call_names
                    .get(tool_call_id)
                    .cloned()
                    .unwrap_or_default();
                let mcp = self.identity.is_mcp_tool(&name);
                let kind = if mcp {
                    "mcp_call_output"
                } else {
                    "plugin_call_output"
                };
                let output = output_string(content);
                let data =
                    |output: &str| json!({"call_id": tool_call_id, "name": name, "output": output});
                self.data_message(&mut frames, kind, "tool", data(""), data(&output));
            }
            EventData::TurnStop {
                stop_reason,
                error,
                usage,
            } => {
                self.close(&mut frames);
                let mut done = self.response(status_of(*stop_reason, error.as_ref()));
                done.output = Some(self.output.clone());
                done.usage = Some(usage_of(usage));
                if done.status == "failed" || done.status == "canceled" {
                    done.error = error.as_ref().map(|e| ErrorObject {
                        code: e.code.clone(),
                        message: e.message.clone(),
                    });
                } else {
                    done.completed_at = Some(event.created_at.timestamp());
                    if let Some(e) = error {
                        done.error = Some(ErrorObject {
                            code: e.code.clone(),
                            message: e.message.clone(),
                        });
                    }
                }
                self.push(&mut frames, done);
            }
            EventData::MessageStart {} | EventData::Usage { .. } | EventData::Compaction { .. } => {
            }
            // A session's own event is in no turn, so in no response's stream (a response
            // is one turn); AgentScope has no event for it.
            EventData::AgentVersionChange { .. } => {}
        }
        frames
    }

    fn response(&self, status: &'static str) -> ResponseObject {
        ResponseObject {
            sequence_number: None,
            object: "response",
            status,
            error: None,
            id: self.identity.id.clone(),
            created_at: self.identity.created_at,
            completed_at: None,
            output: None,
            usage: None,
            session_id: self.identity.session_id.clone(),
        }
    }

    /// Stamps the next sequence number on `object` and adds its frame.
    fn push(&mut self, frames: &mut Vec<Frame>, mut object: impl Stamped) {
        let seq = self.next_seq;
        self.next_seq += 1;
        object.stamp(seq);
        frames.push(Frame {
            id: Some(seq as i64),
            event: None,
            data: object.json(),
        });
        object.keep(self);
    }

    fn new_message_id(&mut self) -> String {
        self.messages += 1;
        format!("msg_{}_{}", self.identity.turn_key, self.messages)
    }

    fn message(&self, id: &str, kind: &'static str, role: &'static str) -> MessageObject {
        MessageObject {
            sequence_number: None,
            object: "message",
            status: "in_progress",
            error: None,
            id: id.to_owned(),
            kind,
            role,
            content: None,
            code: None,
            message: None,
            usage: None,
            metadata: Some(json!({})),
        }
    }

    fn delta(&mut self, frames: &mut Vec<Frame>, kind: &'static str, delta: &str) {
        if self.open.as_ref().is_some_and(|m| m.kind != kind) {
            self.close(frames);
        }
        if self.open.is_none() {
            let id = self.new_message_id();
            let started = self.message(&id, kind, "assistant");
            self.push(frames, started);
            self.open = Some(OpenMessage {
                id,
                kind,
                text: String::new(),
            });
        }
        let open = self.open.as_mut().expect("a message is open");
        open.text.push_str(delta);
        let content = ContentObject {
            sequence_number: None,
            object: "content",
            status: Some("in_progress"),
            error: None,
            kind: "text",
            index: Some(0),
            delta: Some(true),
            msg_id: Some(open.id.clone()),
            body: ContentBody::Text {
                text: delta.to_owned(),
            },
        };
        self.push(frames, content);
    }

    /// Completes the open text or reasoning message: its whole content, then itself.
    fn close(&mut self, frames: &mut Vec<Frame>) {
        let Some(open) = self.open.take() else {
            return;
        };
        let mut content = ContentObject {
            sequence_number: None,
            object: "content",
            status: Some("completed"),
            error: None,
            kind: "text",
            index: Some(0),
            delta: None,
            msg_id: Some(open.id.clone()),
            body: ContentBody::Text { text: open.text },
        };
        content.sequence_number = Some(self.next_seq);
        self.push(frames, content.clone());
        let mut message = self.message(&open.id, open.kind, "assistant");
        message.status = "completed";
        message.content = Some(vec![content]);
        self.push(frames, message);
    }

    /// A tool call or result: the message, its data content started and completed, and the
    /// completed message.
    fn data_message(
        &mut self,
        frames: &mut Vec<Frame>,
        kind: &'static str,
        role: &'static str,
        started: serde_json::Value,
        finished: serde_json::Value,
    ) {
        let id = self.new_message_id();
        let message = self.message(&id, kind, role);
        self.push(frames, message.clone());
        let content = |status, index, data| ContentObject {
            sequence_number: None,
            object: "content",
            status: Some(status),
            error: None,
            kind: "data",
            index,
            delta: Some(false),
            msg_id: Some(id.clone()),
            body: ContentBody::Data { data },
        };
        // As the reference does: a call's first data content has no index, an output's has 0.
        let first_index = (role == "tool").then_some(0);
        self.push(frames, content("in_progress", first_index, started));
        self.push(frames, content("completed", Some(0), finished.clone()));
        let mut completed = message;
        completed.status = "completed";
        completed.content = Some(vec![ContentObject::whole(ContentBody::Data {
            data: finished,
        })]);
        self.push(frames, completed);
    }
}

/// Objects that carry a sequence number and go out as one frame.
trait Stamped {
    fn stamp(&mut self, seq: u64);
    fn json(&self) -> String;
    /// Remembers what the response needs of it (completed messages, the terminal response).
    fn keep(self, renderer: &mut AgentScopeRenderer);
}

impl Stamped for ResponseObject {
    fn stamp(&mut self, seq: u64) {
        self.sequence_number = Some(seq);
    }
    fn json(&self) -> String {
        serde_json::to_string(self).expect("responses serialize")
    }
    fn keep(self, renderer: &mut AgentScopeRenderer) {
        if self.output.is_some() {
            renderer.last = Some(self);
        }
    }
}

impl Stamped for MessageObject {
    fn stamp(&mut self, seq: u64) {
        self.sequence_number = Some(seq);
    }
    fn json(&self) -> String {
        serde_json::to_string(self).expect("messages serialize")
    }
    fn keep(self, renderer: &mut AgentScopeRenderer) {
        if self.status == "completed" {
            renderer.output.push(self);
        }
    }
}

impl Stamped for ContentObject {
    fn stamp(&mut self, seq: u64) {
        self.sequence_number = Some(seq);
    }
    fn json(&self) -> String {
        serde_json::to_string(self).expect("contents serialize")
    }
    fn keep(self, _: &mut AgentScopeRenderer) {}
}

/// A tool result as the reference writes it: a JSON string of content blocks.
fn output_string(content: &Content) -> String {
    match content {
        Content::Text(text) => json!([{"type": "text", "text": text}]).to_string(),
        Content::Blocks(blocks) => serde_json::to_string(blocks).expect("blocks serialize"),
    }
}

fn usage_of(usage: &Usage) -> serde_json::Value {
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}

/// The response status a turn's end becomes (the seed's RunStatus values).
fn status_of(stop_reason: StopReason, error: Option<&TurnError>) -> &'static str {
    match (stop_reason, error) {
        (_, Some(error)) if error.code == TurnError::CANCELLED => "canceled",
        (StopReason::Error, _) => "failed",
        (StopReason::MaxTokens, _) => "incomplete",
        _ => "completed",
    }
}
