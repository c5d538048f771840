//! The built-in `echo` provider: answers with the user's last message, streamed in chunks,
//! without any network. The quickstart's agent, the tests' slow agent, the benchmark's model.

use std::borrow::Borrow;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use super::{ModelEvent, ModelRequest, Provider, ProviderError};
use crate::config::EchoSettings;
use crate::model::{Content, ContentBlock, HistoryMessage, StopReason, media_type};

pub struct EchoProvider {
    chunk_size: usize,
    delay: Duration,
    thinking: bool,
}

impl EchoProvider {
    pub fn new(settings: &EchoSettings) -> Self {
        Self {
            chunk_size: settings.chunk_size.max(1),
            delay: Duration::from_millis(settings.delay_ms),
            thinking: settings.thinking,
        }
    }
}

/// The text the echo answers with: the last user message, images described.
pub fn echo_reply<M: Borrow<HistoryMessage>>(messages: &[M], style: Option<&str>) -> String {
    let last_user = messages.iter().rev().find_map(|m| match m.borrow() {
        HistoryMessage::User { content } => Some(content),
        _ => None,
    });
    let text = match last_user {
        None => String::new(),
        Some(Content::Text(text)) => text.clone(),
        Some(Content::Blocks(blocks)) => blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text.clone()),
                ContentBlock::Image { url } => Some(describe_image(url)),
                ContentBlock::Part(part) => Some(part.describe()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" "),
    };
    match style {
        Some("upper") => text.to_uppercase(),
        _ => text,
    }
}

fn describe_image(url: &str) -> String {
    match url.strip_prefix("data:") {
        Some(rest) => {
            let media = media_type(rest);
            let payload = rest.split_once(',').map_or(0, |(_, data)| data.len());
            format!("[image: {media}, {} bytes]", payload * 3 / 4)
        }
        None => format!("[image: {url}]"),
    }
}

/// Splits `text` into pieces of `size` characters (never inside a character).
fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

impl Provider for EchoProvider {
    fn reads_only_last_exchange(&self) -> bool {
        true
    }

    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxStream<'static, Result<ModelEvent, ProviderError>> {
        let reply = echo_reply(
            &request.messages,
            request.options.get("style").map(String::as_str),
        );
        let input_tokens = request.estimated_tokens();
        let mut events = Vec::new();
        if self.thinking {
            let thought = format!(
                "The user wrote {} characters; I repeat them.",
                reply.chars().count()
            );
            events.extend(
                chunks(&thought, self.chunk_size)
                    .into_iter()
                    .map(ModelEvent::ThinkingDelta),
            );
        }
        events.extend(
            chunks(&reply, self.chunk_size)
                .into_iter()
                .map(ModelEvent::TextDelta),
        );
        events.push(ModelEvent::Usage {
            input_tokens,
            output_tokens: reply.chars().count().div_ceil(4) as u64,
        });
        events.push(ModelEvent::Stop(StopReason::EndTurn));
        let delay = self.delay;
        futures_util::stream::iter(events)
            .then(move |event| async move {
                if !delay.is_zero()
                    && matches!(
                        event,
                        ModelEvent::TextDelta(_) | ModelEvent::ThinkingDelta(_)
                    )
                {
                    tokio::time::sleep(delay).await;
                }
                Ok(event)
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_echo_repeats_the_last_user_message_and_describes_images() {
        let messages = vec![
            HistoryMessage::User {
                content: Content::Text("first".into()),
            },
            HistoryMessage::Assistant {
                content: Content::Text("first".into()),
            },
            HistoryMessage::User {
                content: Content::Blocks(vec![
                    ContentBlock::Text {
                        text: "look".into(),
                    },
                    ContentBlock::Image {
                        url: "https://example.com/a.png".into(),
                    },
                ]),
            },
        ];
        assert_eq!(
            echo_reply(&messages, None),
            "look [image: https://example.com/a.png]"
        );
        assert_eq!(
            echo_reply(&messages, Some("upper")),
            "LOOK [IMAGE: HTTPS://EXAMPLE.COM/A.PNG]"
        );
    }

    #[test]
    fn chunks_split_on_characters() {
        assert_eq!(chunks("héllo wörld", 4), ["héll", "o wö", "rld"]);
        assert!(chunks("", 4).is_empty());
    }
}
