//! Reading server-sent events in tests.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

/// One received frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: Option<i64>,
    pub event: String,
    pub data: Value,
}

/// The event names of frames, in order.
pub fn names(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.event.as_str()).collect()
}

/// An SSE response read frame by frame; comments (keep-alives) are skipped.
pub struct SseReader {
    pub headers: reqwest::header::HeaderMap,
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

/// No test waits longer than this for one frame.
const FRAME_TIMEOUT: Duration = Duration::from_secs(30);

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            headers: response.headers().clone(),
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next frame, or `None` when the server ended the stream.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(frame) = parse(&block) {
                    return Some(frame);
                }
                continue;
            }
            let chunk = tokio::time::timeout(FRAME_TIMEOUT, self.body.next())
                .await
                .expect("an SSE frame within the timeout")?;
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk.expect("the stream reads")));
        }
    }

    /// Every frame until the server ends the stream.
    pub async fn collect(mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            frames.push(frame);
        }
        frames
    }

    /// Frames up to and including the first `turn_stop`.
    pub async fn until_turn_stop(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.next().await {
            let stop = frame.event == "turn_stop";
            frames.push(frame);
            if stop {
                return frames;
            }
        }
        panic!("the stream ended before turn_stop: {frames:?}");
    }
}

fn parse(block: &str) -> Option<Frame> {
    let mut id = None;
    let mut event = None;
    let mut data = Vec::new();
    for line in block.lines() {
        if let Some(value) = line.strip_prefix("id: ") {
            id = Some(value.parse().expect("numeric id"));
        } else if let Some(value) = line.strip_prefix("event: ") {
            event = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("data: ") {
            data.push(value.to_owned());
        }
    }
    if data.is_empty() {
        return None;
    }
    Some(Frame {
        id,
        event: event.unwrap_or_else(|| "message".to_owned()),
        data: serde_json::from_str(&data.join("\n")).expect("JSON data"),
    })
}

/// Frames as a replay of a finished turn gives them: each run of consecutive deltas of one
/// kind is one delta holding their text, with the last one's id.
pub fn coalesced(frames: &[Frame]) -> Vec<Frame> {
    let mut out: Vec<Frame> = Vec::new();
    for frame in frames {
        let is_delta = matches!(frame.event.as_str(), "text_delta" | "thinking_delta");
        match out.last_mut() {
            Some(last) if is_delta && last.event == frame.event => {
                let text = format!(
                    "{}{}",
                    last.data["delta"].as_str().unwrap_or_default(),
                    frame.data["delta"].as_str().unwrap_or_default()
                );
                *last = frame.clone();
                last.data["delta"] = Value::String(text);
            }
            _ => out.push(frame.clone()),
        }
    }
    out
}
