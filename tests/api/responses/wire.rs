//! Helpers: POSTing responses and reading their SSE streams (`event:` + one JSON line,
//! ended by `data: [DONE]`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::{Reply, TestApp, TestDb, spawn_app_on};
use crate::scripted::ScriptedOpenAi;

/// One received event: its `event:` name and its data; `[DONE]` is `("[DONE]", Null)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event: String,
    pub data: Value,
}

pub const DONE: &str = "[DONE]";

/// An SSE body read event by event.
pub struct Events {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Events {
    pub fn new(response: reqwest::Response) -> Self {
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        event = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        assert!(data.is_none(), "one data line per event: {block}");
                        data = Some(v.to_owned());
                    } else if !line.is_empty() && !line.starts_with(':') {
                        panic!("unexpected SSE line {line:?} in {block:?}");
                    }
                }
                let Some(data) = data else { continue };
                if data == DONE {
                    assert!(event.is_none(), "[DONE] has no event name");
                    return Some(Event {
                        event: DONE.into(),
                        data: Value::Null,
                    });
                }
                let data: Value = serde_json::from_str(&data).expect("JSON data");
                let event = event.expect("every event is named");
                assert_eq!(data["type"], event.as_str(), "event: equals the JSON type");
                return Some(Event { event, data });
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.body.next())
                .await
                .expect("an event within the timeout")?;
            self.buffer
                .push_str(&String::from_utf8_lossy(&chunk.expect("the stream reads")));
        }
    }

    pub async fn collect(mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}

pub fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

/// POSTs `/v1/responses` with `stream: true` and returns its events.
pub async fn open_stream(app: &TestApp, token: &str, mut body: Value) -> Events {
    body["stream"] = Value::Bool(true);
    let response = app
        .client
        .post(app.url("/v1/responses"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    Events::new(response)
}

/// GETs a response's stream, after `starting_after` if given.
pub async fn resume(app: &TestApp, token: &str, id: &str, after: Option<u64>) -> Events {
    let query = match after {
        Some(n) => format!("?stream=true&starting_after={n}"),
        None => "?stream=true".into(),
    };
    let response = app
        .client
        .get(app.url(&format!("/v1/responses/{id}{query}")))
        .bearer_auth(token)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), StatusCode::OK);
    Events::new(response)
}

pub async fn create(app: &TestApp, token: &str, body: Value) -> Reply {
    app.post("/v1/responses", token, body).await
}

/// An app whose `gpt` agent talks to the scripted model.
pub async fn app_with_model(server: &ScriptedOpenAi) -> TestApp {
    let config = format!(
        r#"
[[agents]]
name = "gpt"
provider = "openai"
base_url = "{}"
model = "m"
timeout_seconds = 2
max_retries = 0
"#,
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

/// The keys every Response object has (Open Responses requires all but `conversation`).
pub const RESPONSE_KEYS: &[&str] = &[
    "id",
    "object",
    "created_at",
    "completed_at",
    "status",
    "background",
    "error",
    "incomplete_details",
    "instructions",
    "model",
    "output",
    "previous_response_id",
    "conversation",
    "usage",
    "metadata",
    "store",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "truncation",
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "top_logprobs",
    "reasoning",
    "max_output_tokens",
    "max_tool_calls",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
    "user",
];

pub fn assert_response_keys(response: &Value) {
    let object = response.as_object().expect("a Response object");
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = RESPONSE_KEYS.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected, "{response}");
}
