//! OpenAI-compatible Chat Completions (OpenAI, vLLM, Ollama, llama.cpp, DeepSeek, DashScope
//! compatible mode): streamed text, reasoning as thinking, usage, finish reasons, retries.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};

use super::http::{check_chosen_host, endpoint, next_data, send_with_retries, summarize};
use super::tool_names::ToolNames;
use super::{ModelEvent, ModelRequest, Provider, ProviderError, parse_arguments};
use crate::agents::template::render_options;
use crate::config::HttpProviderSettings;
use crate::model::{Content, ContentBlock, HistoryMessage, StopReason, provider_call_id};

pub struct OpenAiProvider {
    http: reqwest::Client,
    model: String,
    settings: HttpProviderSettings,
}

impl OpenAiProvider {
    pub fn new(http: reqwest::Client, model: &str, settings: &HttpProviderSettings) -> Self {
        Self {
            http,
            model: model.to_owned(),
            settings: settings.clone(),
        }
    }
}

/// The conversation as Chat Completions messages (tool names as sent).
fn to_messages<M: std::borrow::Borrow<HistoryMessage>>(
    system_prompt: &str,
    history: &[M],
    names: &ToolNames,
) -> Vec<Value> {
    let mut messages = Vec::with_capacity(history.len() + 1);
    if !system_prompt.is_empty() {
        messages.push(json!({"role": "system", "content": system_prompt}));
    }
    for message in history.iter().map(M::borrow) {
        messages.push(match message {
            HistoryMessage::System { content } => json!({"role": "system", "content": content}),
            HistoryMessage::User { content } => json!({"role": "user", "content": user_content(content)}),
            HistoryMessage::Assistant { content } => assistant_message(content, names),
            HistoryMessage::Tool {
                tool_call_id,
                content,
            } => json!({"role": "tool", "tool_call_id": provider_call_id(tool_call_id), "content": plain_text(content)}),
        });
    }
    messages
}

fn user_content(content: &Content) -> Value {
    match content {
        Content::Text(text) => json!(text),
        Content::Blocks(blocks) => Value::Array(
            blocks
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
                    ContentBlock::Image { url } => {
                        Some(json!({"type": "image_url", "image_url": {"url": url}}))
                    }
                    ContentBlock::Part(part) => {
                        Some(json!({"type": "text", "text": part.describe()}))
                    }
                    _ => None,
                })
                .collect(),
        ),
    }
}

fn plain_text(content: &Content) -> String {
    match content {
        Content::Text(text) => text.clone(),
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// Thinking is not sent back: these APIs take no reasoning in their input.
fn assistant_message(content: &Content, names: &ToolNames) -> Value {
    let text = plain_text(content);
    let tool_calls: Vec<Value> = content
        .blocks()
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse {
                tool_call_id,
                name,
                input,
            } => Some(json!({
                "id": provider_call_id(tool_call_id),
                "type": "function",
                "function": {"name": names.wire(name), "arguments": Value::Object(input.clone()).to_string()}
            })),
            _ => None,
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    message
}

/// Tool calls streamed in fragments, keyed by their `index`: the first fragment has the id
/// and name, the rest add to the JSON arguments.
#[derive(Default)]
struct ToolCallFragments {
    calls: Vec<(u64, String, String, String)>,
}

impl ToolCallFragments {
    fn push(&mut self, fragments: &[Value]) {
        for fragment in fragments {
            let index = fragment["index"]
                .as_u64()
                .unwrap_or(self.calls.len() as u64);
            let position = match self.calls.iter().position(|c| c.0 == index) {
                Some(position) => position,
                None => {
                    self.calls
                        .push((index, String::new(), String::new(), String::new()));
                    self.calls.len() - 1
                }
            };
            let call = &mut self.calls[position];
            if let Some(id) = fragment["id"].as_str() {
                call.1.push_str(id);
            }
            if let Some(name) = fragment["function"]["name"].as_str() {
                call.2.push_str(name);
            }
            if let Some(arguments) = fragment["function"]["arguments"].as_str() {
                call.3.push_str(arguments);
            }
        }
    }

    /// The calls in index order; one sent without an id has an empty one (the engine names
    /// it).
    fn finish(mut self) -> Vec<ModelEvent> {
        self.calls.sort_by_key(|c| c.0);
        self.calls
            .into_iter()
            .map(|(_, id, name, arguments)| {
                let input = parse_arguments(arguments);
                ModelEvent::ToolCall { id, name, input }
            })
            .collect()
    }
}

fn stop_reason(finish: &str) -> StopReason {
    match finish {
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    }
}

impl Provider for OpenAiProvider {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ModelEvent, ProviderError>> {
        let endpoint = endpoint(&self.settings, &request.options, "/chat/completions");
        let allow_private = self.settings.allow_private_base_url;
        let key = render_options(self.settings.api_key.expose(), &request.options);
        let names = ToolNames::for_request(&request.tools, &request.messages);
        let mut body = json!({
            "model": render_options(&self.model, &request.options),
            "messages": to_messages(&request.system_prompt, &request.messages, &names),
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(max) = self.settings.max_output_tokens {
            body["max_tokens"] = json!(max);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                        "name": names.wire(&tool.name),
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }})
                })
                .collect();
        }
        let http = self.http.clone();
        let timeout = Duration::from_secs(self.settings.timeout_seconds);
        let retries = self.settings.max_retries;
        let fail = |message: String| ProviderError { message };

        async_stream::try_stream! {
            let (url, chosen_host) = endpoint?;
            if chosen_host {
                check_chosen_host(&url, allow_private).await?;
            }
            // Polled inside the model step's span: the provider's request is its child.
            let traceparent = crate::traces::current_traceparent();
            let request = || {
                let call = crate::traces::propagate(http.post(&url).json(&body), traceparent.as_deref());
                if key.is_empty() { call } else { call.bearer_auth(&key) }
            };
            let response = send_with_retries(request, timeout, retries, &key).await?;

            let mut events = response.bytes_stream().eventsource();
            let mut stop = None;
            let mut calls = ToolCallFragments::default();
            let mut named = false;
            loop {
                let Some(data) = next_data(&mut events, timeout).await? else {
                    break;
                };
                if data.trim() == "[DONE]" {
                    break;
                }
                let Ok(chunk) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                if let Some(message) = chunk["error"]["message"].as_str() {
                    Err(fail(summarize(reqwest::StatusCode::OK, &json!({"message": message}).to_string(), &key)))?;
                }
                if !named && let Some(model) = chunk["model"].as_str().filter(|m| !m.is_empty()) {
                    named = true;
                    yield ModelEvent::ResponseModel(model.to_owned());
                }
                let choice = &chunk["choices"][0];
                let delta = &choice["delta"];
                for field in ["reasoning_content", "reasoning"] {
                    if let Some(thinking) = delta[field].as_str().filter(|t| !t.is_empty()) {
                        yield ModelEvent::ThinkingDelta(thinking.to_owned());
                    }
                }
                if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                    yield ModelEvent::TextDelta(text.to_owned());
                }
                if let Some(fragments) = delta["tool_calls"].as_array() {
                    calls.push(fragments);
                }
                if let Some(finish) = choice["finish_reason"].as_str() {
                    stop = Some(stop_reason(finish));
                }
                if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
                    yield ModelEvent::Usage {
                        input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                        output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
                    };
                }
            }
            for call in calls.finish() {
                yield match call {
                    ModelEvent::ToolCall { id, name, input } => {
                        ModelEvent::ToolCall { id, name: names.real(&name), input }
                    }
                    other => other,
                };
            }
            match stop {
                Some(reason) => yield ModelEvent::Stop(reason),
                None => Err(fail("the model provider's stream ended without a finish reason".into()))?,
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_becomes_chat_messages() {
        let history = vec![
            HistoryMessage::User {
                content: Content::Blocks(vec![
                    ContentBlock::Text {
                        text: "look".into(),
                    },
                    ContentBlock::Image {
                        url: "https://x/a.png".into(),
                    },
                ]),
            },
            HistoryMessage::Assistant {
                content: Content::Blocks(vec![
                    ContentBlock::Thinking {
                        thinking: "hm".into(),
                    },
                    ContentBlock::Text {
                        text: "a cat".into(),
                    },
                ]),
            },
        ];
        assert_eq!(
            to_messages("Be brief.", &history, &ToolNames::default()),
            vec![
                json!({"role": "system", "content": "Be brief."}),
                json!({"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
                ]}),
                json!({"role": "assistant", "content": "a cat"}),
            ]
        );
    }

    #[test]
    fn streamed_tool_call_fragments_assemble_in_index_order() {
        let mut calls = ToolCallFragments::default();
        calls.push(&[
            json!({"index": 1, "id": "b", "type": "function", "function": {"name": "clock", "arguments": ""}}),
            json!({"index": 0, "id": "a", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":"}}),
        ]);
        calls.push(&[json!({"index": 0, "function": {"arguments": "\"cats\"}"}})]);
        calls.push(&[json!({"index": 1, "function": {"arguments": "{}"}})]);
        let events = calls.finish();
        assert_eq!(
            events,
            vec![
                ModelEvent::ToolCall {
                    id: "a".into(),
                    name: "lookup".into(),
                    input: serde_json::from_value(json!({"q": "cats"})).unwrap()
                },
                ModelEvent::ToolCall {
                    id: "b".into(),
                    name: "clock".into(),
                    input: serde_json::Map::new()
                },
            ]
        );
    }

    #[test]
    fn error_summaries_keep_the_message_and_drop_the_key() {
        let body = r#"{"error": {"message": "Incorrect API key provided: sk-abc123"}}"#;
        let summary = summarize(reqwest::StatusCode::UNAUTHORIZED, body, "sk-abc123");
        assert!(summary.contains("401"));
        assert!(summary.contains("Incorrect API key"));
        assert!(!summary.contains("sk-abc123"));
        assert_eq!(stop_reason("length"), StopReason::MaxTokens);
        assert_eq!(stop_reason("content_filter"), StopReason::Refusal);
    }
}
