//! ACP messages into the engine's vocabulary, and the engine's history back out.
//!
//! Part names: ACP clients send free-form names (`image.png`); agentry's are absolute
//! paths. A name without a leading `/` is rooted (`/image.png`); one still invalid after
//! that is refused with `invalid_input` naming the part.

use base64::Engine as _;
use serde_json::{Map, Value};

use super::error::AcpError;
use crate::model::{Content, ContentEncoding, Part};

/// Where each block of a converted body came from: `input[i].parts[j]` and its name.
#[derive(Debug, Clone, Default)]
pub struct Origins(Vec<String>);

impl Origins {
    /// Where a block of the body (by index) came from; `input` for the body as a whole.
    pub fn at(&self, part: Option<usize>) -> String {
        match part.and_then(|i| self.0.get(i)) {
            Some(origin) => origin.clone(),
            None => "input".to_owned(),
        }
    }
}

/// The `input` of a run: user messages whose parts become one user message.
pub fn parse_input(value: Option<&Value>) -> Result<(Content, Origins), AcpError> {
    let messages = match value {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => return Err(AcpError::invalid("input", "must not be empty")),
        None | Some(Value::Null) => return Err(AcpError::invalid("input", "is required")),
        Some(_) => return Err(AcpError::invalid("input", "must be a list of messages")),
    };
    let mut blocks = Vec::new();
    let mut origins = Origins::default();
    for (i, message) in messages.iter().enumerate() {
        let at = format!("input[{i}]");
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        if role != "user" {
            let why = if is_agent_role(role) {
                format!(
                    "`{role}`: a run's input is user messages; the session keeps the \
                     agent's messages"
                )
            } else {
                format!("`{role}`: must match {ROLE_PATTERN}")
            };
            return Err(AcpError::invalid(format!("{at}.role"), why));
        }
        for (j, part) in parts_of(message, &at)?.iter().enumerate() {
            let at = format!("{at}.parts[{j}]");
            let part = parse_part(part, &at)?;
            let origin = match &part.name {
                Some(name) => format!("{at} (`{name}`)"),
                None => at.clone(),
            };
            blocks.push(part.into_block());
            origins.0.push(origin);
        }
    }
    Ok((Content::Blocks(blocks), origins))
}

/// The reference's pattern for a message's role.
const ROLE_PATTERN: &str = "^(user|agent(/[a-zA-Z0-9_-]+)?)$";

/// `agent` or `agent/<name>`: a role the reference takes but a run's input refuses.
fn is_agent_role(role: &str) -> bool {
    match role.strip_prefix("agent") {
        Some("") => true,
        Some(rest) => rest.strip_prefix('/').is_some_and(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }),
        None => false,
    }
}

pub fn parts_of<'a>(message: &'a Value, at: &str) -> Result<&'a Vec<Value>, AcpError> {
    match message.get("parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => Ok(parts),
        Some(Value::Array(_)) => Err(AcpError::invalid(
            format!("{at}.parts"),
            "must not be empty",
        )),
        _ => Err(AcpError::invalid(
            format!("{at}.parts"),
            "is required: a list of parts",
        )),
    }
}

fn string_field<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<&'a str>, AcpError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(AcpError::invalid(format!("{at}.{key}"), "must be a string")),
    }
}

/// Roots a bare name (`image.png` → `/image.png`).
pub fn normalize_name(name: &str) -> String {
    if name.starts_with('/') {
        name.to_owned()
    } else {
        format!("/{name}")
    }
}

/// One `MessagePart`, its name normalized and checked.
pub fn parse_part(value: &Value, at: &str) -> Result<Part, AcpError> {
    let object = value
        .as_object()
        .ok_or_else(|| AcpError::invalid(at, "must be a part object"))?;
    let name = match string_field(object, "name", at)? {
        None => None,
        Some(raw) => {
            let name = normalize_name(raw);
            crate::model::check_part_name(&name).map_err(|why| {
                AcpError::invalid(format!("{at}.name"), format!("part name `{raw}`: {why}"))
            })?;
            Some(name)
        }
    };
    let content_type = string_field(object, "content_type", at)?
        .filter(|t| !t.is_empty())
        .unwrap_or("text/plain");
    let content_encoding = match string_field(object, "content_encoding", at)? {
        None | Some("plain") => ContentEncoding::Plain,
        Some("base64") => ContentEncoding::Base64,
        Some(other) => {
            return Err(AcpError::invalid(
                format!("{at}.content_encoding"),
                format!("`{other}`: expected plain or base64"),
            ));
        }
    };
    let content = string_field(object, "content", at)?;
    let content_url = string_field(object, "content_url", at)?;
    if content.is_some() && content_url.is_some() {
        return Err(AcpError::invalid(
            at,
            "only one of content or content_url can be provided",
        ));
    }
    if content_encoding == ContentEncoding::Base64
        && let Some(data) = content
        && base64::engine::general_purpose::STANDARD
            .decode(data)
            .is_err()
    {
        return Err(AcpError::invalid(
            format!("{at}.content"),
            "is not valid base64 (content_encoding is base64)",
        ));
    }
    let metadata = object.get("metadata").filter(|m| !m.is_null()).cloned();
    Ok(Part {
        name,
        content_type: content_type.to_owned(),
        content: content.map(str::to_owned),
        content_encoding,
        content_url: content_url.map(str::to_owned),
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bare_names_are_rooted_and_invalid_ones_refused_by_part() {
        let (content, _) = parse_input(Some(&json!([{"role": "user", "parts": [
            {"content": "hi"},
            {"name": "image.png", "content_type": "image/png", "content_url": "https://e.com/i"}
        ]}])))
        .unwrap();
        let parts = content.to_parts();
        assert_eq!(parts[0].content.as_deref(), Some("hi"));
        assert_eq!(parts[1].name.as_deref(), Some("/image.png"));
        let err = parse_input(Some(&json!([{"parts": [
            {"content": "hi"}, {"name": "my file.txt", "content": "x"}
        ]}])))
        .unwrap_err();
        assert_eq!(err.data.unwrap()["field"], "input[0].parts[1].name");
        assert!(err.message.contains("my file.txt"), "{}", err.message);
        let both = parse_input(Some(&json!([{"parts": [
            {"content": "x", "content_url": "https://e.com/x"}
        ]}])));
        assert!(both.is_err());
    }

    #[test]
    fn agent_roles_are_told_apart_from_roles_outside_the_pattern() {
        assert!(is_agent_role("agent"));
        assert!(is_agent_role("agent/my-agent_2"));
        assert!(!is_agent_role("agent/"));
        assert!(!is_agent_role("agent/a.b"));
        assert!(!is_agent_role("agents"));
        assert!(!is_agent_role("assistant"));
    }
}
