//! A chat completion rendered from its turn's events: the `chat.completion.chunk` objects
//! of a stream, and the `chat.completion` object once the turn stopped.
//!
//! The turn's text (every assistant message of it, in order) is the choice's content;
//! thinking is not part of Chat Completions and is left out; a client tool's call is a
//! `tool_calls` entry; server tools run inside the turn and are not shown. A turn that
//! failed (or was cancelled or interrupted) has no completion: its error is rendered in
//! OpenAI's error shape instead.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::error::ErrorBody;
use crate::model::{Event, EventData, StopReason, TurnError, TurnId, Usage};

/// Who the completion is.
#[derive(Debug, Clone)]
pub struct ChatIdentity {
    /// `chatcmpl-` + the turn's hex.
    pub id: String,
    pub created: i64,
    pub model: String,
    pub client_tools: HashSet<String>,
    /// Every chunk carries `usage` (null but on the last), as `stream_options.include_usage`
    /// asks.
    pub include_usage: bool,
}

pub fn completion_id(turn: &TurnId) -> String {
    format!("chatcmpl-{}", turn.hex())
}

/// How the turn ended.
#[derive(Debug, Clone)]
pub enum Ending {
    /// `finish_reason` and what the turn used.
    Finished(&'static str, Usage),
    Failed(TurnError),
}

#[derive(Debug)]
pub struct ChatRenderer {
    identity: ChatIdentity,
    content: String,
    tool_calls: Vec<Value>,
    ending: Option<Ending>,
}

impl ChatRenderer {
    pub fn new(identity: ChatIdentity) -> Self {
        Self {
            identity,
            content: String::new(),
            tool_calls: Vec::new(),
            ending: None,
        }
    }

    pub fn ending(&self) -> Option<&Ending> {
        self.ending.as_ref()
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        let mut chunk = json!({
            "id": self.identity.id,
            "object": "chat.completion.chunk",
            "created": self.identity.created,
            "model": self.identity.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null,
                         "finish_reason": finish_reason}],
        });
        if self.identity.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    /// The first chunk: the assistant's role.
    pub fn start(&self) -> Value {
        self.chunk(json!({"role": "assistant", "content": ""}), None)
    }

    /// The chunks an event adds (none for most).
    pub fn render(&mut self, event: &Event) -> Vec<Value> {
        if self.ending.is_some() {
            return Vec::new();
        }
        match &event.data {
            EventData::TextDelta { delta } if !delta.is_empty() => {
                self.content.push_str(delta);
                vec![self.chunk(json!({"content": delta}), None)]
            }
            EventData::ToolCall {
                tool_call_id,
                name,
                input,
            } if self.identity.client_tools.contains(name) => {
                let index = self.tool_calls.len();
                let arguments = Value::Object(input.clone()).to_string();
                self.tool_calls.push(json!({
                    "id": tool_call_id, "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }));
                vec![
                    self.chunk(
                        json!({"tool_calls": [{"index": index, "id": tool_call_id,
                            "type": "function", "function": {"name": name, "arguments": ""}}]}),
                        None,
                    ),
                    self.chunk(
                        json!({"tool_calls": [{"index": index,
                            "function": {"arguments": arguments}}]}),
                        None,
                    ),
                ]
            }
            EventData::TurnStop {
                stop_reason,
                error,
                usage,
            } => {
                if let Some(error) = error {
                    self.ending = Some(Ending::Failed(error.clone()));
                    return Vec::new();
                }
                let reason = match stop_reason {
                    StopReason::ToolUse if !self.tool_calls.is_empty() => "tool_calls",
                    StopReason::MaxTokens => "length",
                    StopReason::Refusal => "content_filter",
                    _ => "stop",
                };
                self.ending = Some(Ending::Finished(reason, *usage));
                let mut chunks = vec![self.chunk(json!({}), Some(reason))];
                if self.identity.include_usage {
                    chunks.push(json!({
                        "id": self.identity.id,
                        "object": "chat.completion.chunk",
                        "created": self.identity.created,
                        "model": self.identity.model,
                        "choices": [],
                        "usage": usage_of(usage),
                    }));
                }
                chunks
            }
            _ => Vec::new(),
        }
    }

    /// The `chat.completion` object of a finished turn; `None` until it finished.
    pub fn completion(&self) -> Option<Value> {
        let Some(Ending::Finished(reason, usage)) = &self.ending else {
            return None;
        };
        let mut message = json!({
            "role": "assistant",
            // OpenAI's `null` when the reply is only tool calls.
            "content": (!self.content.is_empty() || self.tool_calls.is_empty())
                .then_some(&self.content),
            "refusal": null,
        });
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = json!(self.tool_calls);
        }
        Some(json!({
            "id": self.identity.id,
            "object": "chat.completion",
            "created": self.identity.created,
            "model": self.identity.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reason,
                         "logprobs": null}],
            "usage": usage_of(usage),
        }))
    }
}

fn usage_of(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
    })
}

/// A failed turn's error, in OpenAI's shape (`server_error`, the turn's error code).
pub fn turn_failure(error: &TurnError) -> super::error::OpenAiError {
    super::error::OpenAiError::new(
        actix_web::http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("the agent's turn ended without a reply: {}", error.message),
    )
    .code(&error.code)
}

/// The error frame a stream sends when its turn failed.
pub fn failure_frame(error: &TurnError) -> ErrorBody {
    turn_failure(error).body()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SessionId;

    fn event(data: EventData) -> Event {
        Event {
            session_id: SessionId::generate(),
            seq: 1,
            turn_id: None,
            data,
            created_at: crate::model::now(),
        }
    }

    #[test]
    fn thinking_and_server_tools_are_left_out() {
        let identity = ChatIdentity {
            id: "chatcmpl-x".into(),
            created: 1,
            model: "m".into(),
            client_tools: HashSet::from(["lookup".to_owned()]),
            include_usage: false,
        };
        let mut renderer = ChatRenderer::new(identity);
        let call = |name: &str| EventData::ToolCall {
            tool_call_id: format!("call_{name}"),
            name: name.into(),
            input: Default::default(),
        };
        let mut chunks = Vec::new();
        for data in [
            EventData::ThinkingDelta { delta: "hm".into() },
            EventData::TextDelta { delta: "Hi".into() },
            call("clock"),
            call("lookup"),
            EventData::TurnStop {
                stop_reason: StopReason::ToolUse,
                error: None,
                usage: Usage::default(),
            },
        ] {
            chunks.extend(renderer.render(&event(data)));
        }
        assert_eq!(chunks.len(), 4, "{chunks:?}");
        let completion = renderer.completion().unwrap();
        let choice = &completion["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(choice["message"]["content"], "Hi");
        assert_eq!(choice["message"]["tool_calls"][0]["id"], "call_lookup");
    }
}
