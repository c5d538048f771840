//! Chat Completions messages as history messages, one history message per chat message,
//! so an index the engine names in them is the client's own: `system` and `developer` as
//! system messages (text), `user` (text, `image_url` and `file` parts), `assistant` (text,
//! `tool_calls` as tool use blocks) and `tool` (a tool result).

use serde_json::{Map, Value};

use super::error::OpenAiError;
use super::parse::parse_file;
use crate::model::{Content, ContentBlock, HistoryMessage};

/// The messages as history messages, one for each.
pub fn parse_messages(value: Option<&Value>) -> Result<Vec<HistoryMessage>, OpenAiError> {
    let messages = match value {
        None | Some(Value::Null) => return Err(OpenAiError::invalid("messages", "is required")),
        Some(Value::Array(messages)) if messages.is_empty() => {
            return Err(OpenAiError::invalid("messages", "must not be empty"));
        }
        Some(Value::Array(messages)) => messages,
        Some(_) => return Err(OpenAiError::invalid("messages", "must be an array")),
    };
    messages
        .iter()
        .enumerate()
        .map(|(i, message)| {
            let at = format!("messages[{i}]");
            let message = message
                .as_object()
                .ok_or_else(|| OpenAiError::invalid(at.clone(), "must be an object"))?;
            parse_message(message, &at)
        })
        .collect()
}

fn required_str<'a>(
    item: &'a Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<&'a str, OpenAiError> {
    match item.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(OpenAiError::invalid(
            format!("{at}.{key}"),
            "is required (a non-empty string)",
        )),
    }
}

fn parse_message(message: &Map<String, Value>, at: &str) -> Result<HistoryMessage, OpenAiError> {
    let role = required_str(message, "role", at)?;
    let content_at = format!("{at}.content");
    match role {
        "system" | "developer" => Ok(HistoryMessage::System {
            content: text_of(message.get("content"), &content_at, false)?,
        }),
        "user" => Ok(HistoryMessage::User {
            content: user_content(message.get("content"), &content_at)?,
        }),
        "tool" => Ok(HistoryMessage::Tool {
            tool_call_id: required_str(message, "tool_call_id", at)?.to_owned(),
            content: Content::Text(text_of(message.get("content"), &content_at, false)?),
        }),
        "assistant" => assistant(message, at),
        "function" => Err(OpenAiError::invalid(
            format!("{at}.role"),
            "`function` messages are deprecated and not supported: answer tool calls with \
             `tool` messages",
        )),
        other => Err(OpenAiError::invalid(
            format!("{at}.role"),
            format!("`{other}`: expected system, developer, user, assistant or tool"),
        )),
    }
}

/// A content that is text: a string, or text parts (joined); an assistant's may be null
/// and carry `refusal` parts.
fn text_of(value: Option<&Value>, at: &str, assistant: bool) -> Result<String, OpenAiError> {
    let parts = match value {
        Some(Value::String(text)) => return Ok(text.clone()),
        None | Some(Value::Null) if assistant => return Ok(String::new()),
        Some(Value::Array(parts)) => parts,
        _ => {
            return Err(OpenAiError::invalid(
                at.to_owned(),
                "must be a string or an array of text parts",
            ));
        }
    };
    let mut text = String::new();
    for (j, part) in parts.iter().enumerate() {
        let at = format!("{at}[{j}]");
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        let key = match kind {
            "text" => "text",
            "refusal" if assistant => "refusal",
            _ => {
                return Err(OpenAiError::invalid(
                    format!("{at}.type"),
                    format!("`{kind}`: this message carries text parts only"),
                ));
            }
        };
        match part.get(key) {
            Some(Value::String(t)) => text.push_str(t),
            _ => {
                return Err(OpenAiError::invalid(
                    format!("{at}.{key}"),
                    "is required (a string)",
                ));
            }
        }
    }
    Ok(text)
}

fn user_content(value: Option<&Value>, at: &str) -> Result<Content, OpenAiError> {
    let parts = match value {
        Some(Value::String(text)) => return Ok(Content::Text(text.clone())),
        Some(Value::Array(parts)) => parts,
        _ => {
            return Err(OpenAiError::invalid(
                at.to_owned(),
                "must be a string or an array of content parts",
            ));
        }
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let at = format!("{at}[{j}]");
        let Some(part) = part.as_object() else {
            return Err(OpenAiError::invalid(at, "must be an object"));
        };
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        let block = match kind {
            "text" => match part.get("text") {
                Some(Value::String(text)) => ContentBlock::Text { text: text.clone() },
                _ => {
                    return Err(OpenAiError::invalid(
                        format!("{at}.text"),
                        "is required (a string)",
                    ));
                }
            },
            "image_url" => match part.get("image_url").and_then(|i| i.get("url")) {
                Some(Value::String(url)) if !url.is_empty() => {
                    ContentBlock::Image { url: url.clone() }
                }
                _ => {
                    return Err(OpenAiError::invalid(
                        format!("{at}.image_url.url"),
                        "is required: an https or data: URL",
                    ));
                }
            },
            "file" => match part.get("file").and_then(Value::as_object) {
                Some(file) => ContentBlock::Part(parse_file(file, &format!("{at}.file"))?),
                None => {
                    return Err(OpenAiError::invalid(
                        format!("{at}.file"),
                        "is required (an object)",
                    ));
                }
            },
            _ => {
                return Err(OpenAiError::invalid(
                    format!("{at}.type"),
                    format!("`{kind}` is not supported: user parts are text, image_url and file"),
                ));
            }
        };
        blocks.push(block);
    }
    Ok(match blocks.as_slice() {
        [ContentBlock::Text { text }] => Content::Text(text.clone()),
        _ => Content::Blocks(blocks),
    })
}

/// An assistant message: its text, then its tool calls.
fn assistant(message: &Map<String, Value>, at: &str) -> Result<HistoryMessage, OpenAiError> {
    let text = text_of(message.get("content"), &format!("{at}.content"), true)?;
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => {
            return Ok(HistoryMessage::Assistant {
                content: Content::Text(text),
            });
        }
        Some(Value::Array(calls)) => calls,
        Some(_) => {
            return Err(OpenAiError::invalid(
                format!("{at}.tool_calls"),
                "must be an array",
            ));
        }
    };
    let mut blocks = Vec::with_capacity(calls.len() + 1);
    if !text.is_empty() {
        blocks.push(ContentBlock::Text { text });
    }
    for (k, call) in calls.iter().enumerate() {
        let at = format!("{at}.tool_calls[{k}]");
        let Some(call) = call.as_object() else {
            return Err(OpenAiError::invalid(at, "must be an object"));
        };
        let id = required_str(call, "id", &at)?;
        let Some(function) = call.get("function").and_then(Value::as_object) else {
            return Err(OpenAiError::invalid(
                format!("{at}.function"),
                "is required (an object)",
            ));
        };
        let name = required_str(function, "name", &format!("{at}.function"))?;
        let input = match function.get("arguments") {
            Some(Value::String(arguments)) => match serde_json::from_str::<Value>(arguments) {
                Ok(Value::Object(map)) => map,
                _ => {
                    return Err(OpenAiError::invalid(
                        format!("{at}.function.arguments"),
                        "must be a JSON object, as text",
                    ));
                }
            },
            _ => {
                return Err(OpenAiError::invalid(
                    format!("{at}.function.arguments"),
                    "is required (a JSON object, as text)",
                ));
            }
        };
        blocks.push(ContentBlock::ToolUse {
            tool_call_id: id.to_owned(),
            name: name.to_owned(),
            input,
        });
    }
    Ok(HistoryMessage::Assistant {
        content: Content::Blocks(blocks),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_become_one_history_message_each() {
        let messages = parse_messages(Some(&json!([
                {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
        ])))
        .unwrap();
        assert_eq!(messages.len(), 4);
        assert_eq!(
            messages[0],
            HistoryMessage::System {
                content: "Be brief.".into()
            }
        );
        assert!(matches!(
            &messages[2],
            HistoryMessage::Assistant { content: Content::Blocks(b) }
                if matches!(&b[..], [ContentBlock::ToolUse { name, .. }] if name == "get_weather")
        ));
        assert_eq!(
            messages[3],
            HistoryMessage::Tool {
                tool_call_id: "c1".into(),
                content: Content::Text("sunny".into())
            }
        );
    }
}
