//! A `POST /v1/responses` body, parsed into what the engine is asked: the agent (`model`,
//! `name` or `name@version`), the input as history messages, client tools, metadata, and
//! which conversation the response continues. Parameters that tune a model's sampling
//! (`temperature`, `top_p`, `max_output_tokens`, `text`, `reasoning`, `truncation`, …) are
//! accepted and left to the agent's configuration.

use serde_json::{Map, Value};

use super::approvals::{Approval, parse_response_item};
use super::error::OpenAiError;
use super::ids::{parse_conversation_id, parse_response_id};
use crate::model::{
    Content, ContentBlock, ContentEncoding, HistoryMessage, Part, SessionId, ToolSpec, TurnId,
};

/// How many metadata pairs, and how long their keys and values may be.
pub const METADATA_PAIRS: usize = 16;
pub const METADATA_KEY_CHARS: usize = 64;
pub const METADATA_VALUE_CHARS: usize = 512;

#[derive(Debug, Clone, PartialEq)]
pub struct CreateRequest {
    /// As the client wrote it.
    pub model: String,
    pub agent: String,
    pub version: Option<i64>,
    pub input: Vec<HistoryMessage>,
    /// The input item each message of `input` came from.
    pub input_items: Vec<usize>,
    /// Answers to approval requests (`mcp_approval_response` items).
    pub approvals: Vec<Approval>,
    pub tools: Option<Vec<ToolSpec>>,
    pub metadata: Map<String, Value>,
    pub previous_response: Option<(String, TurnId)>,
    pub conversation: Option<(String, SessionId)>,
    pub stream: bool,
    pub background: bool,
}

pub fn parse_object(
    body: Result<actix_web::web::Bytes, actix_web::Error>,
) -> Result<Map<String, Value>, OpenAiError> {
    let body = body.map_err(|e| {
        let status = e.as_response_error().status_code();
        OpenAiError::new(status, format!("cannot read the request body: {e}"))
    })?;
    match serde_json::from_slice(&body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(OpenAiError::invalid("body", "must be a JSON object")),
        Err(e) => Err(OpenAiError::invalid(
            "body",
            format!("is not valid JSON: {e}"),
        )),
    }
}

fn flag(body: &Map<String, Value>, key: &str) -> Result<Option<bool>, OpenAiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(OpenAiError::invalid(key, "must be a boolean")),
    }
}

fn string<'a>(body: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, OpenAiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(OpenAiError::invalid(key, "must be a string")),
    }
}

/// `name` or `name@version` (a tenant agent's version, from 1).
pub fn parse_model(model: &str) -> Result<(String, Option<i64>), OpenAiError> {
    let (name, version) = match model.rsplit_once('@') {
        Some((name, version)) => {
            let version = version
                .parse::<i64>()
                .ok()
                .filter(|v| *v >= 1)
                .ok_or_else(|| {
                    OpenAiError::invalid("model", "`name@version` takes a version number from 1")
                })?;
            (name, Some(version))
        }
        None => (model, None),
    };
    if name.is_empty() {
        return Err(OpenAiError::invalid(
            "model",
            "names an agent: must not be empty",
        ));
    }
    Ok((name.to_owned(), version))
}

pub fn parse_metadata(value: Option<&Value>) -> Result<Map<String, Value>, OpenAiError> {
    let map = match value {
        None | Some(Value::Null) => return Ok(Map::new()),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(OpenAiError::invalid("metadata", "must be an object")),
    };
    if map.len() > METADATA_PAIRS {
        return Err(OpenAiError::invalid(
            "metadata",
            format!("holds at most {METADATA_PAIRS} pairs"),
        ));
    }
    for (key, value) in map {
        if key.chars().count() > METADATA_KEY_CHARS {
            return Err(OpenAiError::invalid(
                "metadata",
                format!("keys are at most {METADATA_KEY_CHARS} characters"),
            ));
        }
        match value {
            Value::String(s) if s.chars().count() <= METADATA_VALUE_CHARS => {}
            Value::String(_) => {
                return Err(OpenAiError::invalid(
                    format!("metadata.{key}"),
                    format!("values are at most {METADATA_VALUE_CHARS} characters"),
                ));
            }
            _ => {
                return Err(OpenAiError::invalid(
                    format!("metadata.{key}"),
                    "must be a string",
                ));
            }
        }
    }
    Ok(map.clone())
}

pub fn parse_create(body: &Map<String, Value>) -> Result<CreateRequest, OpenAiError> {
    let model = string(body, "model")?
        .ok_or_else(|| OpenAiError::invalid("model", "is required: the name of an agent"))?;
    let (agent, version) = parse_model(model)?;
    if string(body, "instructions")?.is_some_and(|s| !s.is_empty()) {
        return Err(OpenAiError::invalid(
            "instructions",
            "not accepted: an agent's instructions are its configured prompt; send a \
             developer or system message as the first input item of a new response instead",
        ));
    }
    if flag(body, "store")? == Some(false) {
        return Err(OpenAiError::invalid(
            "store",
            "must be true: agentry keeps every response (delete one with DELETE /v1/responses/{id})",
        ));
    }
    match body.get("tool_choice") {
        None | Some(Value::Null) => {}
        Some(Value::String(choice)) if choice == "auto" => {}
        Some(_) => {
            return Err(OpenAiError::invalid(
                "tool_choice",
                "only `auto` is supported: an agent chooses its tools",
            ));
        }
    }
    let has = |key: &str| body.get(key).is_some_and(|v| !v.is_null());
    if has("previous_response_id") && has("conversation") {
        return Err(OpenAiError::invalid(
            "conversation",
            "cannot be used in conjunction with previous_response_id",
        ));
    }
    let previous_response = match string(body, "previous_response_id")? {
        None => None,
        Some(id) => Some((
            id.to_owned(),
            parse_response_id(id).ok_or_else(|| previous_not_found(id))?,
        )),
    };
    let conversation = match body.get("conversation") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.as_str()),
        Some(Value::Object(object)) => match object.get("id") {
            Some(Value::String(id)) => Some(id.as_str()),
            _ => return Err(OpenAiError::invalid("conversation.id", "must be a string")),
        },
        Some(_) => {
            return Err(OpenAiError::invalid(
                "conversation",
                "must be a conversation id or {\"id\": …}",
            ));
        }
    };
    let conversation = match conversation {
        None => None,
        Some(id) => Some((
            id.to_owned(),
            parse_conversation_id(id).ok_or_else(|| conversation_not_found(id))?,
        )),
    };
    let mut approvals = Vec::new();
    let (input, input_items) = parse_items(body.get("input"), Some(&mut approvals))?;
    Ok(CreateRequest {
        model: model.to_owned(),
        agent,
        version,
        input,
        input_items,
        approvals,
        tools: parse_tools(body.get("tools"))?,
        metadata: parse_metadata(body.get("metadata"))?,
        previous_response,
        conversation,
        stream: flag(body, "stream")?.unwrap_or(false),
        background: flag(body, "background")?.unwrap_or(false),
    })
}

pub fn previous_not_found(id: &str) -> OpenAiError {
    OpenAiError::invalid(
        "previous_response_id",
        format!("Previous response with id '{id}' not found."),
    )
    .code("previous_response_not_found")
}

pub fn conversation_not_found(id: &str) -> OpenAiError {
    OpenAiError::not_found(format!("Conversation with id '{id}' not found.")).param("conversation")
}

fn parse_tools(value: Option<&Value>) -> Result<Option<Vec<ToolSpec>>, OpenAiError> {
    parse_function_tools(value, flat_fields)
}

/// Where a function tool's fields are, given the tool and the path naming it: the fields'
/// object, the path naming them, and the tool's name.
pub type ToolFields =
    fn(&Map<String, Value>, String) -> Result<(&Map<String, Value>, String, String), OpenAiError>;

/// Responses tools are flat: `{"type": "function", name, description?, parameters?}`.
fn flat_fields(
    tool: &Map<String, Value>,
    at: String,
) -> Result<(&Map<String, Value>, String, String), OpenAiError> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| OpenAiError::invalid(format!("{at}.name"), "is required"))?;
    Ok((tool, at, name.to_owned()))
}

/// `tools` of function tools only (they become client tools); `fields` finds each one's
/// name, description and parameters (flat here, under `function` in Chat Completions).
pub fn parse_function_tools(
    value: Option<&Value>,
    fields: ToolFields,
) -> Result<Option<Vec<ToolSpec>>, OpenAiError> {
    let tools = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(OpenAiError::invalid("tools", "must be an array")),
    };
    let mut specs = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        let Some(tool) = tool.as_object() else {
            return Err(OpenAiError::invalid(at, "must be an object"));
        };
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some(other) => {
                return Err(OpenAiError::invalid(
                    format!("{at}.type"),
                    format!("`{other}`: only function tools are supported (they are client tools)"),
                ));
            }
            None => return Err(OpenAiError::invalid(format!("{at}.type"), "is required")),
        }
        let (tool, at, name) = fields(tool, at)?;
        let description = match tool.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                return Err(OpenAiError::invalid(
                    format!("{at}.description"),
                    "must be a string",
                ));
            }
        };
        let parameters = match tool.get("parameters") {
            None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(OpenAiError::invalid(
                    format!("{at}.parameters"),
                    "must be an object",
                ));
            }
        };
        specs.push(ToolSpec {
            name,
            title: None,
            description,
            parameters,
        });
    }
    Ok(Some(specs))
}

/// The input as history messages: a string is one user message; items are messages
/// (user, assistant, system, developer), echoed `function_call`s, and
/// `function_call_output`s. Echoed `reasoning` items are dropped (the model's reasoning
/// is not fed back).
/// The input as history messages, with the index of the input item each one came from
/// (consecutive `function_call` items make one assistant message), so a refusal of a
/// message can name the item.
pub fn parse_input_items(
    value: Option<&Value>,
) -> Result<(Vec<HistoryMessage>, Vec<usize>), OpenAiError> {
    parse_items(value, None)
}

/// [`parse_input_items`], with `mcp_approval_response` items collected in `approvals`
/// where a request may answer approval requests (a response's input; the items of a
/// conversation are messages only).
fn parse_items(
    value: Option<&Value>,
    mut approvals: Option<&mut Vec<Approval>>,
) -> Result<(Vec<HistoryMessage>, Vec<usize>), OpenAiError> {
    let items = match value {
        None | Some(Value::Null) => return Err(OpenAiError::invalid("input", "is required")),
        Some(Value::String(text)) => {
            let message = HistoryMessage::User {
                content: Content::Text(text.clone()),
            };
            return Ok((vec![message], vec![0]));
        }
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(OpenAiError::invalid(
                "input",
                "must be a string or an array of items",
            ));
        }
    };
    let mut messages: Vec<HistoryMessage> = Vec::new();
    let mut origins: Vec<usize> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        // What the previous item added came from it.
        origins.resize(messages.len(), i.saturating_sub(1));
        let at = format!("input[{i}]");
        let Some(item) = item.as_object() else {
            return Err(OpenAiError::invalid(at, "must be an object"));
        };
        let kind = match item.get("type") {
            None | Some(Value::Null) => "message",
            Some(Value::String(kind)) => kind.as_str(),
            Some(_) => {
                return Err(OpenAiError::invalid(
                    format!("{at}.type"),
                    "must be a string",
                ));
            }
        };
        match kind {
            "message" => messages.push(parse_message(item, &at)?),
            "function_call" => {
                let call_id = required_str(item, "call_id", &at)?;
                let name = required_str(item, "name", &at)?;
                let arguments = required_str(item, "arguments", &at)?;
                let input = match serde_json::from_str::<Value>(arguments) {
                    Ok(Value::Object(map)) => map,
                    _ => {
                        return Err(OpenAiError::invalid(
                            format!("{at}.arguments"),
                            "must be a JSON object, as text",
                        ));
                    }
                };
                let block = ContentBlock::ToolUse {
                    tool_call_id: call_id.to_owned(),
                    name: name.to_owned(),
                    input,
                };
                match messages.last_mut() {
                    Some(HistoryMessage::Assistant { content }) => {
                        let mut blocks = match std::mem::replace(content, Content::Blocks(vec![])) {
                            Content::Text(text) if text.is_empty() => vec![],
                            Content::Text(text) => vec![ContentBlock::Text { text }],
                            Content::Blocks(blocks) => blocks,
                        };
                        blocks.push(block);
                        *content = Content::Blocks(blocks);
                    }
                    _ => messages.push(HistoryMessage::Assistant {
                        content: Content::Blocks(vec![block]),
                    }),
                }
            }
            "function_call_output" => {
                let call_id = required_str(item, "call_id", &at)?;
                let content = match item.get("output") {
                    Some(Value::String(text)) => Content::Text(text.clone()),
                    Some(Value::Array(parts)) => {
                        Content::Blocks(parse_parts(parts, &format!("{at}.output"), "user")?)
                    }
                    _ => {
                        return Err(OpenAiError::invalid(
                            format!("{at}.output"),
                            "must be a string or an array of content parts",
                        ));
                    }
                };
                messages.push(HistoryMessage::Tool {
                    tool_call_id: call_id.to_owned(),
                    content,
                });
            }
            "reasoning" => {}
            "mcp_approval_response" if approvals.is_some() => {
                let approval = parse_response_item(item, i, &at)?;
                if let Some(approvals) = approvals.as_deref_mut() {
                    approvals.push(approval);
                }
            }
            other => {
                return Err(OpenAiError::invalid(
                    format!("{at}.type"),
                    format!(
                        "`{other}` is not supported: items are messages, function_call, \
                         function_call_output and (in a response's input) \
                         mcp_approval_response (reasoning items are ignored)"
                    ),
                ));
            }
        }
    }
    if messages.is_empty() && approvals.is_none_or(|a| a.is_empty()) {
        return Err(OpenAiError::invalid(
            "input",
            "must bring at least one message (or approval response)",
        ));
    }
    origins.resize(messages.len(), items.len() - 1);
    Ok((messages, origins))
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

fn parse_message(item: &Map<String, Value>, at: &str) -> Result<HistoryMessage, OpenAiError> {
    let role = required_str(item, "role", at)?;
    let content = match item.get("content") {
        Some(Value::String(text)) => Content::Text(text.clone()),
        Some(Value::Array(parts)) => {
            let blocks = parse_parts(parts, &format!("{at}.content"), role)?;
            match blocks.as_slice() {
                [ContentBlock::Text { text }] => Content::Text(text.clone()),
                _ => Content::Blocks(blocks),
            }
        }
        _ => {
            return Err(OpenAiError::invalid(
                format!("{at}.content"),
                "must be a string or an array of content parts",
            ));
        }
    };
    match role {
        "user" => Ok(HistoryMessage::User { content }),
        "assistant" => Ok(HistoryMessage::Assistant { content }),
        "system" | "developer" => match content {
            Content::Text(text) => Ok(HistoryMessage::System { content: text }),
            Content::Blocks(_) => Err(OpenAiError::invalid(
                format!("{at}.content"),
                "a system or developer message carries text only",
            )),
        },
        other => Err(OpenAiError::invalid(
            format!("{at}.role"),
            format!("`{other}`: expected user, assistant, system or developer"),
        )),
    }
}

fn parse_parts(parts: &[Value], at: &str, role: &str) -> Result<Vec<ContentBlock>, OpenAiError> {
    let mut blocks = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let at = format!("{at}[{j}]");
        let Some(part) = part.as_object() else {
            return Err(OpenAiError::invalid(at, "must be an object"));
        };
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        let block = match (kind, role) {
            ("input_text", _) | ("output_text", "assistant") => ContentBlock::Text {
                text: required_str(part, "text", &at)
                    .or_else(|e| match part.get("text") {
                        Some(Value::String(_)) => Ok(""),
                        _ => Err(e),
                    })?
                    .to_owned(),
            },
            ("refusal", "assistant") => ContentBlock::Text {
                text: required_str(part, "refusal", &at)?.to_owned(),
            },
            ("input_image", "user") => match part.get("image_url") {
                Some(Value::String(url)) => ContentBlock::Image { url: url.clone() },
                _ => {
                    return Err(OpenAiError::invalid(
                        format!("{at}.image_url"),
                        "is required: an https or data: URL (file ids are not supported)",
                    ));
                }
            },
            ("input_file", "user") => ContentBlock::Part(parse_file(part, &at)?),
            _ => {
                return Err(OpenAiError::invalid(
                    format!("{at}.type"),
                    format!("`{kind}` is not a content part a {role} message may carry"),
                ));
            }
        };
        blocks.push(block);
    }
    Ok(blocks)
}

/// An `input_file` part: `file_data` (a base64 `data:` URL) or `file_url`.
pub fn parse_file(part: &Map<String, Value>, at: &str) -> Result<Part, OpenAiError> {
    let filename = part.get("filename").and_then(Value::as_str);
    let metadata = filename.map(|name| serde_json::json!({"filename": name}));
    if let Some(Value::String(data)) = part.get("file_data") {
        let (content_type, content) = data
            .strip_prefix("data:")
            .and_then(|rest| rest.split_once(";base64,"))
            .ok_or_else(|| {
                OpenAiError::invalid(
                    format!("{at}.file_data"),
                    "must be a data: URL with base64 content",
                )
            })?;
        return Ok(Part {
            name: None,
            content_type: content_type.to_owned(),
            content: Some(content.to_owned()),
            content_encoding: ContentEncoding::Base64,
            content_url: None,
            metadata,
        });
    }
    if let Some(Value::String(url)) = part.get("file_url") {
        return Ok(Part {
            name: None,
            content_type: "application/octet-stream".into(),
            content: None,
            content_encoding: ContentEncoding::Plain,
            content_url: Some(url.clone()),
            metadata,
        });
    }
    Err(OpenAiError::invalid(
        at.to_owned(),
        "an input_file needs file_data or file_url (file ids are not supported)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn models_name_agents_and_versions() {
        assert_eq!(parse_model("echo").unwrap(), ("echo".into(), None));
        assert_eq!(parse_model("mine@3").unwrap(), ("mine".into(), Some(3)));
        assert!(parse_model("mine@0").is_err());
        assert!(parse_model("@2").is_err());
    }

    #[test]
    fn input_items_become_history_messages() {
        let input = json!([
            {"role": "developer", "content": "Be brief."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"a\":1}"},
            {"type": "reasoning", "summary": []},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"}
        ]);
        let (messages, origins) = parse_input_items(Some(&input)).unwrap();
        assert_eq!(messages.len(), 4);
        assert_eq!(
            messages[0],
            HistoryMessage::System {
                content: "Be brief.".into()
            }
        );
        assert_eq!(
            messages[1],
            HistoryMessage::User {
                content: Content::Text("Hi".into())
            }
        );
        assert!(
            matches!(&messages[2], HistoryMessage::Assistant { content: Content::Blocks(b) } if b.len() == 1)
        );
        // Each message names the item it came from (the reasoning item makes none).
        assert_eq!(origins, [0, 1, 2, 4]);
        let error =
            parse_input_items(Some(&json!([{"type": "item_reference", "id": "x"}]))).unwrap_err();
        assert_eq!(error.param.as_deref(), Some("input[0].type"));
    }

    #[test]
    fn metadata_is_bounded() {
        let many: Map<String, Value> = (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
        assert!(parse_metadata(Some(&Value::Object(many))).is_err());
        assert!(parse_metadata(Some(&json!({"k": 1}))).is_err());
        assert!(parse_metadata(Some(&json!({"k": "v"}))).is_ok());
    }
}
