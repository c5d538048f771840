//! A scripted OpenAI-compatible server: streams chunked SSE as the real API does, and
//! records every request it gets.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::web::Bytes;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde_json::{Value, json};

/// What the server answers to the next request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// SSE `data:` chunks, each its own write, then `data: [DONE]`.
    Stream(Vec<Value>),
    /// Some chunks, then the connection breaks off.
    Break(Vec<Value>),
    /// An HTTP error with a JSON body.
    Status(u16, Value),
    /// Never answers.
    Hang,
    /// Named SSE events (`event:` and `data:`), as the Anthropic API sends them.
    Events(Vec<(&'static str, Value)>),
    /// Waits until the gate is opened (`notify_one`, before or after the request came),
    /// then answers as the inner reply.
    Gated(Arc<tokio::sync::Notify>, Box<Reply>),
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub authorization: Option<String>,
    pub api_key: Option<String>,
    pub anthropic_version: Option<String>,
    pub traceparent: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    arrived: tokio::sync::Notify,
}

pub struct ScriptedOpenAi {
    /// The base URL to configure (`…/v1`).
    pub url: String,
    script: Arc<Script>,
}

pub fn text(delta: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
           "choices": [{"index": 0, "delta": {"content": delta}, "finish_reason": null}]})
}

pub fn reasoning(delta: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
           "choices": [{"index": 0, "delta": {"reasoning_content": delta}, "finish_reason": null}]})
}

pub fn finish(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
           "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

pub fn usage(prompt: u64, completion: u64) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": [],
           "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                     "total_tokens": prompt + completion}})
}

async fn chat(req: HttpRequest, body: Bytes, script: web::Data<Script>) -> HttpResponse {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    script.requests.lock().unwrap().push(Recorded {
        authorization: header("authorization"),
        api_key: header("x-api-key"),
        anthropic_version: header("anthropic-version"),
        traceparent: header("traceparent"),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    script.arrived.notify_waiters();
    let next = script.replies.lock().unwrap().pop_front();
    let reply = match next {
        Some(Reply::Gated(gate, inner)) => {
            gate.notified().await;
            Some(*inner)
        }
        other => other,
    };
    match reply {
        None => HttpResponse::InternalServerError()
            .json(json!({"error": {"message": "no scripted reply"}})),
        Some(Reply::Status(status, body)) => {
            HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap()).json(body)
        }
        Some(Reply::Hang) => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            HttpResponse::Ok().finish()
        }
        Some(Reply::Stream(chunks)) => sse(chunks, true),
        Some(Reply::Events(events)) => {
            let frames: Vec<Bytes> = events
                .into_iter()
                .map(|(name, data)| Bytes::from(format!("event: {name}\ndata: {data}\n\n")))
                .collect();
            HttpResponse::Ok()
                .content_type("text/event-stream")
                .streaming(futures_util::stream::iter(
                    frames.into_iter().map(Ok::<_, std::io::Error>),
                ))
        }
        Some(Reply::Break(chunks)) => sse(chunks, false),
        Some(Reply::Gated(..)) => panic!("a gate opens onto a reply, not onto another gate"),
    }
}

fn sse(chunks: Vec<Value>, complete: bool) -> HttpResponse {
    let body = async_stream::stream! {
        for chunk in chunks {
            yield Ok::<_, std::io::Error>(Bytes::from(format!("data: {chunk}\n\n")));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if complete {
            yield Ok(Bytes::from_static(b"data: [DONE]\n\n"));
        } else {
            yield Err(std::io::Error::other("the connection breaks off"));
        }
    };
    HttpResponse::Ok()
        .content_type("text/event-stream")
        .streaming(body)
}

impl ScriptedOpenAi {
    pub async fn start() -> ScriptedOpenAi {
        let script = Arc::new(Script::default());
        let data = web::Data::from(script.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/v1/chat/completions", web::post().to(chat))
                .route("/v1/messages", web::post().to(chat))
        })
        .workers(1)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
        tokio::spawn(server);
        ScriptedOpenAi {
            url: format!("http://127.0.0.1:{port}/v1"),
            script,
        }
    }

    pub fn push(&self, reply: Reply) {
        self.script.replies.lock().unwrap().push_back(reply);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.script.requests.lock().unwrap().clone()
    }

    /// Waits until `count` requests have arrived.
    pub async fn wait_for_requests(&self, count: usize) {
        let wait = async {
            loop {
                let arrived = self.script.arrived.notified();
                if self.script.requests.lock().unwrap().len() >= count {
                    return;
                }
                arrived.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .expect("the requests arrive");
    }
}

/// A fragment of a streamed tool call.
pub fn tool_fragment(index: u64, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
           "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]})
}
