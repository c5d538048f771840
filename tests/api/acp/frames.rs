//! Reading ACP's SSE frames: their ids are frame ids (`3`, `3.1`), kept as sent, and each
//! frame's data as the raw text too, to check key order.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

/// One received frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: Option<String>,
    pub data: Value,
    /// `data` as sent.
    pub text: String,
}

impl Frame {
    /// The seq of the event the frame renders.
    pub fn seq(&self) -> i64 {
        let id = self.id.as_deref().expect("an id");
        id.split('.').next().unwrap().parse().expect("a seq")
    }
}

/// An SSE response read frame by frame; comments (keep-alives) are skipped.
pub struct SseReader {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

const FRAME_TIMEOUT: Duration = Duration::from_secs(30);

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        Self {
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
}

fn parse(block: &str) -> Option<Frame> {
    let mut id = None;
    let mut data = Vec::new();
    for line in block.lines() {
        if let Some(value) = line.strip_prefix("id: ") {
            id = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("data: ") {
            data.push(value);
        }
    }
    if data.is_empty() {
        return None;
    }
    let text = data.join("\n");
    Some(Frame {
        id,
        data: serde_json::from_str(&text).expect("JSON data"),
        text,
    })
}
