//! A session's history as ACP messages: user messages as they came, the agent's as
//! `agent/<name>`, a tool result as a user message with its `/tool_results/<id>` part.

use chrono::{DateTime, Utc};

use super::render::{TOOL_RESULTS, agent_role, tool_call_part};
use super::wire::{MessageObject, PartMetadata, PartObject, Trajectory, timestamp};
use crate::model::{Content, ContentBlock, HistoryMessage, Part};

/// A stored part as an ACP part; a URL agentry serves (`/files/…`) made absolute.
fn part_object(part: &Part, base: &str) -> PartObject {
    PartObject {
        name: part.name.clone(),
        content_type: part.content_type.clone(),
        content: part.content.clone(),
        content_encoding: if part.content_encoding.is_plain() {
            "plain"
        } else {
            "base64"
        },
        content_url: part.content_url.as_ref().map(|url| absolute(url, base)),
        metadata: part.metadata.clone().map(PartMetadata::Other),
    }
}

/// `/files/…` → `<base>/files/…`; other URLs as they are.
pub fn absolute(url: &str, base: &str) -> String {
    if url.starts_with('/') {
        format!("{base}{url}")
    } else {
        url.to_owned()
    }
}

fn block_parts(blocks: &[ContentBlock], base: &str) -> Vec<PartObject> {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => PartObject::text(text.clone()),
            ContentBlock::Thinking { thinking } => PartObject {
                content: None,
                metadata: Some(PartMetadata::Trajectory(Trajectory::message(
                    thinking.clone(),
                ))),
                ..PartObject::text("")
            },
            ContentBlock::ToolUse {
                tool_call_id,
                name,
                input,
            } => tool_call_part(tool_call_id, name, input),
            ContentBlock::Image { url } => {
                let media = url
                    .strip_prefix("data:")
                    .and_then(|rest| rest.split([';', ',']).next())
                    .unwrap_or("image/*");
                PartObject {
                    content: None,
                    content_type: media.to_owned(),
                    content_url: Some(url.clone()),
                    ..PartObject::text("")
                }
            }
            ContentBlock::Part(part) => part_object(part, base),
        })
        .collect()
}

/// One history message as an ACP message: user messages as they came, the agent's as
/// `agent/<name>`, a tool result as a user message with its `/tool_results/<id>` part,
/// the system prompt a session was seeded with as a `/system` part. It was created and
/// completed when it was stored.
pub fn history_message(
    message: &HistoryMessage,
    stored_at: DateTime<Utc>,
    agent: &str,
    base: &str,
) -> MessageObject {
    let blocks = |content: &Content| match content {
        Content::Text(text) => vec![PartObject::text(text.clone())],
        Content::Blocks(blocks) => block_parts(blocks, base),
    };
    let (role, parts) = match message {
        HistoryMessage::System { content } => (
            "user".to_owned(),
            vec![PartObject {
                name: Some("/system".to_owned()),
                ..PartObject::text(content.clone())
            }],
        ),
        HistoryMessage::User { content } => ("user".to_owned(), blocks(content)),
        HistoryMessage::Assistant { content } => (agent_role(agent), blocks(content)),
        HistoryMessage::Tool {
            tool_call_id,
            content,
        } => {
            let mut parts = blocks(content);
            if let Some(first) = parts.first_mut() {
                first.name = Some(format!("{TOOL_RESULTS}{tool_call_id}"));
            }
            ("user".to_owned(), parts)
        }
    };
    MessageObject {
        role,
        parts,
        created_at: Some(timestamp(stored_at)),
        completed_at: Some(timestamp(stored_at)),
    }
}
