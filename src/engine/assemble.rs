//! Turning a turn's events back into the messages they make up: the same code builds the
//! history the runner stores and the messages a face renders, so the two always agree.

use serde_json::{Map, Value};

use crate::model::{Content, ContentBlock, EventData, HistoryMessage};

/// Collects one assistant message's blocks from its events, merging consecutive deltas.
#[derive(Debug, Default, Clone)]
pub struct MessageAssembler {
    blocks: Vec<ContentBlock>,
}

impl MessageAssembler {
    pub fn push_text(&mut self, delta: &str) {
        match self.blocks.last_mut() {
            Some(ContentBlock::Text { text }) => text.push_str(delta),
            _ => self.blocks.push(ContentBlock::Text {
                text: delta.to_owned(),
            }),
        }
    }

    pub fn push_thinking(&mut self, delta: &str) {
        match self.blocks.last_mut() {
            Some(ContentBlock::Thinking { thinking }) => thinking.push_str(delta),
            _ => self.blocks.push(ContentBlock::Thinking {
                thinking: delta.to_owned(),
            }),
        }
    }

    pub fn push_tool_use(&mut self, id: &str, name: &str, input: &Map<String, Value>) {
        self.blocks.push(ContentBlock::ToolUse {
            tool_call_id: id.to_owned(),
            name: name.to_owned(),
            input: input.clone(),
        });
    }

    /// Feeds an event that belongs inside a message; other events are ignored.
    pub fn push_event(&mut self, event: &EventData) {
        match event {
            EventData::TextDelta { delta } => self.push_text(delta),
            EventData::ThinkingDelta { delta } => self.push_thinking(delta),
            EventData::ToolCall {
                tool_call_id,
                name,
                input,
            } => self.push_tool_use(tool_call_id, name, input),
            _ => {}
        }
    }

    pub fn blocks(&self) -> &[ContentBlock] {
        &self.blocks
    }

    pub fn finish_blocks(self) -> Vec<ContentBlock> {
        self.blocks
    }

    pub fn finish(self) -> HistoryMessage {
        HistoryMessage::Assistant {
            content: Content::Blocks(self.blocks),
        }
    }
}

/// The messages a turn's events produced, in order: assistant messages (completed ones, and
/// a trailing one cut short) and tool results.
pub fn turn_messages<'a>(events: impl IntoIterator<Item = &'a EventData>) -> Vec<HistoryMessage> {
    let mut messages = Vec::new();
    let mut open: Option<MessageAssembler> = None;
    for event in events {
        match event {
            EventData::MessageStart {} => open = Some(MessageAssembler::default()),
            EventData::MessageStop {} => {
                if let Some(message) = open.take() {
                    messages.push(message.finish());
                }
            }
            EventData::ToolResult {
                tool_call_id,
                content,
            } => messages.push(HistoryMessage::Tool {
                tool_call_id: tool_call_id.clone(),
                content: content.clone(),
            }),
            other => {
                if let Some(message) = open.as_mut() {
                    message.push_event(other);
                }
            }
        }
    }
    if let Some(message) = open.filter(|m| !m.blocks().is_empty()) {
        messages.push(message.finish());
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_merge_into_blocks_in_order() {
        let events = [
            EventData::TurnStart {},
            EventData::MessageStart {},
            EventData::ThinkingDelta { delta: "hm".into() },
            EventData::ThinkingDelta { delta: "m".into() },
            EventData::TextDelta {
                delta: "hel".into(),
            },
            EventData::TextDelta { delta: "lo".into() },
            EventData::MessageStop {},
            EventData::MessageStart {},
            EventData::TextDelta {
                delta: "cut".into(),
            },
        ];
        let messages = turn_messages(&events);
        assert_eq!(
            messages,
            vec![
                HistoryMessage::Assistant {
                    content: Content::Blocks(vec![
                        ContentBlock::Thinking {
                            thinking: "hmm".into()
                        },
                        ContentBlock::Text {
                            text: "hello".into()
                        },
                    ])
                },
                HistoryMessage::Assistant {
                    content: Content::Blocks(vec![ContentBlock::Text { text: "cut".into() }])
                },
            ]
        );
    }
}
