//! The event log as AAP SSE events: delta mode as it happens, message mode aggregated per
//! message. Live and replayed streams render the same way.
//!
//! Every frame's `id:` is the seq of one stored event, so each frame has an id of its own,
//! strictly increasing, that resumes exactly after itself in either mode: a delta mode
//! frame is its event's; a message mode block is named by the last event that made it (a
//! text block by its last delta, a tool call by its `tool_call`), although it is sent when
//! its message ends. A client that resumes after a block replays from the next event on.

use serde::Serialize;
use serde_json::json;

use crate::engine::MessageAssembler;
use crate::http::sse::Frame;
use crate::model::{ContentBlock, Event, EventData, StreamMode};

pub struct AapRenderer {
    mode: StreamMode,
    open: Option<OpenMessage>,
}

/// The message being gathered in message mode: its blocks, and for each the seq of the last
/// event that went into it (its frame's id).
#[derive(Default)]
struct OpenMessage {
    blocks: MessageAssembler,
    ends: Vec<i64>,
}

impl OpenMessage {
    fn push(&mut self, seq: i64, data: &EventData) {
        self.blocks.push_event(data);
        if self.blocks.blocks().len() > self.ends.len() {
            self.ends.push(seq);
        } else if let Some(end) = self.ends.last_mut() {
            *end = seq;
        }
    }

    fn frames(self) -> Vec<Frame> {
        self.blocks
            .finish_blocks()
            .iter()
            .zip(self.ends)
            .filter_map(|(block, seq)| block_frame(seq, block))
            .collect()
    }
}

/// A frame whose data is serialized straight to text (no `Value` in between).
fn frame(seq: i64, event: &'static str, data: impl Serialize) -> Frame {
    Frame {
        id: Some(seq),
        event: Some(event),
        data: serde_json::to_string(&data).expect("frames serialize"),
    }
}

/// `{"delta": …}`, the data of the frames sent most.
#[derive(Serialize)]
struct Delta<'a> {
    delta: &'a str,
}

/// A whole block of a message, as message mode sends it.
fn block_frame(seq: i64, block: &ContentBlock) -> Option<Frame> {
    Some(match block {
        ContentBlock::Text { text } => {
            #[derive(Serialize)]
            struct Text<'a> {
                text: &'a str,
            }
            frame(seq, "text", Text { text })
        }
        ContentBlock::Thinking { thinking } => {
            frame(seq, "thinking", json!({ "thinking": thinking }))
        }
        ContentBlock::ToolUse {
            tool_call_id,
            name,
            input,
        } => frame(
            seq,
            "tool_call",
            json!({"toolCallId": tool_call_id, "name": name, "input": input}),
        ),
        ContentBlock::Image { .. } | ContentBlock::Part(_) => return None,
    })
}

impl AapRenderer {
    /// `StreamMode::None` renders as delta mode.
    pub fn new(mode: StreamMode) -> Self {
        Self { mode, open: None }
    }

    pub fn render(&mut self, event: &Event) -> Vec<Frame> {
        let seq = event.seq;
        if self.mode == StreamMode::Message {
            match &event.data {
                EventData::MessageStart {} => {
                    self.open = Some(OpenMessage::default());
                    return Vec::new();
                }
                EventData::TextDelta { .. } | EventData::ThinkingDelta { .. } => {
                    // A replay that starts inside a message gathers what is left of it.
                    self.open
                        .get_or_insert_with(OpenMessage::default)
                        .push(seq, &event.data);
                    return Vec::new();
                }
                EventData::ToolCall { .. } if self.open.is_some() => {
                    if let Some(open) = self.open.as_mut() {
                        open.push(seq, &event.data);
                    }
                    return Vec::new();
                }
                EventData::MessageStop {} => {
                    return self
                        .open
                        .take()
                        .map(OpenMessage::frames)
                        .unwrap_or_default();
                }
                _ => {}
            }
        }
        match &event.data {
            EventData::TurnStart {} => vec![frame(seq, "turn_start", json!({}))],
            EventData::TextDelta { delta } => {
                vec![frame(seq, "text_delta", Delta { delta })]
            }
            EventData::ThinkingDelta { delta } => {
                vec![frame(seq, "thinking_delta", Delta { delta })]
            }
            EventData::ToolCall {
                tool_call_id,
                name,
                input,
            } => vec![frame(
                seq,
                "tool_call",
                json!({"toolCallId": tool_call_id, "name": name, "input": input}),
            )],
            EventData::ToolResult {
                tool_call_id,
                content,
            } => vec![frame(
                seq,
                "tool_result",
                json!({"toolCallId": tool_call_id, "content": content}),
            )],
            EventData::TurnStop {
                stop_reason, error, ..
            } => {
                let mut data = json!({ "stopReason": stop_reason });
                if let Some(error) = error {
                    data["error"] = json!(error);
                }
                vec![frame(seq, "turn_stop", data)]
            }
            // A session's own event (only the session's stream has it, between turns): an
            // extension frame AAP clients that do not know it ignore.
            EventData::AgentVersionChange { agent, from, to } => vec![frame(
                seq,
                "agent_version_change",
                json!({"agent": agent, "from": from, "to": to}),
            )],
            EventData::MessageStart {}
            | EventData::MessageStop {}
            | EventData::Usage { .. }
            | EventData::Compaction { .. } => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SessionId, StopReason, TurnId, Usage};

    fn events() -> Vec<Event> {
        let tool = |id: &str| EventData::ToolCall {
            tool_call_id: id.into(),
            name: "clock".into(),
            input: serde_json::Map::new(),
        };
        let data = vec![
            EventData::TurnStart {},
            EventData::MessageStart {},
            EventData::ThinkingDelta { delta: "h".into() },
            EventData::ThinkingDelta { delta: "m".into() },
            EventData::TextDelta { delta: "a".into() },
            EventData::TextDelta { delta: "b".into() },
            tool("c1"),
            tool("c2"),
            EventData::MessageStop {},
            EventData::Usage {
                input_tokens: 1,
                output_tokens: 1,
            },
            EventData::TurnStop {
                stop_reason: StopReason::ToolUse,
                error: None,
                usage: Usage::default(),
            },
        ];
        let (session, turn) = (SessionId::generate(), TurnId::generate());
        data.into_iter()
            .enumerate()
            .map(|(i, data)| Event {
                session_id: session,
                seq: i as i64 + 1,
                turn_id: Some(turn),
                data,
                created_at: chrono::Utc::now(),
            })
            .collect()
    }

    fn render(mode: StreamMode, after: i64) -> Vec<(i64, &'static str)> {
        let mut renderer = AapRenderer::new(mode);
        events()
            .iter()
            .filter(|e| e.seq > after)
            .flat_map(|e| renderer.render(e))
            .map(|f| (f.id.unwrap(), f.event.unwrap()))
            .collect()
    }

    #[test]
    fn message_mode_blocks_are_named_by_their_last_event_and_resume_after_themselves() {
        let all = render(StreamMode::Message, 0);
        assert_eq!(
            all,
            vec![
                (1, "turn_start"),
                (4, "thinking"),
                (6, "text"),
                (7, "tool_call"),
                (8, "tool_call"),
                (11, "turn_stop"),
            ]
        );
        for (i, (id, _)) in all.iter().enumerate() {
            assert_eq!(render(StreamMode::Message, *id), all[i + 1..], "after {id}");
        }
        let deltas = render(StreamMode::Delta, 0);
        let ids: Vec<i64> = deltas.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![1, 3, 4, 5, 6, 7, 8, 11]);
    }
}
