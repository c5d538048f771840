//! Server-sent events, for every face: frames with `id:` and `event:`, keep-alive comments
//! while idle (every `engine.sse_keep_alive_seconds`), headers that keep proxies from
//! buffering, and the end of a stream whose events could not be read (logged once).

use std::convert::Infallible;
use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::web::Bytes;
use futures_util::{Stream, StreamExt};

use crate::app::AppState;
use crate::engine::StoreError;
use crate::model::{Event, TurnId};

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
        encode(self.id.as_ref(), self.event, &self.data)
    }
}

/// A frame whose `id:` is of a face's own kind (A2A's and ACP's frame ids), without `event:`.
#[derive(Debug, Clone, PartialEq)]
pub struct IdFrame<I> {
    pub id: Option<I>,
    pub data: String,
}

impl<I: Display> Encode for IdFrame<I> {
    fn encode(&self) -> String {
        encode(self.id.as_ref(), None, &self.data)
    }
}

/// `id:`, `event:` and one `data:` line per line of `data`, then the blank line.
fn encode(id: Option<&impl Display>, event: Option<&str>, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 48);
    if let Some(id) = id {
        out.push_str(&format!("id: {id}\n"));
    }
    if let Some(event) = event {
        out.push_str(&format!("event: {event}\n"));
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// The events a face renders, until one cannot be read: that error is logged (with what
/// the stream was) and the stream ends, as a client sees a server that stops sending.
pub fn until_failure(
    events: impl Stream<Item = Result<Arc<Event>, StoreError>>,
    what: &'static str,
) -> impl Stream<Item = Arc<Event>> {
    events
        .take_while(move |event| {
            if let Err(error) = event {
                tracing::error!(error = %error, stream = what, "an event stream failed");
            }
            std::future::ready(event.is_ok())
        })
        .filter_map(|event| std::future::ready(event.ok()))
}

/// The content type of faces whose reference servers name the charset.
pub const UTF8_EVENT_STREAM: &str = "text/event-stream; charset=utf-8";

/// A `text/event-stream` response of `frames`, with a comment after each
/// `engine.sse_keep_alive_seconds` of silence, naming the turn (`Agentry-Turn-Id`) when
/// given. The stream ends when `frames` does; a client that leaves drops it.
pub fn response<F: Encode + 'static>(
    state: &AppState,
    frames: impl Stream<Item = F> + 'static,
    turn_id: Option<TurnId>,
) -> HttpResponse {
    response_as(state, "text/event-stream", frames, turn_id)
}

/// `response` with the content type given (`text/event-stream` with parameters).
pub fn response_as<F: Encode + 'static>(
    state: &AppState,
    content_type: &'static str,
    frames: impl Stream<Item = F> + 'static,
    turn_id: Option<TurnId>,
) -> HttpResponse {
    let keep_alive = Duration::from_secs(state.settings().engine.sse_keep_alive_seconds);
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

/// A stream of one frame, written at once: a refusal a face answers in its stream's shape.
pub fn one_frame(content_type: &'static str, frame: &impl Encode) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header(("Cache-Control", "no-cache"))
        .body(frame.encode())
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
        let own = IdFrame {
            id: Some("3.1"),
            data: "{}".into(),
        };
        assert_eq!(own.encode(), "id: 3.1\ndata: {}\n\n");
    }
}
