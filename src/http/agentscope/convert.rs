//! AgentScope messages and the engine's history, both ways. Content AAP has no block for
//! (data, audio, files, refusals, video, images that are not https/data URLs) is kept as a
//! `part` block whose content type says what it was, so it reads back as it came.

use serde_json::{Map, Value, json};

use super::wire::{ContentBody, ContentObject, MessageObject};
use crate::model::{Content, ContentBlock, ContentEncoding, FieldError, HistoryMessage, Part};

/// The content type a refusal is kept under.
const REFUSAL: &str = "text/x-refusal";

/// One input message, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    User(Vec<ContentBlock>),
    System(String),
    Assistant(Vec<ContentBlock>),
    Reasoning(String),
    Call {
        call_id: String,
        name: String,
        arguments: Map<String, Value>,
    },
    Output {
        call_id: String,
        output: Content,
    },
}

fn str_field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    object.get(key).and_then(Value::as_str)
}

/// Parses `input[i]` (role, type and content of an AgentScope `Message`).
pub fn parse_item(value: &Value, path: &str) -> Result<Item, FieldError> {
    let object = value
        .as_object()
        .ok_or_else(|| FieldError::new(path, "must be a message object"))?;
    let kind = match object.get("type") {
        None | Some(Value::Null) => "message",
        Some(Value::String(kind)) => kind.as_str(),
        Some(_) => return Err(FieldError::new(format!("{path}.type"), "must be a string")),
    };
    let role = match object.get("role") {
        None | Some(Value::Null) => None,
        Some(Value::String(role)) => Some(role.as_str()),
        Some(_) => return Err(FieldError::new(format!("{path}.role"), "must be a string")),
    };
    let contents: &[Value] = match object.get("content") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(FieldError::new(
                format!("{path}.content"),
                "must be a list of contents",
            ));
        }
    };
    match kind {
        "message" => {
            let blocks = contents
                .iter()
                .enumerate()
                .map(|(j, c)| parse_content(c, &format!("{path}.content[{j}]")))
                .collect::<Result<Vec<_>, _>>()?;
            match role.unwrap_or("user") {
                "user" => Ok(Item::User(blocks)),
                "assistant" => Ok(Item::Assistant(blocks)),
                "system" => Ok(Item::System(text_of(&blocks))),
                other => Err(FieldError::new(
                    format!("{path}.role"),
                    format!(
                        "a message of role `{other}` cannot be sent; use user, assistant or system"
                    ),
                )),
            }
        }
        "reasoning" => {
            let blocks = contents
                .iter()
                .enumerate()
                .map(|(j, c)| parse_content(c, &format!("{path}.content[{j}]")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Item::Reasoning(text_of(&blocks)))
        }
        "function_call" | "plugin_call" | "mcp_call" => {
            let data = call_data(contents, path)?;
            let call_id = required(data, path, "call_id")?;
            let name = required(data, path, "name")?;
            let arguments = match data.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::String(raw)) if raw.trim().is_empty() => Map::new(),
                Some(Value::String(raw)) => match serde_json::from_str(raw) {
                    Ok(Value::Object(map)) => map,
                    _ => {
                        return Err(FieldError::new(
                            format!("{path}.content[0].data.arguments"),
                            "must be a JSON object encoded as a string",
                        ));
                    }
                },
                Some(Value::Object(map)) => map.clone(),
                Some(_) => {
                    return Err(FieldError::new(
                        format!("{path}.content[0].data.arguments"),
                        "must be a JSON string",
                    ));
                }
            };
            Ok(Item::Call {
                call_id: call_id.to_owned(),
                name: name.to_owned(),
                arguments,
            })
        }
        "function_call_output" | "plugin_call_output" | "mcp_call_output" => {
            let data = call_data(contents, path)?;
            let call_id = required(data, path, "call_id")?;
            let output = match data.get("output") {
                Some(Value::String(text)) => output_content(text),
                None | Some(Value::Null) => Content::Text(String::new()),
                Some(other) => Content::Text(other.to_string()),
            };
            Ok(Item::Output {
                call_id: call_id.to_owned(),
                output,
            })
        }
        other => Err(FieldError::new(
            format!("{path}.type"),
            format!(
                "message type `{other}` cannot be sent; use message, reasoning, \
                 plugin_call, function_call, mcp_call or their _output"
            ),
        )),
    }
}

/// A tool output as the reference writes it (a JSON string of content blocks) becomes
/// those blocks' text; any other string is the text itself.
fn output_content(text: &str) -> Content {
    if let Ok(Value::Array(blocks)) = serde_json::from_str::<Value>(text) {
        let texts: Option<Vec<&str>> = blocks
            .iter()
            .map(
                |b| match (str_field(b.as_object()?, "type"), b.get("text")) {
                    (Some("text"), Some(Value::String(t))) => Some(t.as_str()),
                    _ => None,
                },
            )
            .collect();
        if let Some(texts) = texts {
            return Content::Text(texts.join(""));
        }
    }
    Content::Text(text.to_owned())
}

fn call_data<'a>(contents: &'a [Value], path: &str) -> Result<&'a Map<String, Value>, FieldError> {
    contents
        .first()
        .and_then(|c| c.get("data"))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            FieldError::new(
                format!("{path}.content[0].data"),
                "a call or call output carries a data content with call_id",
            )
        })
}

fn required<'a>(
    data: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<&'a str, FieldError> {
    str_field(data, key)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| FieldError::missing(format!("{path}.content[0].data.{key}")))
}

fn text_of(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn url_part(content_type: &str, url: &str) -> ContentBlock {
    ContentBlock::Part(Part {
        content: None,
        content_url: Some(url.to_owned()),
        ..Part::text(content_type, "")
    })
}

fn is_image_block_url(url: &str) -> bool {
    (url.starts_with("https://") && url.len() > 8)
        || (url.starts_with("data:image/") && url.contains(";base64,"))
}

/// One content item as a block.
fn parse_content(value: &Value, path: &str) -> Result<ContentBlock, FieldError> {
    let object = value
        .as_object()
        .ok_or_else(|| FieldError::new(path, "must be a content object"))?;
    let field = |key: &str| str_field(object, key).filter(|v| !v.is_empty());
    let kind =
        str_field(object, "type").ok_or_else(|| FieldError::missing(format!("{path}.type")))?;
    Ok(match kind {
        "text" => ContentBlock::Text {
            text: str_field(object, "text").unwrap_or_default().to_owned(),
        },
        "image" => {
            let url = field("image_url")
                .ok_or_else(|| FieldError::missing(format!("{path}.image_url")))?;
            if is_image_block_url(url) {
                ContentBlock::Image {
                    url: url.to_owned(),
                }
            } else {
                url_part("image/*", url)
            }
        }
        "data" => {
            let data = object.get("data").cloned().unwrap_or(Value::Null);
            ContentBlock::Part(Part::text("application/json", data.to_string()))
        }
        "audio" => {
            let content_type = match field("format") {
                Some(format) => format!("audio/{format}"),
                None => "audio/*".to_owned(),
            };
            let data = field("data").ok_or_else(|| FieldError::missing(format!("{path}.data")))?;
            if data.contains("://") || data.starts_with("data:") {
                url_part(&content_type, data)
            } else {
                ContentBlock::Part(Part {
                    content_encoding: ContentEncoding::Base64,
                    ..Part::text(content_type, data)
                })
            }
        }
        "file" => {
            let name = field("filename").map(|f| format!("/{}", f.trim_start_matches('/')));
            if let Some(name) = &name
                && crate::model::check_part_name(name).is_err()
            {
                return Err(FieldError::new(
                    format!("{path}.filename"),
                    "a file name may use only A-Z a-z 0-9 . _ - and / (it names the part)",
                ));
            }
            let mut part = match (field("file_data"), field("file_url")) {
                (Some(data), _) => Part {
                    content_encoding: ContentEncoding::Base64,
                    ..Part::text("application/octet-stream", data)
                },
                (None, Some(url)) => Part {
                    content: None,
                    content_url: Some(url.to_owned()),
                    ..Part::text("application/octet-stream", "")
                },
                (None, None) => {
                    return Err(FieldError::new(
                        path,
                        "a file content needs file_data or file_url",
                    ));
                }
            };
            part.name = name;
            ContentBlock::Part(part)
        }
        "refusal" => ContentBlock::Part(Part::text(
            REFUSAL,
            str_field(object, "refusal").unwrap_or_default(),
        )),
        "video" => {
            let url = field("video_url")
                .ok_or_else(|| FieldError::missing(format!("{path}.video_url")))?;
            url_part("video/*", url)
        }
        other => {
            return Err(FieldError::new(
                format!("{path}.type"),
                format!(
                    "unknown content type `{other}`; expected text, image, data, audio, file, \
                     refusal or video"
                ),
            ));
        }
    })
}

/// Items as history messages: an assistant's reasoning, text and calls in a row make one
/// assistant message, as the engine stores a model's answer.
pub fn to_history(items: &[Item]) -> Vec<HistoryMessage> {
    let mut history = Vec::new();
    let mut assistant: Vec<ContentBlock> = Vec::new();
    let flush = |assistant: &mut Vec<ContentBlock>, history: &mut Vec<HistoryMessage>| {
        if !assistant.is_empty() {
            history.push(HistoryMessage::Assistant {
                content: Content::Blocks(std::mem::take(assistant)),
            });
        }
    };
    for item in items {
        match item {
            Item::Reasoning(thinking) => assistant.push(ContentBlock::Thinking {
                thinking: thinking.clone(),
            }),
            Item::Assistant(blocks) => assistant.extend(blocks.iter().cloned()),
            Item::Call {
                call_id,
                name,
                arguments,
            } => assistant.push(ContentBlock::ToolUse {
                tool_call_id: call_id.clone(),
                name: name.clone(),
                input: arguments.clone(),
            }),
            Item::User(blocks) => {
                flush(&mut assistant, &mut history);
                history.push(HistoryMessage::User {
                    content: Content::Blocks(blocks.clone()),
                });
            }
            Item::System(text) => {
                flush(&mut assistant, &mut history);
                history.push(HistoryMessage::System {
                    content: text.clone(),
                });
            }
            Item::Output { call_id, output } => {
                flush(&mut assistant, &mut history);
                history.push(HistoryMessage::Tool {
                    tool_call_id: call_id.clone(),
                    content: output.clone(),
                });
            }
        }
    }
    flush(&mut assistant, &mut history);
    history
}

/// A block as AgentScope content.
fn content_body(block: &ContentBlock) -> Option<ContentBody> {
    Some(match block {
        ContentBlock::Text { text } => ContentBody::Text { text: text.clone() },
        ContentBlock::Image { url } => ContentBody::Image {
            image_url: Some(url.clone()),
        },
        ContentBlock::Part(part) => part_body(part),
        ContentBlock::Thinking { .. } | ContentBlock::ToolUse { .. } => return None,
    })
}

fn part_body(part: &Part) -> ContentBody {
    let media = crate::model::media_type(&part.content_type);
    let inline = part.content.clone();
    let url = part.content_url.clone();
    if media == "application/json" && part.name.is_none() {
        let data = inline
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or(Value::Null);
        return ContentBody::Data { data };
    }
    if media == REFUSAL {
        return ContentBody::Refusal {
            refusal: inline.unwrap_or_default(),
        };
    }
    if part.name.is_none() {
        if let Some(format) = media.strip_prefix("audio/") {
            return ContentBody::Audio {
                data: inline.or(url),
                format: (format != "*").then(|| format.to_owned()),
            };
        }
        if media.starts_with("image/") {
            return ContentBody::Image { image_url: url };
        }
        if media.starts_with("video/") {
            return ContentBody::Video { video_url: url };
        }
    }
    ContentBody::File {
        file_url: url,
        file_id: None,
        filename: part
            .name
            .as_deref()
            .map(|n| n.trim_start_matches('/').to_owned()),
        file_data: inline,
    }
}

/// History as AgentScope messages (completed, without ids or sequence numbers): how a
/// session reads back on this face, and what a request's repeated history is compared with.
pub fn from_history(history: &[HistoryMessage]) -> Vec<MessageObject> {
    let mut names = std::collections::HashMap::new();
    let mut out = Vec::new();
    let message =
        |kind: &'static str, role: &'static str, content: Vec<ContentObject>| MessageObject {
            sequence_number: None,
            object: "message",
            status: "completed",
            error: None,
            id: String::new(),
            kind,
            role,
            content: Some(content),
            code: None,
            message: None,
            usage: None,
            metadata: None,
        };
    let contents = |blocks: &[ContentBlock]| -> Vec<ContentObject> {
        blocks
            .iter()
            .filter_map(content_body)
            .map(ContentObject::whole)
            .collect()
    };
    for entry in history {
        match entry {
            HistoryMessage::System { content } => out.push(message(
                "message",
                "system",
                vec![ContentObject::whole(ContentBody::Text {
                    text: content.clone(),
                })],
            )),
            HistoryMessage::User { content } => {
                let blocks = match content {
                    Content::Text(text) => vec![ContentBlock::Text { text: text.clone() }],
                    Content::Blocks(blocks) => blocks.clone(),
                };
                out.push(message("message", "user", contents(&blocks)));
            }
            HistoryMessage::Assistant { content } => {
                let blocks = match content {
                    Content::Text(text) => vec![ContentBlock::Text { text: text.clone() }],
                    Content::Blocks(blocks) => blocks.clone(),
                };
                // Consecutive body blocks make one message; thinking and calls their own.
                let mut body: Vec<ContentBlock> = Vec::new();
                for block in blocks {
                    match block {
                        ContentBlock::Thinking { thinking } => {
                            if !body.is_empty() {
                                out.push(message("message", "assistant", contents(&body)));
                                body.clear();
                            }
                            out.push(message(
                                "reasoning",
                                "assistant",
                                vec![ContentObject::whole(ContentBody::Text { text: thinking })],
                            ));
                        }
                        ContentBlock::ToolUse {
                            tool_call_id,
                            name,
                            input,
                        } => {
                            if !body.is_empty() {
                                out.push(message("message", "assistant", contents(&body)));
                                body.clear();
                            }
                            names.insert(tool_call_id.clone(), name.clone());
                            let data = json!({
                                "call_id": tool_call_id,
                                "name": name,
                                "arguments": Value::Object(input).to_string(),
                            });
                            out.push(message(
                                "plugin_call",
                                "assistant",
                                vec![ContentObject::whole(ContentBody::Data { data })],
                            ));
                        }
                        other => body.push(other),
                    }
                }
                if !body.is_empty() {
                    out.push(message("message", "assistant", contents(&body)));
                }
            }
            HistoryMessage::Tool {
                tool_call_id,
                content,
            } => {
                let output = match content {
                    Content::Text(text) => json!([{"type": "text", "text": text}]).to_string(),
                    Content::Blocks(blocks) => {
                        serde_json::to_string(blocks).expect("blocks serialize")
                    }
                };
                let data = json!({
                    "call_id": tool_call_id,
                    "name": names.get(tool_call_id).cloned().unwrap_or_default(),
                    "output": output,
                });
                out.push(message(
                    "plugin_call_output",
                    "tool",
                    vec![ContentObject::whole(ContentBody::Data { data })],
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_content_type_reads_back_as_it_came() {
        let input = json!({"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "image_url": "https://example.com/cat.png"},
            {"type": "data", "data": {"k": [1, 2]}},
            {"type": "audio", "data": "UklGRg==", "format": "wav"},
            {"type": "file", "filename": "report.pdf", "file_url": "https://example.com/r.pdf"},
            {"type": "refusal", "refusal": "no"}
        ]});
        let item = parse_item(&input, "input[0]").unwrap();
        let back = from_history(&to_history(&[item]));
        let content = serde_json::to_value(&back[0].content).unwrap();
        let kinds: Vec<&str> = content
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["text", "image", "data", "audio", "file", "refusal"]);
        assert_eq!(content[1]["image_url"], "https://example.com/cat.png");
        assert_eq!(content[2]["data"], json!({"k": [1, 2]}));
        assert_eq!(content[3]["data"], "UklGRg==");
        assert_eq!(content[3]["format"], "wav");
        assert_eq!(content[4]["filename"], "report.pdf");
        assert_eq!(content[4]["file_url"], "https://example.com/r.pdf");
        assert_eq!(content[5]["refusal"], "no");
    }

    #[test]
    fn calls_and_outputs_become_tool_use_and_tool_results() {
        let items = [
            parse_item(&json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}), "i").unwrap(),
            parse_item(&json!({"type": "plugin_call", "role": "assistant", "content": [{"type": "data", "data": {"call_id": "c1", "name": "clock", "arguments": "{\"zone\": \"UTC\"}"}}]}), "i").unwrap(),
            parse_item(&json!({"type": "function_call_output", "role": "tool", "content": [{"type": "data", "data": {"call_id": "c1", "name": "clock", "output": "[{\"type\": \"text\", \"text\": \"noon\"}]"}}]}), "i").unwrap(),
        ];
        let history = to_history(&items);
        assert_eq!(history.len(), 3);
        assert!(
            matches!(&history[1], HistoryMessage::Assistant { content: Content::Blocks(b) }
            if matches!(&b[0], ContentBlock::ToolUse { tool_call_id, input, .. } if tool_call_id == "c1" && input["zone"] == "UTC"))
        );
        assert_eq!(
            history[2],
            HistoryMessage::Tool {
                tool_call_id: "c1".into(),
                content: Content::Text("noon".into())
            }
        );
    }

    #[test]
    fn unknown_types_and_roles_are_named() {
        let err = parse_item(&json!({"type": "heartbeat"}), "input[2]").unwrap_err();
        assert_eq!(err.field, "input[2].type");
        let err = parse_item(&json!({"role": "tool", "content": []}), "input[0]").unwrap_err();
        assert_eq!(err.field, "input[0].role");
        let err = parse_item(
            &json!({"role": "user", "content": [{"type": "hologram"}]}),
            "input[0]",
        )
        .unwrap_err();
        assert_eq!(err.field, "input[0].content[0].type");
    }
}
