//! Messages and content blocks: the engine's history vocabulary, shaped as AAP v3 defines it.
//!
//! Inbound JSON is parsed with [`HistoryMessage::parse`], which names the offending field
//! (`messages[1].content[0].url`) instead of serde's untagged-enum guesswork.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::FieldError;
use super::body::Part;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum HistoryMessage {
    System {
        content: String,
    },
    User {
        content: Content,
    },
    Assistant {
        content: Content,
    },
    Tool {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        content: Content,
    },
}

/// A message body: a plain string or a list of blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
    },
    ToolUse {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        name: String,
        input: Map<String, Value>,
    },
    Image {
        url: String,
    },
    /// A message-body part AAP has no block for (named attachments, data, audio, files).
    Part(Part),
}

/// Where an image block's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageSource {
    Https,
    Data,
}

impl ContentBlock {
    pub fn image_source(&self) -> Option<ImageSource> {
        match self {
            ContentBlock::Image { url } if url.starts_with("data:") => Some(ImageSource::Data),
            ContentBlock::Image { .. } => Some(ImageSource::Https),
            _ => None,
        }
    }
}

impl Content {
    pub fn blocks(&self) -> &[ContentBlock] {
        match self {
            Content::Text(_) => &[],
            Content::Blocks(blocks) => blocks,
        }
    }

    /// The body as message-body parts, for schema checks: text is an unnamed `text/plain`
    /// part, an image an unnamed image part, `part` blocks stay as they are. Thinking and
    /// tool calls are not part of the body.
    pub fn to_parts(&self) -> Vec<Part> {
        match self {
            Content::Text(text) => vec![Part::text("text/plain", text.clone())],
            Content::Blocks(blocks) => blocks
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text } => Some(Part::text("text/plain", text.clone())),
                    ContentBlock::Image { url } => Some(Part {
                        content: None,
                        content_url: Some(url.clone()),
                        ..Part::text(image_type(url), "")
                    }),
                    ContentBlock::Part(part) => Some(part.clone()),
                    ContentBlock::Thinking { .. } | ContentBlock::ToolUse { .. } => None,
                })
                .collect(),
        }
    }
}

/// An image's media type: the one a data: URL states, else `image/*`.
fn image_type(url: &str) -> String {
    url.strip_prefix("data:")
        .and_then(|rest| rest.split([';', ',']).next())
        .filter(|t| t.starts_with("image/"))
        .unwrap_or("image/*")
        .to_owned()
}

impl HistoryMessage {
    pub fn content(&self) -> Option<&Content> {
        match self {
            HistoryMessage::System { .. } => None,
            HistoryMessage::User { content }
            | HistoryMessage::Assistant { content }
            | HistoryMessage::Tool { content, .. } => Some(content),
        }
    }

    /// Parses one history message (`system`, `user`, `assistant` or `tool`) at `path`.
    pub fn parse(value: &Value, path: &str) -> Result<Self, FieldError> {
        let object = as_object(value, path)?;
        let role = required_str(object, path, "role")?;
        let content_path = format!("{path}.content");
        match role {
            "system" => {
                let content = object
                    .get("content")
                    .ok_or_else(|| FieldError::missing(&content_path))?;
                let content = content.as_str().ok_or_else(|| {
                    FieldError::new(&content_path, "a system message's content is a string")
                })?;
                Ok(HistoryMessage::System {
                    content: content.to_owned(),
                })
            }
            "user" => Ok(HistoryMessage::User {
                content: parse_content(object.get("content"), &content_path, false)?,
            }),
            "assistant" => Ok(HistoryMessage::Assistant {
                content: parse_content(object.get("content"), &content_path, true)?,
            }),
            "tool" => Ok(HistoryMessage::Tool {
                tool_call_id: non_empty_str(object, path, "toolCallId")?.to_owned(),
                content: parse_content(object.get("content"), &content_path, false)?,
            }),
            other => Err(FieldError::new(
                format!("{path}.role"),
                format!("unknown role `{other}`; expected system, user, assistant or tool"),
            )),
        }
    }
}

fn parse_content(
    value: Option<&Value>,
    path: &str,
    allow_assistant_blocks: bool,
) -> Result<Content, FieldError> {
    match value {
        None => Err(FieldError::missing(path)),
        Some(Value::String(text)) => Ok(Content::Text(text.clone())),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| parse_block(item, &format!("{path}[{i}]"), allow_assistant_blocks))
            .collect::<Result<Vec<_>, _>>()
            .map(Content::Blocks),
        Some(_) => Err(FieldError::new(
            path,
            "must be a string or a list of content blocks",
        )),
    }
}

fn parse_block(value: &Value, path: &str, assistant: bool) -> Result<ContentBlock, FieldError> {
    let object = as_object(value, path)?;
    match required_str(object, path, "type")? {
        "text" => Ok(ContentBlock::Text {
            text: required_str(object, path, "text")?.to_owned(),
        }),
        "image" => {
            let url = required_str(object, path, "url")?;
            let url_path = format!("{path}.url");
            validate_image_url(url).map_err(|message| FieldError::new(url_path, message))?;
            Ok(ContentBlock::Image {
                url: url.to_owned(),
            })
        }
        "thinking" if assistant => Ok(ContentBlock::Thinking {
            thinking: required_str(object, path, "thinking")?.to_owned(),
        }),
        "tool_use" if assistant => {
            let input = match object.get("input") {
                Some(Value::Object(map)) => map.clone(),
                Some(_) => {
                    return Err(FieldError::new(
                        format!("{path}.input"),
                        "must be a JSON object",
                    ));
                }
                None => return Err(FieldError::missing(format!("{path}.input"))),
            };
            Ok(ContentBlock::ToolUse {
                tool_call_id: non_empty_str(object, path, "toolCallId")?.to_owned(),
                name: non_empty_str(object, path, "name")?.to_owned(),
                input,
            })
        }
        kind @ ("thinking" | "tool_use") => Err(FieldError::new(
            format!("{path}.type"),
            format!("`{kind}` blocks appear only in assistant messages"),
        )),
        other => Err(FieldError::new(
            format!("{path}.type"),
            format!(
                "unknown content block type `{other}`; expected text, image, thinking or tool_use"
            ),
        )),
    }
}

/// An image is an `https://` URL or a base64 `data:image/...` URL.
fn validate_image_url(url: &str) -> Result<(), String> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (meta, data) = rest
            .split_once(',')
            .ok_or("a data: URL needs a `,` before its payload")?;
        if !meta.starts_with("image/") || !meta.ends_with(";base64") {
            return Err("a data: URL must be `data:image/<type>;base64,<data>`".into());
        }
        if data.is_empty() {
            return Err("the data: URL has no payload".into());
        }
        Ok(())
    } else if url.starts_with("https://") && url.len() > "https://".len() {
        Ok(())
    } else {
        Err("must be an https:// URL or a data: URL".into())
    }
}

fn as_object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, FieldError> {
    value
        .as_object()
        .ok_or_else(|| FieldError::new(path, "must be a JSON object"))
}

fn required_str<'a>(
    object: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<&'a str, FieldError> {
    match object.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(FieldError::new(format!("{path}.{key}"), "must be a string")),
        None => Err(FieldError::missing(format!("{path}.{key}"))),
    }
}

fn non_empty_str<'a>(
    object: &'a Map<String, Value>,
    path: &str,
    key: &str,
) -> Result<&'a str, FieldError> {
    let s = required_str(object, path, key)?;
    if s.is_empty() {
        return Err(FieldError::new(
            format!("{path}.{key}"),
            "must not be empty",
        ));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_parse_into_the_aap_shape_and_serialize_back() {
        let input = json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm"},
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "toolCallId": "c1", "name": "clock", "input": {}}
        ]});
        let message = HistoryMessage::parse(&input, "messages[0]").unwrap();
        assert_eq!(serde_json::to_value(&message).unwrap(), input);
        let tool = json!({"role": "tool", "toolCallId": "c1", "content": "12:00"});
        let parsed = HistoryMessage::parse(&tool, "m").unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), tool);
    }

    #[test]
    fn errors_name_the_offending_field() {
        let cases = [
            (json!({"role": "robot", "content": "x"}), "m.role"),
            (json!({"role": "user"}), "m.content"),
            (json!({"role": "user", "content": 3}), "m.content"),
            (
                json!({"role": "user", "content": [{"type": "video"}]}),
                "m.content[0].type",
            ),
            (
                json!({"role": "user", "content": [{"type": "image", "url": "http://x"}]}),
                "m.content[0].url",
            ),
            (
                json!({"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}),
                "m.content[0].type",
            ),
            (json!({"role": "tool", "content": "x"}), "m.toolCallId"),
            (json!({"role": "system", "content": []}), "m.content"),
            (json!("hello"), "m"),
        ];
        for (input, field) in cases {
            let err = HistoryMessage::parse(&input, "m").unwrap_err();
            assert_eq!(err.field, field, "{input}");
        }
    }

    #[test]
    fn image_urls_are_https_or_base64_data() {
        assert!(validate_image_url("https://example.com/a.png").is_ok());
        assert!(validate_image_url("data:image/png;base64,iVBORw0KGgo=").is_ok());
        assert!(validate_image_url("data:text/plain;base64,aGk=").is_err());
        assert!(validate_image_url("ftp://x").is_err());
    }
}
