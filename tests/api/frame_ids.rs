//! Every frame of every face has an SSE id of its own, strictly increasing, and resuming
//! after any of them gives exactly the frames after it: AAP in delta and message mode, ACP,
//! AgentScope and A2A, over one turn with thinking, text, a tool call and its result.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, reasoning, text, tool_fragment};
use crate::sse::coalesced;

/// `gpt` on the scripted server, with an internal tool it runs at once.
async fn app_with_gpt(server: &ScriptedOpenAi) -> TestApp {
    let config = format!(
        "[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\n\
         model = \"m\"\napi_key = \"k\"\ntimeout_seconds = 5\nmax_retries = 0\n\
         [[agents.tools]]\nname = \"clock\"\nexpose = false\n",
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

/// The model thinks, says something, calls the clock; then answers in two deltas.
fn script_turn(server: &ScriptedOpenAi) {
    server.push(Reply::Stream(vec![
        reasoning("Let me "),
        reasoning("think."),
        text("Checking "),
        text("the time."),
        tool_fragment(0, Some("call_clock"), Some("clock"), "{}"),
        finish("tool_calls"),
    ]));
    server.push(Reply::Stream(vec![
        text("It is "),
        text("now."),
        finish("stop"),
    ]));
}

/// One SSE frame as sent: its id and the whole block.
#[derive(Debug, Clone, PartialEq)]
struct Raw {
    id: Option<String>,
    block: String,
}

async fn raw_frames(response: reqwest::Response) -> Vec<Raw> {
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let mut frames = Vec::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if block.lines().all(|line| line.starts_with(':')) {
                continue;
            }
            let id = block
                .lines()
                .find_map(|line| line.strip_prefix("id: "))
                .map(str::to_owned);
            frames.push(Raw { id, block });
        }
        let next = tokio::time::timeout(Duration::from_secs(30), body.next())
            .await
            .expect("a frame within the timeout");
        match next {
            Some(chunk) => buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap())),
            None => return frames,
        }
    }
}

/// A frame id as `(seq, k)`, to check the order.
fn order(id: &str) -> (i64, u32) {
    let (seq, k) = id.split_once('.').unwrap_or((id, "0"));
    (seq.parse().unwrap(), k.parse().unwrap())
}

/// Every frame has an id, no two the same, each greater than the one before.
fn assert_ids_increase(frames: &[Raw]) {
    let ids: Vec<&str> = frames
        .iter()
        .map(|f| {
            f.id.as_deref()
                .unwrap_or_else(|| panic!("no id: {}", f.block))
        })
        .collect();
    for pair in ids.windows(2) {
        assert!(order(pair[0]) < order(pair[1]), "{ids:?}");
    }
}

/// For each frame, what resuming after its id gives must be exactly the frames after it.
async fn assert_resumes_after_each<F, Fut>(frames: &[Raw], resume: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Vec<Raw>>,
{
    assert_ids_increase(frames);
    for (i, frame) in frames.iter().enumerate() {
        let after = frame.id.clone().unwrap();
        let rest = resume(after.clone()).await;
        assert_eq!(rest, frames[i + 1..], "after {after}");
    }
}

#[tokio::test]
async fn aap_frames_in_delta_and_message_mode_each_resume_after_themselves() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}}))
        .await;
    script_turn(&server);
    let mut live = app
        .stream_turn(
            &token,
            &session,
            json!({"messages": [user("What time is it?")], "stream": "delta"}),
        )
        .await;
    let turn = live.headers["agentry-turn-id"].to_str().unwrap().to_owned();
    let delta = live.until_turn_stop().await;
    let names: Vec<&str> = delta.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(
        names,
        [
            "turn_start",
            "thinking_delta",
            "thinking_delta",
            "text_delta",
            "text_delta",
            "tool_call",
            "tool_result",
            "text_delta",
            "text_delta",
            "turn_stop"
        ]
    );
    let path = |mode: &str| format!("/sessions/{session}/turns/{turn}/events?stream={mode}");
    // Delta mode: a replay merges what is left of a run of deltas into one.
    for (i, frame) in delta.iter().enumerate() {
        let after = frame.id.unwrap();
        let rest = app
            .stream(&path("delta"), &token, Some(after))
            .await
            .collect()
            .await;
        assert_eq!(rest, coalesced(&delta[i + 1..]), "delta, after {after}");
    }
    // Message mode: the text and the tool call of one message have ids of their own.
    let message = app
        .stream(&path("message"), &token, None)
        .await
        .collect()
        .await;
    let names: Vec<&str> = message.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(
        names,
        [
            "turn_start",
            "thinking",
            "text",
            "tool_call",
            "tool_result",
            "text",
            "turn_stop"
        ]
    );
    assert_eq!(message[2].data["text"], "Checking the time.");
    let ids: Vec<i64> = message.iter().map(|f| f.id.unwrap()).collect();
    assert!(ids.windows(2).all(|p| p[0] < p[1]), "{ids:?}");
    for (i, frame) in message.iter().enumerate() {
        let after = frame.id.unwrap();
        let rest = app
            .stream(&path("message"), &token, Some(after))
            .await
            .collect()
            .await;
        assert_eq!(rest, message[i + 1..], "message, after {after}");
    }
    // The same turn live in message mode names its frames the same way.
    script_turn(&server);
    let live = app
        .stream_turn(
            &token,
            &session,
            json!({"messages": [user("And now?")], "stream": "message"}),
        )
        .await
        .collect()
        .await;
    let names: Vec<&str> = live.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(names, names_of(&message));
    let ids: Vec<i64> = live.iter().map(|f| f.id.unwrap()).collect();
    assert!(ids.windows(2).all(|p| p[0] < p[1]), "{ids:?}");
}

fn names_of(frames: &[crate::sse::Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.event.as_str()).collect()
}

#[tokio::test]
async fn acp_frames_each_resume_after_themselves() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    script_turn(&server);
    let response = app
        .client
        .post(app.url("/acp/runs"))
        .bearer_auth(&token)
        .json(&json!({"agent_name": "gpt", "mode": "stream", "input": [
            {"role": "user", "parts": [{"content_type": "text/plain", "content": "What time?"}]}
        ]}))
        .send()
        .await
        .unwrap();
    let run = response.headers()["run-id"].to_str().unwrap().to_owned();
    let frames = raw_frames(response).await;
    assert!(frames.len() > 8, "{frames:?}");
    assert_resumes_after_each(&frames, |after| {
        let request = app
            .client
            .get(app.url(&format!("/acp/runs/{run}/events")))
            .bearer_auth(&token)
            .header("Accept", "text/event-stream")
            .header("Last-Event-ID", after);
        async move { raw_frames(request.send().await.unwrap()).await }
    })
    .await;
}

#[tokio::test]
async fn agentscope_frames_each_resume_after_themselves() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    script_turn(&server);
    let frames = raw_frames(
        app.client
            .post(app.url("/agentscope/process"))
            .bearer_auth(&token)
            .json(&json!({"id": "r1", "model": "gpt", "input": [
                {"role": "user", "content": [{"type": "text", "text": "What time?"}]}
            ]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(frames.len() > 8, "{frames:?}");
    assert_resumes_after_each(&frames, |after| {
        let request = app
            .client
            .get(app.url("/agentscope/responses/r1/events"))
            .bearer_auth(&token)
            .header("Last-Event-ID", after);
        async move { raw_frames(request.send().await.unwrap()).await }
    })
    .await;
}

#[tokio::test]
async fn a2a_frames_each_resume_after_themselves_the_task_frame_too() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    for (version, path, body) in [
        (
            "1.0",
            "/a2a/gpt/message:stream",
            json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "What time?"}]}}),
        ),
        (
            "1.0",
            "/a2a/gpt",
            json!({"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params":
                {"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "What time?"}]}}}),
        ),
    ] {
        script_turn(&server);
        let frames = raw_frames(
            app.client
                .post(app.url(path))
                .bearer_auth(&token)
                .header("A2A-Version", version)
                .json(&body)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert!(frames[0].block.contains("\"task\""), "{frames:?}");
        assert!(frames.len() > 6, "{frames:?}");
        let data = |raw: &Raw| -> Value {
            let line = raw.block.lines().find(|l| l.starts_with("data: ")).unwrap();
            serde_json::from_str(&line["data: ".len()..]).unwrap()
        };
        let first = data(&frames[0]);
        let task = first
            .pointer("/result/task/id")
            .or_else(|| first.pointer("/task/id"))
            .and_then(Value::as_str)
            .unwrap()
            .to_owned();
        let rpc = path == "/a2a/gpt";
        assert_resumes_after_each(&frames, |after| {
            let request = if rpc {
                app.client.post(app.url("/a2a/gpt")).json(
                    &json!({"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask",
                        "params": {"id": task}}),
                )
            } else {
                app.client.request(
                    Method::GET,
                    app.url(&format!("/a2a/gpt/tasks/{task}:subscribe")),
                )
            };
            let request = request
                .bearer_auth(&token)
                .header("A2A-Version", version)
                .header("Last-Event-ID", after);
            async move { raw_frames(request.send().await.unwrap()).await }
        })
        .await;
    }
}
