//! A2A messages into the engine's vocabulary: a user message's parts become message-body
//! parts (a part's `filename` is its name, rooted like `/report.pdf`), checked against the
//! agent's input schema with the offending part named; a message answering an
//! input-required task becomes answers to its pending calls.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::error::A2aError;
use super::version::Version;
use crate::engine::{InputMessage, ResumePart};
use crate::model::{Content, ContentEncoding, Part};

/// A message a client sent.
#[derive(Debug, Clone)]
pub struct InMessage {
    /// The client's id for it: the turn's idempotency key, so a message sent twice to a
    /// context is one turn, and the task's history gives the id back.
    pub message_id: String,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    /// Its parts, as body parts, and where each came from (`message.parts[i]`).
    pub parts: Vec<(String, Part)>,
}

fn optional_string(
    object: &Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<String>, A2aError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(A2aError::invalid(format!("{at}.{key}"), "must be a string")),
    }
}

/// A snake_case name in camelCase (`message_id` → `messageId`).
fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        match (c, upper) {
            ('_', _) => upper = true,
            (c, true) => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            (c, false) => out.push(c),
        }
    }
    out
}

/// An object's snake_case keys in camelCase (0.3's HTTP+JSON clients send either).
pub fn camel_keys(object: &Map<String, Value>) -> Map<String, Value> {
    object.iter().map(|(k, v)| (camel(k), v.clone())).collect()
}

/// A 0.3 HTTP+JSON message in the shape the parser reads: `content` is its parts, a file's
/// `fileWithUri` / `fileWithBytes` its `uri` / `bytes`, a data part's `{"data": {"data":
/// …}}` its data.
fn from_proto_03(message: &Map<String, Value>) -> Map<String, Value> {
    let mut message = camel_keys(message);
    if let Some(content) = message.remove("content")
        && !message.contains_key("parts")
    {
        message.insert("parts".into(), content);
    }
    if let Some(Value::Array(parts)) = message.get_mut("parts") {
        for part in parts.iter_mut() {
            let Value::Object(object) = part else {
                continue;
            };
            let mut normal = camel_keys(object);
            if let Some(Value::Object(file)) = normal.get("file") {
                let mut file = camel_keys(file);
                for (proto, name) in [("fileWithUri", "uri"), ("fileWithBytes", "bytes")] {
                    if let Some(value) = file.remove(proto) {
                        file.insert(name.into(), value);
                    }
                }
                normal.insert("file".into(), Value::Object(file));
            }
            if let Some(Value::Object(data)) = normal.get("data")
                && data.len() == 1
                && let Some(inner) = data.get("data")
            {
                let inner = inner.clone();
                normal.insert("data".into(), inner);
            }
            *part = Value::Object(normal);
        }
    }
    message
}

/// `params.message` (`at` names it in errors).
pub fn parse_message(
    value: Option<&Value>,
    version: Version,
    at: &str,
) -> Result<InMessage, A2aError> {
    let normal;
    let value = match (value, version) {
        (Some(Value::Object(message)), Version::V03Rest) => {
            normal = Value::Object(from_proto_03(message));
            Some(&normal)
        }
        _ => value,
    };
    let object = match value {
        Some(Value::Object(object)) => object,
        None | Some(Value::Null) => return Err(A2aError::invalid(at, "is required")),
        Some(_) => return Err(A2aError::invalid(at, "must be a message object")),
    };
    let message_id = optional_string(object, "messageId", at)?
        .ok_or_else(|| A2aError::invalid(format!("{at}.messageId"), "is required"))?;
    if message_id.len() > 256 || message_id.chars().any(char::is_control) {
        return Err(A2aError::invalid(
            format!("{at}.messageId"),
            "must be 1-256 printable characters",
        ));
    }
    let role = optional_string(object, "role", at)?;
    let user = match version {
        Version::V03 => "user",
        _ => "ROLE_USER",
    };
    match role.as_deref() {
        Some(r) if r == user || r == "ROLE_USER" || r == "user" => {}
        Some(other) => {
            return Err(A2aError::invalid(
                format!("{at}.role"),
                format!("`{other}`: a client sends {user} messages; the agent writes its own"),
            ));
        }
        None => return Err(A2aError::invalid(format!("{at}.role"), "is required")),
    }
    let parts = match object.get("parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => parts,
        Some(Value::Array(_)) => {
            return Err(A2aError::invalid(
                format!("{at}.parts"),
                "must not be empty",
            ));
        }
        _ => {
            return Err(A2aError::invalid(
                format!("{at}.parts"),
                "is required: a list of parts",
            ));
        }
    };
    let parts = parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let at = format!("{at}.parts[{i}]");
            parse_part(part, version, &at).map(|p| (at, p))
        })
        .collect::<Result<_, _>>()?;
    Ok(InMessage {
        message_id,
        context_id: optional_string(object, "contextId", at)?,
        task_id: optional_string(object, "taskId", at)?,
        parts,
    })
}

/// One part of either version: 1.0's `text` | `raw` | `url` | `data` field, or 0.3's
/// `kind` with `text`, `file` (`bytes` or `uri`) or `data`.
pub fn parse_part(value: &Value, version: Version, at: &str) -> Result<Part, A2aError> {
    let object = value
        .as_object()
        .ok_or_else(|| A2aError::invalid(at, "must be a part object"))?;
    let kinds: Vec<&str> = ["text", "raw", "url", "data", "file"]
        .into_iter()
        .filter(|k| object.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    let [kind] = kinds.as_slice() else {
        let expected = match version {
            Version::V1 => "exactly one of text, raw, url or data",
            _ => "exactly one of text, file or data",
        };
        return Err(A2aError::invalid(at, format!("must hold {expected}")));
    };
    let (file, media, filename) = match object.get("file") {
        Some(Value::Object(file)) => (
            Some(file),
            optional_string(file, "mimeType", &format!("{at}.file"))?,
            optional_string(file, "name", &format!("{at}.file"))?,
        ),
        Some(Value::Null) | None => (
            None,
            optional_string(object, "mediaType", at)?,
            optional_string(object, "filename", at)?,
        ),
        Some(_) => return Err(A2aError::invalid(format!("{at}.file"), "must be an object")),
    };
    let mut part = Part::text(media.clone().unwrap_or_else(|| "text/plain".into()), "");
    part.content = None;
    match *kind {
        "text" => {
            let text = object["text"]
                .as_str()
                .ok_or_else(|| A2aError::invalid(format!("{at}.text"), "must be a string"))?;
            part.content = Some(text.to_owned());
        }
        "data" => {
            part.content_type = media.unwrap_or_else(|| "application/json".into());
            part.content = Some(object["data"].to_string());
        }
        "raw" => {
            part.content_type = media.unwrap_or_else(|| "application/octet-stream".into());
            part.content = Some(base64_field(&object["raw"], &format!("{at}.raw"))?);
            part.content_encoding = ContentEncoding::Base64;
        }
        "url" => {
            part.content_type = media.unwrap_or_else(|| "application/octet-stream".into());
            part.content_url = Some(url_field(&object["url"], &format!("{at}.url"))?);
        }
        _ => {
            let file = file.expect("a file part");
            part.content_type = media.unwrap_or_else(|| "application/octet-stream".into());
            match (file.get("bytes"), file.get("uri")) {
                (Some(bytes), None) => {
                    part.content = Some(base64_field(bytes, &format!("{at}.file.bytes"))?);
                    part.content_encoding = ContentEncoding::Base64;
                }
                (None, Some(uri)) => {
                    part.content_url = Some(url_field(uri, &format!("{at}.file.uri"))?);
                }
                _ => {
                    return Err(A2aError::invalid(
                        format!("{at}.file"),
                        "must hold exactly one of bytes or uri",
                    ));
                }
            }
        }
    }
    if let Some(name) = filename {
        let rooted = if name.starts_with('/') {
            name.clone()
        } else {
            format!("/{name}")
        };
        crate::model::check_part_name(&rooted).map_err(|why| {
            A2aError::invalid(format!("{at}.filename"), format!("`{name}`: {why}"))
        })?;
        part.name = Some(rooted);
    }
    part.metadata = object.get("metadata").filter(|m| !m.is_null()).cloned();
    Ok(part)
}

fn base64_field(value: &Value, at: &str) -> Result<String, A2aError> {
    let text = value
        .as_str()
        .ok_or_else(|| A2aError::invalid(at, "must be a base64 string"))?;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|_| A2aError::invalid(at, "is not valid base64"))?;
    Ok(text.to_owned())
}

fn url_field(value: &Value, at: &str) -> Result<String, A2aError> {
    match value.as_str() {
        Some(url) if url.starts_with("https://") || url.starts_with("http://") => {
            Ok(url.to_owned())
        }
        _ => Err(A2aError::invalid(at, "must be an http(s) URL")),
    }
}

/// The user message's content.
pub fn user_content(parts: Vec<(String, Part)>) -> Content {
    Content::Blocks(parts.into_iter().map(|(_, p)| p.into_block()).collect())
}

/// A message answering an input-required task, part by part: data parts
/// `{"toolResult": {"toolCallId", "content"}}` and `{"toolPermission": {"toolCallId",
/// "granted", "reason"?}}` are answers, parts with inline text (data included) text, any
/// other part (a file) neither; the engine resolves them against the pending calls.
pub fn parse_answers(parts: &[(String, Part)]) -> Result<Vec<ResumePart>, A2aError> {
    let mut out = Vec::with_capacity(parts.len());
    for (at, part) in parts {
        let data = (crate::model::media_type(&part.content_type) == "application/json")
            .then(|| {
                part.content
                    .as_deref()
                    .and_then(|c| serde_json::from_str::<Value>(c).ok())
            })
            .flatten();
        if let Some(result) = data.as_ref().and_then(|d| d.get("toolResult")) {
            let id = call_id(result, at)?;
            let content = match result.get("content") {
                Some(Value::String(text)) => Content::Text(text.clone()),
                Some(other) => Content::Text(other.to_string()),
                None => {
                    return Err(A2aError::invalid(
                        format!("{at}.data.toolResult.content"),
                        "is required",
                    ));
                }
            };
            out.push(ResumePart::Answer(InputMessage::ToolResult {
                tool_call_id: id,
                content,
            }));
        } else if let Some(permission) = data.as_ref().and_then(|d| d.get("toolPermission")) {
            let id = call_id(permission, at)?;
            let granted = permission
                .get("granted")
                .and_then(Value::as_bool)
                .ok_or_else(|| {
                    A2aError::invalid(
                        format!("{at}.data.toolPermission.granted"),
                        "must be true or false",
                    )
                })?;
            let reason = permission
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_owned);
            out.push(ResumePart::Answer(InputMessage::ToolPermission {
                tool_call_id: id,
                granted,
                reason,
            }));
        } else if let Some(text) = part
            .content
            .as_deref()
            .filter(|_| part.content_encoding.is_plain())
        {
            out.push(ResumePart::Text(text.to_owned()));
        } else {
            out.push(ResumePart::Other);
        }
    }
    Ok(out)
}

fn call_id(answer: &Value, at: &str) -> Result<String, A2aError> {
    answer
        .get("toolCallId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| A2aError::invalid(format!("{at}.data"), "toolCallId is required"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_of_both_versions_become_body_parts() {
        let message = json!({"messageId": "m", "role": "ROLE_USER", "parts": [
            {"text": "hi"},
            {"raw": "aGk=", "mediaType": "text/plain", "filename": "a.txt"},
            {"data": {"k": 1}},
        ]});
        let parsed = parse_message(Some(&message), Version::V1, "message").unwrap();
        let parts: Vec<&Part> = parsed.parts.iter().map(|(_, p)| p).collect();
        assert_eq!(parts[0].content.as_deref(), Some("hi"));
        assert_eq!(parts[1].name.as_deref(), Some("/a.txt"));
        assert_eq!(parts[1].content_encoding, ContentEncoding::Base64);
        assert_eq!(parts[2].content_type, "application/json");
        assert_eq!(parts[2].content.as_deref(), Some(r#"{"k":1}"#));

        let old = json!({"messageId": "m", "role": "user", "kind": "message", "parts": [
            {"kind": "file", "file": {"uri": "https://e.com/x.pdf", "mimeType": "application/pdf"}}
        ]});
        let parsed = parse_message(Some(&old), Version::V03, "params.message").unwrap();
        assert_eq!(
            parsed.parts[0].1.content_url.as_deref(),
            Some("https://e.com/x.pdf")
        );

        let two =
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "data": {}}]});
        let error = parse_message(Some(&two), Version::V1, "message").unwrap_err();
        assert!(
            matches!(error, A2aError::Protocol { field: Some(ref f), .. } if f == "message.parts[0]")
        );
        let agent = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "a"}]});
        assert!(parse_message(Some(&agent), Version::V1, "message").is_err());
        let bad = json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "%%"}]});
        assert!(parse_message(Some(&bad), Version::V1, "message").is_err());
    }

    #[test]
    fn answer_parts_are_answers_text_or_neither() {
        let part = |value: Value| {
            (
                "message.parts[0]".to_owned(),
                Part::text("application/json", value.to_string()),
            )
        };
        let text = (
            "message.parts[1]".to_owned(),
            Part::text("text/plain", "sunny"),
        );
        let file = (
            "message.parts[2]".to_owned(),
            Part {
                content: None,
                content_url: Some("https://e.com/x.pdf".into()),
                ..Part::text("application/pdf", "")
            },
        );
        let parsed = parse_answers(&[
            part(json!({"toolPermission": {"toolCallId": "c2", "granted": false, "reason": "no"}})),
            text,
            file,
        ])
        .unwrap();
        assert_eq!(
            parsed,
            [
                ResumePart::Answer(InputMessage::ToolPermission {
                    tool_call_id: "c2".into(),
                    granted: false,
                    reason: Some("no".into())
                }),
                ResumePart::Text("sunny".into()),
                ResumePart::Other,
            ]
        );
        let unnamed = parse_answers(&[part(json!({"toolResult": {"content": "x"}}))]);
        assert!(unnamed.is_err());
    }
}
