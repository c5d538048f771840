//! What a turn request brings: a user message, or answers to pending tool calls.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::error::EngineError;
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

/// A protocol's input that carries the conversation so far, split into the history the
/// client holds and the new turn's messages: the trailing user messages and tool results.
/// `None` when nothing trails (the last message is the assistant's or the system's).
pub fn split_input(
    mut messages: Vec<HistoryMessage>,
) -> Option<(Vec<HistoryMessage>, Vec<InputMessage>)> {
    let split = messages
        .iter()
        .rposition(|m| !matches!(m, HistoryMessage::User { .. } | HistoryMessage::Tool { .. }))
        .map_or(0, |i| i + 1);
    if split == messages.len() {
        return None;
    }
    let new = messages
        .split_off(split)
        .into_iter()
        .map(|message| match message {
            HistoryMessage::User { content } => InputMessage::User { content },
            HistoryMessage::Tool {
                tool_call_id,
                content,
            } => InputMessage::ToolResult {
                tool_call_id,
                content,
            },
            _ => unreachable!("only user and tool messages trail"),
        })
        .collect();
    Some((messages, new))
}

/// A tool call of the history still waiting for its answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingCall {
    pub id: String,
    pub name: String,
    pub input: Map<String, Value>,
}

/// Tool calls of the history still waiting for a result: `tool_use` blocks with no tool
/// message answering them.
pub fn pending_tool_calls<M: std::borrow::Borrow<HistoryMessage>>(
    history: &[M],
) -> Vec<PendingCall> {
    // In order: a tool message answers the latest call with its id, so a model that uses
    // the same ids turn after turn (`call_0`, …) still has its new calls awaited.
    let mut pending: Vec<PendingCall> = Vec::new();
    for message in history.iter().map(M::borrow) {
        match message {
            HistoryMessage::Assistant {
                content: Content::Blocks(blocks),
            } => {
                for block in blocks {
                    if let ContentBlock::ToolUse {
                        tool_call_id,
                        name,
                        input,
                    } = block
                    {
                        pending.retain(|call| call.id != *tool_call_id);
                        pending.push(PendingCall {
                            id: tool_call_id.clone(),
                            name: name.clone(),
                            input: input.clone(),
                        });
                    }
                }
            }
            HistoryMessage::Tool { tool_call_id, .. } => {
                pending.retain(|call| call.id != *tool_call_id);
            }
            _ => {}
        }
    }
    pending
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> EngineError {
    EngineError::Invalid(FieldError::new(field, message))
}

/// A turn brings one user message, or exactly one answer per pending tool call: a result
/// for a client tool's call, a permission for a server tool's (`is_server_tool`).
pub fn check_input(
    messages: &[InputMessage],
    pending: &[PendingCall],
    is_server_tool: impl Fn(&str) -> bool,
) -> Result<(), EngineError> {
    if messages.is_empty() {
        return Err(invalid("messages", "must not be empty"));
    }
    let users = messages
        .iter()
        .filter(|m| matches!(m, InputMessage::User { .. }))
        .count();
    if users > 0 {
        if messages.len() > 1 {
            return Err(invalid(
                "messages",
                "a turn brings either one user message or tool results and permissions",
            ));
        }
        if !pending.is_empty() {
            let calls = pending.iter().map(|c| c.id.clone()).collect();
            return Err(EngineError::AwaitingInput { calls });
        }
        return Ok(());
    }
    let pending_set: BTreeSet<&str> = pending.iter().map(|c| c.id.as_str()).collect();
    let mut answered = BTreeSet::new();
    for (i, message) in messages.iter().enumerate() {
        let id = message.answers().expect("not a user message");
        let Some(call) = pending.iter().find(|c| c.id == id) else {
            return Err(invalid(
                format!("messages[{i}].toolCallId"),
                format!("no pending tool call has id `{id}`"),
            ));
        };
        let server = is_server_tool(&call.name);
        match message {
            InputMessage::ToolResult { .. } if server => {
                return Err(invalid(
                    format!("messages[{i}].toolCallId"),
                    format!(
                        "`{id}` calls server tool `{}`: answer it with a tool_permission message",
                        call.name
                    ),
                ));
            }
            InputMessage::ToolPermission { .. } if !server => {
                return Err(invalid(
                    format!("messages[{i}].toolCallId"),
                    format!(
                        "`{id}` calls client tool `{}`: answer it with its result",
                        call.name
                    ),
                ));
            }
            _ => {}
        }
        if !answered.insert(id) {
            return Err(invalid(
                format!("messages[{i}].toolCallId"),
                format!("tool call `{id}` is answered twice"),
            ));
        }
    }
    let missing: Vec<&str> = pending_set.difference(&answered).copied().collect();
    if !missing.is_empty() {
        return Err(invalid(
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
    fn the_trailing_user_and_tool_messages_are_the_new_turn() {
        let user = |t: &str| HistoryMessage::User {
            content: Content::Text(t.into()),
        };
        let assistant = HistoryMessage::Assistant {
            content: Content::Blocks(vec![tool_use("a")]),
        };
        let tool = HistoryMessage::Tool {
            tool_call_id: "a".into(),
            content: Content::Text("r".into()),
        };
        let (history, new) =
            split_input(vec![user("hi"), assistant.clone(), tool.clone()]).unwrap();
        assert_eq!(history, [user("hi"), assistant.clone()]);
        assert_eq!(
            new,
            [InputMessage::ToolResult {
                tool_call_id: "a".into(),
                content: Content::Text("r".into())
            }]
        );
        let (history, new) = split_input(vec![user("a"), user("b")]).unwrap();
        assert!(history.is_empty());
        assert_eq!(new.len(), 2);
        assert!(split_input(vec![user("hi"), assistant]).is_none());
        assert!(split_input(Vec::new()).is_none());
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
        let pending = pending_tool_calls(&history);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].id, "b");
    }

    #[test]
    fn a_call_id_used_again_in_a_later_turn_is_pending_again() {
        let answer = |id: &str| HistoryMessage::Tool {
            tool_call_id: id.into(),
            content: Content::Text("ok".into()),
        };
        let mut history = vec![
            HistoryMessage::Assistant {
                content: Content::Blocks(vec![tool_use("call_0"), tool_use("call_1")]),
            },
            answer("call_0"),
            answer("call_1"),
            HistoryMessage::User {
                content: Content::Text("again".into()),
            },
            HistoryMessage::Assistant {
                content: Content::Blocks(vec![tool_use("call_0"), tool_use("call_1")]),
            },
        ];
        let ids = |h: &[HistoryMessage]| -> Vec<String> {
            pending_tool_calls(h).into_iter().map(|c| c.id).collect()
        };
        assert_eq!(ids(&history), ["call_0", "call_1"]);
        history.push(answer("call_1"));
        assert_eq!(ids(&history), ["call_0"]);
        history.push(answer("call_0"));
        assert!(ids(&history).is_empty());
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
        let call = |id: &str| PendingCall {
            id: id.into(),
            name: "t".into(),
            input: Map::new(),
        };
        let client = |_: &str| false;
        let a = [call("a")];
        let ab = [call("a"), call("b")];
        assert!(check_input(std::slice::from_ref(&user), &[], client).is_ok());
        let field = |error: EngineError| match error {
            EngineError::Invalid(field) => field,
            other => panic!("not a field's error: {other:?}"),
        };
        let twice = check_input(&[user.clone(), user.clone()], &[], client);
        assert_eq!(field(twice.unwrap_err()).field, "messages");
        let early = check_input(std::slice::from_ref(&user), &a, client);
        assert!(
            matches!(early, Err(EngineError::AwaitingInput { ref calls }) if calls == &["a"]),
            "{early:?}"
        );
        let unknown = check_input(&[result("x")], &a, client);
        assert_eq!(field(unknown.unwrap_err()).field, "messages[0].toolCallId");
        let partial = check_input(&[result("a")], &ab, client);
        assert!(field(partial.unwrap_err()).message.contains('b'));
        assert!(check_input(&[result("a"), result("b")], &ab, client).is_ok());
        assert!(check_input(&[], &[], client).is_err());
        let permission = InputMessage::ToolPermission {
            tool_call_id: "a".into(),
            granted: true,
            reason: None,
        };
        assert!(check_input(std::slice::from_ref(&permission), &a, client).is_err());
        assert!(check_input(&[permission], &a, |_| true).is_ok());
        assert!(check_input(&[result("a")], &a, |_| true).is_err());
    }
}
