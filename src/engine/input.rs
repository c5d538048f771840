//! What a turn request brings: a user message, or answers to pending tool calls.

use std::collections::{BTreeSet, HashSet};

use crate::model::{Content, ContentBlock, FieldError, HistoryMessage};

/// One message of a turn request (AAP's ApplicationMessage).
#[derive(Debug, Clone, PartialEq)]
pub enum InputMessage {
    User {
        content: Content,
    },
    ToolResult {
        tool_call_id: String,
        content: Content,
    },
    ToolPermission {
        tool_call_id: String,
        granted: bool,
        reason: Option<String>,
    },
}

impl InputMessage {
    /// The history message it becomes; tool permissions never enter history.
    pub fn to_history(&self) -> Option<HistoryMessage> {
        match self {
            InputMessage::User { content } => Some(HistoryMessage::User {
                content: content.clone(),
            }),
            InputMessage::ToolResult {
                tool_call_id,
                content,
            } => Some(HistoryMessage::Tool {
                tool_call_id: tool_call_id.clone(),
                content: content.clone(),
            }),
            InputMessage::ToolPermission { .. } => None,
        }
    }

    fn answers(&self) -> Option<&str> {
        match self {
            InputMessage::User { .. } => None,
            InputMessage::ToolResult { tool_call_id, .. }
            | InputMessage::ToolPermission { tool_call_id, .. } => Some(tool_call_id),
        }
    }
}

/// Tool calls of the history still waiting for a result: `tool_use` blocks with no tool
/// message answering them.
pub fn pending_tool_calls(history: &[HistoryMessage]) -> Vec<String> {
    let mut pending = Vec::new();
    let mut answered = HashSet::new();
    for message in history {
        match message {
            HistoryMessage::Assistant {
                content: Content::Blocks(blocks),
            } => {
                for block in blocks {
                    if let ContentBlock::ToolUse { tool_call_id, .. } = block {
                        pending.push(tool_call_id.clone());
                    }
                }
            }
            HistoryMessage::Tool { tool_call_id, .. } => {
                answered.insert(tool_call_id.clone());
            }
            _ => {}
        }
    }
    pending.retain(|id| !answered.contains(id));
    pending
}

/// A turn brings one user message, or exactly one answer per pending tool call.
pub fn check_input(messages: &[InputMessage], pending: &[String]) -> Result<(), FieldError> {
    if messages.is_empty() {
        return Err(FieldError::new("messages", "must not be empty"));
    }
    let users = messages
        .iter()
        .filter(|m| matches!(m, InputMessage::User { .. }))
        .count();
    if users > 0 {
        if messages.len() > 1 {
            return Err(FieldError::new(
                "messages",
                "a turn brings either one user message or tool results and permissions",
            ));
        }
        if !pending.is_empty() {
            return Err(FieldError::new(
                "messages",
                format!(
                    "tool calls are pending and must be answered first: {}",
                    pending.join(", ")
                ),
            ));
        }
        return Ok(());
    }
    let pending_set: BTreeSet<&str> = pending.iter().map(String::as_str).collect();
    let mut answered = BTreeSet::new();
    for (i, message) in messages.iter().enumerate() {
        let id = message.answers().expect("not a user message");
        if !pending_set.contains(id) {
            return Err(FieldError::new(
                format!("messages[{i}].toolCallId"),
                format!("no pending tool call has id `{id}`"),
            ));
        }
        if !answered.insert(id) {
            return Err(FieldError::new(
                format!("messages[{i}].toolCallId"),
                format!("tool call `{id}` is answered twice"),
            ));
        }
    }
    let missing: Vec<&str> = pending_set.difference(&answered).copied().collect();
    if !missing.is_empty() {
        return Err(FieldError::new(
            "messages",
            format!(
                "pending tool calls are not answered: {}",
                missing.join(", ")
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_use(id: &str) -> ContentBlock {
        ContentBlock::ToolUse {
            tool_call_id: id.into(),
            name: "t".into(),
            input: Default::default(),
        }
    }

    #[test]
    fn pending_calls_are_those_without_a_tool_message() {
        let history = vec![
            HistoryMessage::Assistant {
                content: Content::Blocks(vec![tool_use("a"), tool_use("b")]),
            },
            HistoryMessage::Tool {
                tool_call_id: "a".into(),
                content: Content::Text("ok".into()),
            },
        ];
        assert_eq!(pending_tool_calls(&history), ["b"]);
    }

    #[test]
    fn input_must_answer_exactly_the_pending_calls() {
        let user = InputMessage::User {
            content: Content::Text("hi".into()),
        };
        let result = |id: &str| InputMessage::ToolResult {
            tool_call_id: id.into(),
            content: Content::Text("r".into()),
        };
        assert!(check_input(std::slice::from_ref(&user), &[]).is_ok());
        assert_eq!(
            check_input(&[user.clone(), user.clone()], &[])
                .unwrap_err()
                .field,
            "messages"
        );
        assert!(
            check_input(&[user], &["a".into()])
                .unwrap_err()
                .message
                .contains('a')
        );
        assert_eq!(
            check_input(&[result("x")], &["a".into()])
                .unwrap_err()
                .field,
            "messages[0].toolCallId"
        );
        assert!(
            check_input(&[result("a")], &["a".into(), "b".into()])
                .unwrap_err()
                .message
                .contains('b')
        );
        assert!(check_input(&[result("a"), result("b")], &["a".into(), "b".into()]).is_ok());
        assert!(check_input(&[], &[]).is_err());
    }
}
