//! The event log as AAP SSE events: delta mode as it happens, message mode aggregated per
//! message. Live and replayed streams render the same way.

use serde::Serialize;
use serde_json::json;

use crate::engine::MessageAssembler;
use crate::http::sse::Frame;
use crate::model::{ContentBlock, Event, EventData, StreamMode};

pub struct AapRenderer {
    mode: StreamMode,
    open: Option<MessageAssembler>,
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
                    self.open = Some(MessageAssembler::default());
                    return Vec::new();
                }
                EventData::TextDelta { .. } | EventData::ThinkingDelta { .. } => {
                    // A replay that starts inside a message gathers what is left of it.
                    self.open
                        .get_or_insert_with(MessageAssembler::default)
                        .push_event(&event.data);
                    return Vec::new();
                }
                EventData::ToolCall { .. } if self.open.is_some() => {
                    if let Some(open) = self.open.as_mut() {
                        open.push_event(&event.data);
                    }
                    return Vec::new();
                }
                EventData::MessageStop {} => {
                    let blocks = self
                        .open
                        .take()
                        .map(|m| m.finish_blocks())
                        .unwrap_or_default();
                    return blocks
                        .iter()
                        .filter_map(|block| block_frame(seq, block))
                        .collect();
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
            EventData::MessageStart {}
            | EventData::MessageStop {}
            | EventData::Usage { .. }
            | EventData::Compaction { .. } => Vec::new(),
        }
    }
}
