//! Messages a client adds to a session's history between its turns, without running one
//! (what was said elsewhere, or context for the next turn). They are checked as a new
//! session's seed is (the agent's message checks and body schemas, the session's size
//! limits), refused while a turn of the session is queued or running or its tool calls
//! wait for answers, and durable before the call returns: every history read (any face's,
//! the next turn's) sees them after it.

use std::collections::HashSet;

use super::error::{EngineError, not_found};
use super::runner::Engine;
use crate::model::{Content, ContentBlock, FieldError, HistoryMessage, SessionId, TenantId};
use crate::store::{Conflict, StoreError};

/// How often an append is tried again when the history moved between its checks and its
/// write (another append won the race).
const ATTEMPTS: usize = 3;

impl Engine {
    /// Appends `messages` to the session's full history; the position of the first. A tool
    /// message must answer a call made earlier among `messages` (nothing of the session's
    /// may be pending).
    pub async fn append_history(
        &self,
        tenant: &TenantId,
        session_id: &SessionId,
        messages: Vec<HistoryMessage>,
    ) -> Result<i64, EngineError> {
        if messages.is_empty() {
            return Err(FieldError::new("messages", "must bring at least one message").into());
        }
        let max = self.settings.max_seed_messages;
        if messages.len() > max {
            return Err(FieldError::new(
                "messages",
                format!("at most {max} messages may be added at once"),
            )
            .into());
        }
        let session = self
            .store
            .get_session(tenant, session_id)
            .await
            .map_err(|e| not_found(e, "session"))?;
        let agent = self
            .agent_of(&session)
            .await?
            .ok_or(EngineError::AgentUnavailable)?;
        agent.check_messages(&messages)?;
        check_answers(&messages)?;
        let added: u64 = messages
            .iter()
            .map(|m| crate::model::json_len(m) as u64)
            .sum();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (length, bytes) = self.store.history_size(tenant, session_id).await?;
            if length + messages.len() as u64 > self.limits.session_max_messages
                || bytes + added > self.limits.session_max_bytes
            {
                return Err(EngineError::SessionFull {
                    messages: length,
                    bytes,
                    max_messages: self.limits.session_max_messages,
                    max_bytes: self.limits.session_max_bytes,
                });
            }
            let pending = self.pending_tool_calls(tenant, session_id).await?;
            if !pending.is_empty() {
                return Err(EngineError::AwaitingInput {
                    calls: pending.into_iter().map(|call| call.id).collect(),
                });
            }
            let written = self
                .store
                .append_history(
                    tenant,
                    session_id,
                    length as i64,
                    &messages,
                    crate::model::now(),
                )
                .await;
            // What this process remembers of the session no longer holds.
            self.histories.forget(session_id);
            match written {
                Ok(()) => return Ok(length as i64),
                Err(StoreError::Stale) if attempt < ATTEMPTS => continue,
                Err(StoreError::Stale) => return Err(EngineError::SessionBusy),
                Err(StoreError::Conflict(Conflict::ActiveTurn)) => {
                    return Err(EngineError::SessionBusy);
                }
                Err(other) => return Err(not_found(other, "session")),
            }
        }
    }
}

/// Each tool message answers a call an earlier message of the same batch made, once.
fn check_answers(messages: &[HistoryMessage]) -> Result<(), FieldError> {
    let mut open: HashSet<&str> = HashSet::new();
    for (i, message) in messages.iter().enumerate() {
        match message {
            HistoryMessage::Assistant {
                content: Content::Blocks(blocks),
            } => {
                for block in blocks {
                    if let ContentBlock::ToolUse { tool_call_id, .. } = block {
                        open.insert(tool_call_id);
                    }
                }
            }
            HistoryMessage::Tool { tool_call_id, .. } if !open.remove(tool_call_id.as_str()) => {
                return Err(FieldError::new(
                    format!("messages[{i}].tool_call_id"),
                    format!(
                        "`{tool_call_id}` answers no tool call made before it among these \
                         messages"
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> HistoryMessage {
        HistoryMessage::Assistant {
            content: Content::Blocks(vec![ContentBlock::ToolUse {
                tool_call_id: id.into(),
                name: "f".into(),
                input: Default::default(),
            }]),
        }
    }

    fn answer(id: &str) -> HistoryMessage {
        HistoryMessage::Tool {
            tool_call_id: id.into(),
            content: Content::Text("ok".into()),
        }
    }

    #[test]
    fn a_tool_message_answers_an_earlier_call_of_the_batch_once() {
        assert!(check_answers(&[call("a"), answer("a")]).is_ok());
        assert!(check_answers(&[call("a")]).is_ok());
        let orphan = check_answers(&[answer("a")]).unwrap_err();
        assert_eq!(orphan.field, "messages[0].tool_call_id");
        let twice = check_answers(&[call("a"), answer("a"), answer("a")]).unwrap_err();
        assert_eq!(twice.field, "messages[2].tool_call_id");
    }
}
