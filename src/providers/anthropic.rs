//! The Anthropic Messages API: streamed text, thinking, tool use, usage and stop reasons.

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

const API_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by this API; used when the agent sets none.
const DEFAULT_MAX_TOKENS: u32 = 4096;

pub struct AnthropicProvider {
    http: reqwest::Client,
    model: String,
    settings: HttpProviderSettings,
}

impl AnthropicProvider {
    pub fn new(http: reqwest::Client, model: &str, settings: &HttpProviderSettings) -> Self {
        Self {
            http,
            model: model.to_owned(),
            settings: settings.clone(),
        }
    }
}

fn image_block(url: &str) -> Value {
    match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
    {
        Some((meta, data)) => json!({"type": "image", "source": {
            "type": "base64",
            "media_type": meta.trim_end_matches(";base64"),
            "data": data,
        }}),
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

fn blocks(content: &Content, names: &ToolNames) -> Vec<Value> {
    match content {
        Content::Text(text) => vec![json!({"type": "text", "text": text})],
        Content::Blocks(blocks) => blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
                ContentBlock::Image { url } => Some(image_block(url)),
                ContentBlock::Part(part) => Some(json!({"type": "text", "text": part.describe()})),
                ContentBlock::ToolUse {
                    tool_call_id,
                    name,
                    input,
                } => Some(
                    json!({"type": "tool_use", "id": provider_call_id(tool_call_id), "name": names.wire(name), "input": input}),
                ),
                // Thinking goes back only with the signature this API issued; none is kept.
                ContentBlock::Thinking { .. } => None,
            })
            .collect(),
    }
}

/// The system prompt (with any system messages) and the alternating user/assistant turns
/// this API wants: tool results travel in user messages; neighbours of one role merge.
fn to_request<M: std::borrow::Borrow<HistoryMessage>>(
    system_prompt: &str,
    history: &[M],
    names: &ToolNames,
) -> (String, Vec<Value>) {
    let mut system = system_prompt.to_owned();
    let mut messages: Vec<(&str, Vec<Value>)> = Vec::new();
    for message in history.iter().map(M::borrow) {
        let (role, content) = match message {
            HistoryMessage::System { content } => {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(content);
                continue;
            }
            HistoryMessage::User { content } => ("user", blocks(content, names)),
            HistoryMessage::Assistant { content } => ("assistant", blocks(content, names)),
            HistoryMessage::Tool {
                tool_call_id,
                content,
            } => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": provider_call_id(tool_call_id), "content": blocks(content, names)}),
                ],
            ),
        };
        if content.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(content),
            _ => messages.push((role, content)),
        }
    }
    let messages = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    (system, messages)
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "max_tokens" => StopReason::MaxTokens,
        "tool_use" => StopReason::ToolUse,
        "refusal" => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}

impl Provider for AnthropicProvider {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ModelEvent, ProviderError>> {
        let endpoint = endpoint(&self.settings, &request.options, "/messages");
        let allow_private = self.settings.allow_private_base_url;
        let key = render_options(self.settings.api_key.expose(), &request.options);
        let names = ToolNames::for_request(&request.tools, &request.messages);
        let (system, messages) = to_request(&request.system_prompt, &request.messages, &names);
        let mut body = json!({
            "model": render_options(&self.model, &request.options),
            "max_tokens": self.settings.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": messages,
            "stream": true,
        });
        if !system.is_empty() {
            body["system"] = json!(system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"name": names.wire(&t.name), "description": t.description, "input_schema": t.parameters}))
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
                let call = http.post(&url)
                    .header("x-api-key", &key)
                    .header("anthropic-version", API_VERSION)
                    .json(&body);
                crate::traces::propagate(call, traceparent.as_deref())
            };
            let response = send_with_retries(request, timeout, retries, &key).await?;
            let mut events = response.bytes_stream().eventsource();
            // Tool-use blocks in progress, by index: id, name, partial JSON.
            let mut tools: Vec<(u64, String, String, String)> = Vec::new();
            let mut stop = None;
            loop {
                let Some(data) = next_data(&mut events, timeout).await? else {
                    break;
                };
                let Ok(data) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                match data["type"].as_str().unwrap_or_default() {
                    // Input tokens come first; `message_delta` then reports the output total.
                    "message_start" => {
                        if let Some(model) = data["message"]["model"].as_str().filter(|m| !m.is_empty()) {
                            yield ModelEvent::ResponseModel(model.to_owned());
                        }
                        let usage = &data["message"]["usage"];
                        yield ModelEvent::Usage {
                            input_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
                            output_tokens: 0,
                        };
                    }
                    "content_block_start" if data["content_block"]["type"] == "tool_use" => {
                        let block = &data["content_block"];
                        tools.push((
                            data["index"].as_u64().unwrap_or(0),
                            block["id"].as_str().unwrap_or_default().to_owned(),
                            block["name"].as_str().unwrap_or_default().to_owned(),
                            String::new(),
                        ));
                    }
                    "content_block_delta" => {
                        let delta = &data["delta"];
                        match delta["type"].as_str().unwrap_or_default() {
                            "text_delta" => {
                                if let Some(text) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                                    yield ModelEvent::TextDelta(text.to_owned());
                                }
                            }
                            "thinking_delta" => {
                                if let Some(thinking) = delta["thinking"].as_str().filter(|t| !t.is_empty()) {
                                    yield ModelEvent::ThinkingDelta(thinking.to_owned());
                                }
                            }
                            "input_json_delta" => {
                                let index = data["index"].as_u64().unwrap_or(0);
                                if let Some(tool) = tools.iter_mut().find(|t| t.0 == index) {
                                    tool.3.push_str(delta["partial_json"].as_str().unwrap_or_default());
                                }
                            }
                            _ => {}
                        }
                    }
                    "message_delta" => {
                        if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                            stop = Some(stop_reason(reason));
                        }
                        if let Some(output) = data["usage"]["output_tokens"].as_u64() {
                            yield ModelEvent::Usage { input_tokens: 0, output_tokens: output };
                        }
                    }
                    "message_stop" => break,
                    "error" => {
                        let message = data["error"]["message"].as_str().unwrap_or("error");
                        Err(fail(summarize(reqwest::StatusCode::OK, &json!({"message": message}).to_string(), &key)))?;
                    }
                    _ => {}
                }
            }
            for (_, id, name, arguments) in tools {
                let input = parse_arguments(arguments);
                yield ModelEvent::ToolCall { id, name: names.real(&name), input };
            }
            match stop {
                Some(reason) => yield ModelEvent::Stop(reason),
                None => Err(fail("the model provider's stream ended without a stop reason".into()))?,
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_results_travel_in_user_messages_and_roles_alternate() {
        let history = vec![
            HistoryMessage::System {
                content: "Be kind.".into(),
            },
            HistoryMessage::User {
                content: Content::Text("time?".into()),
            },
            HistoryMessage::Assistant {
                content: Content::Blocks(vec![
                    ContentBlock::Thinking {
                        thinking: "hm".into(),
                    },
                    ContentBlock::ToolUse {
                        tool_call_id: "t1".into(),
                        name: "clock".into(),
                        input: serde_json::Map::new(),
                    },
                    ContentBlock::ToolUse {
                        tool_call_id: "t2".into(),
                        name: "clock".into(),
                        input: serde_json::Map::new(),
                    },
                ]),
            },
            HistoryMessage::Tool {
                tool_call_id: "t1".into(),
                content: Content::Text("noon".into()),
            },
            HistoryMessage::Tool {
                tool_call_id: "t2".into(),
                content: Content::Text("noon".into()),
            },
        ];
        let (system, messages) = to_request("Answer briefly.", &history, &ToolNames::default());
        assert_eq!(system, "Answer briefly.\n\nBe kind.");
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["role"], "assistant");
        assert_eq!(
            messages[1]["content"].as_array().unwrap().len(),
            2,
            "thinking dropped"
        );
        assert_eq!(messages[2]["role"], "user");
        assert_eq!(messages[2]["content"][1]["tool_use_id"], "t2");
    }

    #[test]
    fn dotted_tool_names_travel_as_safe_names() {
        let history = vec![HistoryMessage::Assistant {
            content: Content::Blocks(vec![ContentBlock::ToolUse {
                tool_call_id: "t1".into(),
                name: "files.read".into(),
                input: serde_json::Map::new(),
            }]),
        }];
        let names = ToolNames::for_request(&[], &history);
        let (_, messages) = to_request("", &history, &names);
        assert_eq!(messages[0]["content"][0]["name"], "files_read");
        assert_eq!(names.real("files_read"), "files.read");
    }

    #[test]
    fn data_images_become_base64_sources() {
        assert_eq!(
            image_block("data:image/png;base64,AAAA"),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
        );
        assert_eq!(stop_reason("max_tokens"), StopReason::MaxTokens);
    }
}
