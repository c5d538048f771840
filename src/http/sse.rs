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

/// How long a response waits for its first frames before its head goes out alone. The
/// server writes the head as soon as the body has nothing to give: frames that come within
/// this wait (a turn's `turn_start` follows its admission by a commit) go out with the head,
/// in one write and one packet instead of two.
const FIRST_FRAMES_WAIT: Duration = Duration::from_millis(20);

/// A `text/event-stream` response of `frames`, with a comment after each
/// `engine.sse_keep_alive_seconds` of silence, naming the turn (`Agentry-Turn-Id`) when
/// given. The head waits for the first frames, at most [`FIRST_FRAMES_WAIT`]. The stream
/// ends when `frames` does; a client that leaves drops it.
pub async fn response<F: Encode + 'static>(
    state: &AppState,
    frames: impl Stream<Item = F> + 'static,
    turn_id: Option<TurnId>,
) -> HttpResponse {
    response_as(state, "text/event-stream", frames, turn_id).await
}

/// `response` with the content type given (`text/event-stream` with parameters).
pub async fn response_as<F: Encode + 'static>(
    state: &AppState,
    content_type: &'static str,
    frames: impl Stream<Item = F> + 'static,
    turn_id: Option<TurnId>,
) -> HttpResponse {
    let keep_alive = Duration::from_secs(state.settings().engine.sse_keep_alive_seconds);
    let body = body(frames, keep_alive).await;
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

/// The body of a response of `frames`, once its first frames came or the wait for them
/// ended: what is ready at each step goes out as one write (a replay is thousands of
/// frames), a comment after each `keep_alive` of silence.
async fn body<F: Encode + 'static>(
    frames: impl Stream<Item = F> + 'static,
    keep_alive: Duration,
) -> impl Stream<Item = Result<Bytes, Infallible>> + 'static {
    let mut frames = Box::pin(frames.ready_chunks(256));
    // `None`: none came within the wait; `Some(None)`: the stream ended in it.
    let first = tokio::time::timeout(FIRST_FRAMES_WAIT, frames.next())
        .await
        .ok();
    async_stream::stream! {
        match first {
            Some(Some(ready)) => yield Ok(chunk(&ready)),
            Some(None) => return,
            None => {}
        }
        let mut idle = tokio::time::interval_at(tokio::time::Instant::now() + keep_alive, keep_alive);
        loop {
            tokio::select! {
                ready = frames.next() => match ready {
                    Some(ready) => {
                        idle.reset();
                        yield Ok(chunk(&ready));
                    }
                    None => break,
                },
                _ = idle.tick() => yield Ok(Bytes::from_static(b": keep-alive\n\n")),
            }
        }
    }
}

/// Frames as one write.
fn chunk(frames: &[impl Encode]) -> Bytes {
    Bytes::from(frames.iter().map(Encode::encode).collect::<String>())
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

    fn frame(data: &str) -> Frame {
        Frame {
            id: None,
            event: Some("turn_start"),
            data: data.into(),
        }
    }

    /// The frames that come within the wait are the body's first write, ready when the
    /// response is: the server writes them with the head.
    #[tokio::test]
    async fn the_first_frames_go_out_with_the_head() {
        use futures_util::FutureExt;
        let frames = futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_millis(2)).await;
            frame("{}")
        })
        .chain(futures_util::stream::pending());
        let mut body = std::pin::pin!(body(frames, Duration::from_secs(15)).await);
        match body.next().now_or_never() {
            Some(Some(Ok(bytes))) => assert_eq!(bytes, "event: turn_start\ndata: {}\n\n"),
            other => panic!("the first frame is not ready with the head: {other:?}"),
        }
        assert!(body.next().now_or_never().is_none(), "nothing more yet");
    }

    /// Without frames within the wait, the head goes out alone, after the wait and not
    /// later; frames that come later follow it.
    #[tokio::test]
    async fn the_head_waits_for_frames_only_so_long() {
        use futures_util::FutureExt;
        let (send, mut receive) = tokio::sync::mpsc::unbounded_channel();
        let frames = futures_util::stream::poll_fn(move |cx| receive.poll_recv(cx));
        let started = std::time::Instant::now();
        let body = body(frames, Duration::from_secs(15)).await;
        let waited = started.elapsed();
        assert!(waited >= FIRST_FRAMES_WAIT, "waited {waited:?}");
        assert!(waited < Duration::from_secs(5), "waited {waited:?}");
        let mut body = std::pin::pin!(body);
        assert!(body.next().now_or_never().is_none(), "no frame yet");
        send.send(frame("{\"late\":true}")).unwrap();
        drop(send);
        let late = body.next().await.expect("the late frame").unwrap();
        assert_eq!(late, "event: turn_start\ndata: {\"late\":true}\n\n");
        assert!(
            body.next().await.is_none(),
            "the stream ends with its frames"
        );
    }

    /// A stream that ends within the wait is an empty body, ended.
    #[tokio::test]
    async fn a_stream_ended_in_the_wait_is_an_empty_body() {
        let frames = futures_util::stream::empty::<Frame>();
        let mut body = std::pin::pin!(body(frames, Duration::from_secs(15)).await);
        assert!(body.next().await.is_none());
    }

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
