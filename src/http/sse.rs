//! Server-sent events: frames with `id:` and `event:`, keep-alive comments while idle, and
//! headers that keep proxies from buffering.

use std::convert::Infallible;
use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::web::Bytes;
use futures_util::{Stream, StreamExt};

use crate::model::TurnId;

/// One SSE frame. `data` is compact JSON (one line).
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: Option<i64>,
    pub event: Option<&'static str>,
    pub data: String,
}

/// What an SSE response writes: one encoded frame.
pub trait Encode {
    fn encode(&self) -> String;
}

impl Encode for Frame {
    fn encode(&self) -> String {
        Frame::encode(self)
    }
}

impl Frame {
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.data.len() + 48);
        if let Some(id) = self.id {
            out.push_str(&format!("id: {id}\n"));
        }
        if let Some(event) = self.event {
            out.push_str(&format!("event: {event}\n"));
        }
        for line in self.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
        out
    }
}

/// The content type of faces whose reference servers name the charset.
pub const UTF8_EVENT_STREAM: &str = "text/event-stream; charset=utf-8";

/// A `text/event-stream` response of `frames`, with a comment every `keep_alive` of silence.
/// The stream ends when `frames` does; a client that leaves drops it.
pub fn response<F: Encode + 'static>(
    frames: impl Stream<Item = F> + 'static,
    keep_alive: Duration,
    turn_id: Option<TurnId>,
) -> HttpResponse {
    response_as("text/event-stream", frames, keep_alive, turn_id)
}

/// `response` with the content type given (`text/event-stream` with parameters).
pub fn response_as<F: Encode + 'static>(
    content_type: &'static str,
    frames: impl Stream<Item = F> + 'static,
    keep_alive: Duration,
    turn_id: Option<TurnId>,
) -> HttpResponse {
    let body = async_stream::stream! {
        // Frames already available go out in one write (a replay is thousands of them).
        let mut frames = std::pin::pin!(frames.ready_chunks(256));
        let mut idle = tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
        loop {
            tokio::select! {
                ready = frames.next() => match ready {
                    Some(ready) => {
                        idle.reset();
                        let chunk: String = ready.iter().map(Encode::encode).collect();
                        yield Ok::<_, Infallible>(Bytes::from(chunk));
                    }
                    None => break,
                },
                _ = idle.tick() => yield Ok(Bytes::from_static(b": keep-alive\n\n")),
            }
        }
    };
    let mut response = HttpResponse::Ok();
    response
        .content_type(content_type)
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"));
    if let Some(turn_id) = turn_id {
        response.insert_header((super::TURN_ID_HEADER, turn_id.to_string()));
    }
    response.streaming(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_encode_as_sse() {
        let frame = Frame {
            id: Some(7),
            event: Some("text_delta"),
            data: r#"{"delta":"hi"}"#.into(),
        };
        assert_eq!(
            frame.encode(),
            "id: 7\nevent: text_delta\ndata: {\"delta\":\"hi\"}\n\n"
        );
        let bare = Frame {
            id: None,
            event: None,
            data: "a\nb".into(),
        };
        assert_eq!(bare.encode(), "data: a\ndata: b\n\n");
    }
}
