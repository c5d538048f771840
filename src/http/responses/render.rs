//! A response rendered from its turn's events: the semantic SSE events of the Responses
//! API, each with its `sequence_number`, and the Response object as it stands.
//!
//! Rendering is a function of the turn's events read with their deltas as streamed, so a
//! replay numbers every event exactly as the live stream did: `response.created` is 0,
//! then one number per event rendered. Thinking becomes a `reasoning` item (its text as
//! `reasoning_text` content), text a `message` item, a client tool's call a
//! `function_call` item; server tools' calls and results run inside the turn and are not
//! output items, but for a server tool's call still waiting for the client's permission
//! when the turn stops: an `mcp_approval_request` item.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::approvals::request_item;
use super::ids::item_id;
use crate::model::{Event, EventData, StopReason, TurnError, TurnId, TurnStatus, Usage};

/// Who the response is, as every snapshot shows it.
#[derive(Debug, Clone)]
pub struct Identity {
    pub id: String,
    pub turn: TurnId,
    pub created_at: i64,
    pub model: String,
    pub background: bool,
    pub metadata: Map<String, Value>,
    pub previous_response_id: Option<String>,
    pub conversation: Option<String>,
    /// The session's client tools, as function tools.
    pub tools: Vec<Value>,
    pub client_tools: HashSet<String>,
}

/// One event to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub sequence_number: u64,
    pub kind: &'static str,
    pub data: Value,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum OpenKind {
    Text,
    Reasoning,
}

#[derive(Debug)]
struct Open {
    kind: OpenKind,
    index: usize,
    id: String,
    text: String,
}

#[derive(Debug)]
pub struct Renderer {
    identity: Identity,
    next: u64,
    output: Vec<Value>,
    open: Option<Open>,
    status: &'static str,
    error: Option<Value>,
    incomplete: Option<Value>,
    usage: Option<Usage>,
    completed_at: Option<i64>,
    ended: bool,
    /// Server tools' calls with no result yet: when the turn stops on them, they wait for
    /// the client's permission.
    waiting: Vec<(String, String, Map<String, Value>)>,
}

impl Renderer {
    pub fn new(identity: Identity) -> Self {
        let status = if identity.background {
            "queued"
        } else {
            "in_progress"
        };
        Self {
            identity,
            next: 0,
            output: Vec::new(),
            open: None,
            status,
            error: None,
            incomplete: None,
            usage: None,
            completed_at: None,
            ended: false,
            waiting: Vec::new(),
        }
    }

    /// Whether the terminal event was rendered.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// `response.created`: always the first event.
    pub fn start(&mut self) -> Vec<Rendered> {
        let mut out = Vec::new();
        let response = self.snapshot();
        self.emit(&mut out, "response.created", json!({"response": response}));
        out
    }

    /// The status a turn that has not stopped yet shows.
    pub fn settle(&mut self, status: TurnStatus) {
        if !self.ended && status == TurnStatus::Running {
            self.status = "in_progress";
        }
    }

    pub fn render(&mut self, event: &Event) -> Vec<Rendered> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        match &event.data {
            EventData::TurnStart {} => {
                self.status = "in_progress";
                let response = self.snapshot();
                self.emit(
                    &mut out,
                    "response.in_progress",
                    json!({"response": response}),
                );
            }
            EventData::TextDelta { delta } => {
                self.open_item(&mut out, OpenKind::Text);
                self.delta(&mut out, delta, "response.output_text.delta");
            }
            EventData::ThinkingDelta { delta } => {
                self.open_item(&mut out, OpenKind::Reasoning);
                self.delta(&mut out, delta, "response.reasoning_text.delta");
            }
            EventData::ToolCall {
                tool_call_id,
                name,
                input,
            } if self.identity.client_tools.contains(name) => {
                self.close_item(&mut out, "completed");
                self.function_call(&mut out, tool_call_id, name, input);
            }
            EventData::ToolCall {
                tool_call_id,
                name,
                input,
            } => self
                .waiting
                .push((tool_call_id.clone(), name.clone(), input.clone())),
            EventData::ToolResult { tool_call_id, .. } => {
                self.waiting.retain(|(id, _, _)| id != tool_call_id);
            }
            EventData::MessageStop {} => self.close_item(&mut out, "completed"),
            EventData::TurnStop {
                stop_reason,
                error,
                usage,
            } => {
                let item_status = if error.is_some() || *stop_reason == StopReason::MaxTokens {
                    "incomplete"
                } else {
                    "completed"
                };
                self.close_item(&mut out, item_status);
                if *stop_reason == StopReason::ToolUse && error.is_none() {
                    self.approval_requests(&mut out);
                }
                self.stop(
                    *stop_reason,
                    error.as_ref(),
                    usage,
                    event.created_at.timestamp(),
                );
                let kind = match self.status {
                    "completed" => "response.completed",
                    "incomplete" => "response.incomplete",
                    _ => "response.failed",
                };
                let response = self.snapshot();
                self.emit(&mut out, kind, json!({"response": response}));
                self.ended = true;
            }
            // A session's own event is in no turn, so in no response's stream (a response
            // is one turn's); the Responses API has no event for it.
            EventData::AgentVersionChange { .. } => {}
            _ => {}
        }
        out
    }

    fn stop(&mut self, reason: StopReason, error: Option<&TurnError>, usage: &Usage, at: i64) {
        self.usage = Some(*usage);
        match (error, reason) {
            (Some(error), _) if error.code == TurnError::CANCELLED => {
                self.status = "cancelled";
            }
            // The agent's step limit ended the turn: the answer is cut short, as by a
            // token limit.
            (Some(error), _) if error.code == TurnError::MAX_STEPS => {
                self.status = "incomplete";
                self.incomplete = Some(json!({"reason": TurnError::MAX_STEPS}));
            }
            (Some(error), _) => {
                self.status = "failed";
                self.error = Some(json!({"code": error.code, "message": error.message}));
            }
            (None, StopReason::MaxTokens) => {
                self.status = "incomplete";
                self.incomplete = Some(json!({"reason": "max_output_tokens"}));
            }
            (None, _) => {
                self.status = "completed";
                self.completed_at = Some(at);
            }
        }
    }

    fn emit(&mut self, out: &mut Vec<Rendered>, kind: &'static str, data: Value) {
        let mut data = match data {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        data.insert("type".into(), json!(kind));
        data.insert("sequence_number".into(), json!(self.next));
        out.push(Rendered {
            sequence_number: self.next,
            kind,
            data: Value::Object(data),
        });
        self.next += 1;
    }

    fn open_item(&mut self, out: &mut Vec<Rendered>, kind: OpenKind) {
        if self.open.as_ref().is_some_and(|open| open.kind == kind) {
            return;
        }
        self.close_item(out, "completed");
        let index = self.output.len();
        let (id, item, part) = match kind {
            OpenKind::Text => {
                let id = item_id("msg", &self.identity.turn, index);
                let item = json!({"type": "message", "id": id, "status": "in_progress",
                                  "role": "assistant", "content": []});
                let part = json!({"type": "output_text", "text": "", "annotations": []});
                (id, item, part)
            }
            OpenKind::Reasoning => {
                let id = item_id("rs", &self.identity.turn, index);
                let item = json!({"type": "reasoning", "id": id, "status": "in_progress",
                                  "summary": [], "content": []});
                let part = json!({"type": "reasoning_text", "text": ""});
                (id, item, part)
            }
        };
        self.output.push(item.clone());
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        self.emit(
            out,
            "response.content_part.added",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
        );
        self.open = Some(Open {
            kind,
            index,
            id,
            text: String::new(),
        });
    }

    fn delta(&mut self, out: &mut Vec<Rendered>, delta: &str, kind: &'static str) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        open.text.push_str(delta);
        let mut data = json!({"item_id": open.id, "output_index": open.index,
                              "content_index": 0, "delta": delta});
        if open.kind == OpenKind::Text {
            data["logprobs"] = json!([]);
        }
        self.output[open.index] = item_of(open, "in_progress");
        self.emit(out, kind, data);
    }

    fn close_item(&mut self, out: &mut Vec<Rendered>, status: &str) {
        let Some(open) = self.open.take() else {
            return;
        };
        let (done, part) = match open.kind {
            OpenKind::Text => (
                "response.output_text.done",
                json!({"type": "output_text", "text": open.text, "annotations": []}),
            ),
            OpenKind::Reasoning => (
                "response.reasoning_text.done",
                json!({"type": "reasoning_text", "text": open.text}),
            ),
        };
        let mut data = json!({"item_id": open.id, "output_index": open.index,
                              "content_index": 0, "text": open.text});
        if open.kind == OpenKind::Text {
            data["logprobs"] = json!([]);
        }
        self.emit(out, done, data);
        self.emit(
            out,
            "response.content_part.done",
            json!({"item_id": open.id, "output_index": open.index, "content_index": 0,
                   "part": part}),
        );
        let item = item_of(&open, status);
        self.output[open.index] = item.clone();
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": open.index, "item": item}),
        );
    }

    fn function_call(
        &mut self,
        out: &mut Vec<Rendered>,
        call_id: &str,
        name: &str,
        input: &Map<String, Value>,
    ) {
        let index = self.output.len();
        let id = item_id("fc", &self.identity.turn, index);
        let arguments = Value::Object(input.clone()).to_string();
        let mut item = json!({"type": "function_call", "id": id, "call_id": call_id,
                              "name": name, "arguments": "", "status": "in_progress"});
        self.output.push(item.clone());
        self.emit(
            out,
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        self.emit(
            out,
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": arguments}),
        );
        self.emit(
            out,
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "arguments": arguments}),
        );
        item["arguments"] = json!(arguments);
        item["status"] = json!("completed");
        self.output[index] = item.clone();
        self.emit(
            out,
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }

    /// One `mcp_approval_request` item per call waiting for permission, added and done at
    /// once (the item has no status and nothing streams into it).
    fn approval_requests(&mut self, out: &mut Vec<Rendered>) {
        for (call_id, name, input) in std::mem::take(&mut self.waiting) {
            let index = self.output.len();
            let item = request_item(&call_id, &name, &input);
            self.output.push(item.clone());
            self.emit(
                out,
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            );
            self.emit(
                out,
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
        }
    }

    /// The Response object as it stands.
    pub fn snapshot(&self) -> Value {
        let id = &self.identity;
        let usage = self.usage.as_ref().map(|usage| {
            json!({
                "input_tokens": usage.input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.input_tokens + usage.output_tokens,
            })
        });
        json!({
            "id": id.id,
            "object": "response",
            "created_at": id.created_at,
            "completed_at": self.completed_at,
            "status": self.status,
            "background": id.background,
            "error": self.error,
            "incomplete_details": self.incomplete,
            "instructions": null,
            "model": id.model,
            "output": self.output,
            "previous_response_id": id.previous_response_id,
            "conversation": id.conversation.as_ref().map(|c| json!({"id": c})),
            "usage": usage,
            "metadata": id.metadata,
            "store": true,
            "tools": id.tools,
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "text": {"format": {"type": "text"}},
            "truncation": "disabled",
            "temperature": 1.0,
            "top_p": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "top_logprobs": 0,
            "reasoning": null,
            "max_output_tokens": null,
            "max_tool_calls": null,
            "service_tier": "default",
            "safety_identifier": null,
            "prompt_cache_key": null,
            "user": null,
        })
    }
}

fn item_of(open: &Open, status: &str) -> Value {
    match open.kind {
        OpenKind::Text => json!({
            "type": "message", "id": open.id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": open.text, "annotations": []}],
        }),
        OpenKind::Reasoning => json!({
            "type": "reasoning", "id": open.id, "status": status, "summary": [],
            "content": [{"type": "reasoning_text", "text": open.text}],
        }),
    }
}

/// A session's client tools as the Response's `tools`.
pub fn function_tools(tools: &[crate::model::ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            json!({"type": "function", "name": tool.name,
                   "description": (!tool.description.is_empty()).then_some(&tool.description),
                   "parameters": tool.parameters, "strict": null})
        })
        .collect()
}
