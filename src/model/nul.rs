//! U+0000 in stored text: PostgreSQL refuses it in text and JSON, SQLite keeps it. One rule
//! holds on both backends: a name, id or key holding it is refused, naming the field;
//! content (messages, tool calls and results, model output) carries U+FFFD in its place,
//! both where it is stored and where it is streamed, so a replay equals the live stream.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{EventData, FieldError};

/// What stands for U+0000 in stored content.
pub const NUL_REPLACEMENT: char = '\u{fffd}';

/// Refuses a name, id or key that holds U+0000.
pub fn check_no_nul(field: impl Into<String>, value: &str) -> Result<(), FieldError> {
    if value.contains('\0') {
        return Err(FieldError::new(field, "must not contain U+0000 (NUL)"));
    }
    Ok(())
}

/// Whether any string of a serializable value holds U+0000.
pub fn holds_nul<T: Serialize + ?Sized>(value: &T) -> bool {
    // JSON writes U+0000 as this escape (a literal backslash-u text is `\\u0000`, which
    // only costs a closer look).
    serde_json::to_string(value).is_ok_and(|text| text.contains("\\u0000"))
}

/// The value with U+0000 replaced by U+FFFD in every string and object key; the value
/// itself when it holds none.
pub fn scrub_nul<T: Serialize + DeserializeOwned>(value: T) -> T {
    if !holds_nul(&value) {
        return value;
    }
    let Ok(mut tree) = serde_json::to_value(&value) else {
        return value;
    };
    scrub_value(&mut tree);
    serde_json::from_value(tree).unwrap_or(value)
}

fn scrub_value(value: &mut Value) {
    match value {
        Value::String(text) => scrub_text(text),
        Value::Array(items) => items.iter_mut().for_each(scrub_value),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (mut key, mut item) in entries {
                scrub_text(&mut key);
                scrub_value(&mut item);
                map.insert(key, item);
            }
        }
        _ => {}
    }
}

fn scrub_text(text: &mut String) {
    if text.contains('\0') {
        *text = text.replace('\0', &NUL_REPLACEMENT.to_string());
    }
}

impl EventData {
    /// The event as it is stored and streamed (see the module's rule).
    pub fn scrubbed(self) -> EventData {
        match self {
            EventData::TextDelta { mut delta } => {
                scrub_text(&mut delta);
                EventData::TextDelta { delta }
            }
            EventData::ThinkingDelta { mut delta } => {
                scrub_text(&mut delta);
                EventData::ThinkingDelta { delta }
            }
            other @ (EventData::ToolCall { .. }
            | EventData::ToolResult { .. }
            | EventData::TurnStop { .. }) => scrub_nul(other),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Content, ContentBlock, HistoryMessage};

    #[test]
    fn content_carries_a_replacement_and_names_are_refused() {
        let message = HistoryMessage::Assistant {
            content: Content::Blocks(vec![
                ContentBlock::Text {
                    text: "a\0b".into(),
                },
                ContentBlock::ToolUse {
                    tool_call_id: "c\0".into(),
                    name: "t".into(),
                    input: serde_json::json!({"k\0": ["v\0"]})
                        .as_object()
                        .unwrap()
                        .clone(),
                },
            ]),
        };
        let scrubbed = scrub_nul(message);
        let text = serde_json::to_string(&scrubbed).unwrap();
        assert!(!text.contains("\\u0000"), "{text}");
        assert!(text.contains("a\u{fffd}b") && text.contains("k\u{fffd}"));
        let literal = HistoryMessage::User {
            content: Content::Text("\\u0000 is how JSON writes it".into()),
        };
        assert_eq!(scrub_nul(literal.clone()), literal);
        let delta = EventData::TextDelta {
            delta: "x\0".into(),
        }
        .scrubbed();
        assert_eq!(
            delta,
            EventData::TextDelta {
                delta: "x\u{fffd}".into()
            }
        );
        assert_eq!(check_no_nul("name", "ok"), Ok(()));
        assert_eq!(check_no_nul("name", "n\0").unwrap_err().field, "name");
    }
}
