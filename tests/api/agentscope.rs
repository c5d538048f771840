//! The AgentScope Runtime Agent API face: the reference's event sequence, JSON answers,
//! resumable streams, busy sessions, failures, history shared with AAP, content types,
//! schemas and isolation.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, reasoning, text, tool_fragment, usage};
use crate::sse::{Frame, SseReader};

/// POSTs an AgentRequest and reads the whole stream.
async fn process(app: &TestApp, token: &str, path: &str, body: Value) -> Vec<Frame> {
    open(app, token, path, body).await.collect().await
}

async fn open(app: &TestApp, token: &str, path: &str, body: Value) -> SseReader {
    let response = app
        .client
        .post(app.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    SseReader::new(response)
}

fn user_text(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}]})
}

/// `object/status/type/role` of each frame, for comparing sequences.
fn shape(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .map(|f| {
            let d = &f.data;
            let kind = d["type"].as_str().unwrap_or("-");
            let role = d["role"].as_str().unwrap_or("-");
            format!(
                "{}:{}:{kind}:{role}",
                d["object"].as_str().unwrap(),
                d["status"].as_str().unwrap_or("null")
            )
        })
        .collect()
}

/// Sequence numbers run 0..n-1 and every frame's SSE id is its sequence number.
fn assert_numbered(frames: &[Frame]) {
    for (i, frame) in frames.iter().enumerate() {
        assert_eq!(frame.data["sequence_number"], json!(i), "{frame:?}");
        assert_eq!(frame.id, Some(i as i64));
    }
}

#[tokio::test]
async fn an_echo_turn_streams_the_reference_sequence_field_for_field() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let response = app
        .client
        .post(app.url("/agentscope/agents/echo/process"))
        .bearer_auth(&token)
        .json(&json!({"input": [user_text("Hello, world!")], "session_id": "s1", "id": "req-123"}))
        .send()
        .await
        .unwrap();
    let raw = response.text().await.unwrap();
    // Field order and nulls as the reference serializes them.
    assert!(raw.starts_with("id: 0\ndata: {\"sequence_number\":0,\"object\":\"response\",\"status\":\"created\",\"error\":null,\"id\":\"req-123\",\"created_at\":"), "{raw}");
    assert!(
        raw.contains(
            ",\"completed_at\":null,\"output\":null,\"usage\":null,\"session_id\":\"s1\"}"
        ),
        "{raw}"
    );
    assert!(
        raw.contains(
            "\"object\":\"message\",\"status\":\"in_progress\",\"error\":null,\"id\":\"msg_"
        ),
        "{raw}"
    );
    assert!(raw.contains("\"type\":\"message\",\"role\":\"assistant\",\"content\":null,\"code\":null,\"message\":null,\"usage\":null,\"metadata\":{}}"), "{raw}");
    assert!(raw.contains("\"object\":\"content\",\"status\":\"in_progress\",\"error\":null,\"type\":\"text\",\"index\":0,\"delta\":true,\"msg_id\":\"msg_"), "{raw}");

    let frames: Vec<Frame> = {
        let reader = open(
            &app,
            &token,
            "/agentscope/agents/echo/process",
            json!({"input": [user_text("Hello, world!")], "session_id": "s2"}),
        )
        .await;
        reader.collect().await
    };
    assert_numbered(&frames);
    assert_eq!(
        shape(&frames),
        [
            "response:created:-:-",
            "response:in_progress:-:-",
            "message:in_progress:message:assistant",
            "content:in_progress:text:-",
            "content:in_progress:text:-",
            "content:completed:text:-",
            "message:completed:message:assistant",
            "response:completed:-:-",
        ]
    );
    let msg_id = frames[2].data["id"].clone();
    assert_eq!(frames[3].data["text"], "Hello, w");
    assert_eq!(frames[3].data["msg_id"], msg_id);
    assert_eq!(frames[4].data["text"], "orld!");
    assert_eq!(frames[5].data["text"], "Hello, world!");
    assert_eq!(frames[5].data["delta"], Value::Null);
    let message = &frames[6].data;
    assert_eq!(message["content"][0]["text"], "Hello, world!");
    assert_eq!(message["content"][0]["sequence_number"], 5);
    let done = &frames[7].data;
    assert_eq!(done["session_id"], "s2");
    assert!(done["completed_at"].is_i64());
    assert_eq!(done["output"], json!([message]));
    assert!(done["id"].as_str().unwrap().starts_with("turn_"));
    assert!(done["usage"]["output_tokens"].is_u64());
}

async fn app_with_model(server: &ScriptedOpenAi) -> TestApp {
    let config = format!(
        r#"
[[agents]]
name = "gpt"
provider = "openai"
base_url = "{}"
model = "m"
timeout_seconds = 2
max_retries = 0

[[agents.tools]]
name = "calculator"
expose = false
"#,
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

#[tokio::test]
async fn reasoning_a_tool_call_and_its_output_follow_the_capture() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_model(&server).await;
    let (_, token) = app.new_tenant().await;
    server.push(Reply::Stream(vec![
        reasoning("I should"),
        reasoning(" compute."),
        tool_fragment(0, Some("call_1"), Some("calculator"), "{\"expression\":"),
        tool_fragment(0, None, None, "\"6*7\"}"),
        finish("tool_calls"),
        usage(10, 5),
    ]));
    server.push(Reply::Stream(vec![
        text("It is "),
        text("42."),
        finish("stop"),
        usage(20, 3),
    ]));
    let frames = process(
        &app,
        &token,
        "/agentscope/agents/gpt/process",
        json!({"input": [user_text("6 times 7?")], "session_id": "calc"}),
    )
    .await;
    assert_numbered(&frames);
    assert_eq!(
        shape(&frames),
        [
            "response:created:-:-",
            "response:in_progress:-:-",
            "message:in_progress:reasoning:assistant",
            "content:in_progress:text:-",
            "content:in_progress:text:-",
            "content:completed:text:-",
            "message:completed:reasoning:assistant",
            "message:in_progress:plugin_call:assistant",
            "content:in_progress:data:-",
            "content:completed:data:-",
            "message:completed:plugin_call:assistant",
            "message:in_progress:plugin_call_output:tool",
            "content:in_progress:data:-",
            "content:completed:data:-",
            "message:completed:plugin_call_output:tool",
            "message:in_progress:message:assistant",
            "content:in_progress:text:-",
            "content:in_progress:text:-",
            "content:completed:text:-",
            "message:completed:message:assistant",
            "response:completed:-:-",
        ]
    );
    assert_eq!(frames[5].data["text"], "I should compute.");
    assert_eq!(
        frames[8].data["data"],
        json!({"call_id": "call_1", "name": "calculator", "arguments": ""})
    );
    assert_eq!(frames[8].data["index"], Value::Null);
    assert_eq!(frames[12].data["index"], 0);
    assert_eq!(frames[12].data["data"]["output"], "");
    assert_eq!(frames[9].data["index"], 0);
    assert_eq!(
        serde_json::from_str::<Value>(frames[9].data["data"]["arguments"].as_str().unwrap())
            .unwrap(),
        json!({"expression": "6*7"})
    );
    let embedded = &frames[10].data["content"][0];
    assert_eq!(embedded["status"], Value::Null);
    assert_eq!(embedded["msg_id"], Value::Null);
    assert_eq!(
        frames[13].data["data"],
        json!({"call_id": "call_1", "name": "calculator", "output": "[{\"text\":\"42\",\"type\":\"text\"}]"})
    );
    let done = &frames[20].data;
    assert_eq!(done["output"].as_array().unwrap().len(), 4);
    assert_eq!(done["usage"]["input_tokens"], 30);
    assert_eq!(done["usage"]["output_tokens"], 8);
}

#[tokio::test]
async fn stream_false_answers_with_the_final_response_as_json() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let reply = app
        .post(
            "/agentscope/process",
            &token,
            json!({"input": [user_text("Quiet please")], "stream": false, "model": "echo"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["object"], "response");
    assert_eq!(reply.body["status"], "completed");
    assert_eq!(
        reply.body["output"][0]["content"][0]["text"],
        "Quiet please"
    );
    assert!(
        reply.body["session_id"]
            .as_str()
            .unwrap()
            .starts_with("sess_")
    );
}

#[tokio::test]
async fn a_response_resumes_after_the_last_event_id_it_received() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let whole = process(
        &app,
        &token,
        "/agentscope/agents/slow/process",
        json!({"input": [user_text("resume me")], "session_id": "r", "id": "req-resume"}),
    )
    .await;
    assert!(whole.len() > 8);
    let rest = app
        .stream("/agentscope/responses/req-resume/events", &token, Some(3))
        .await
        .collect()
        .await;
    assert_eq!(rest, whole[4..]);
    let from_query = app
        .stream(
            "/agentscope/responses/req-resume/events?after=6",
            &token,
            None,
        )
        .await
        .collect()
        .await;
    assert_eq!(from_query, whole[7..]);
    // The response is named by the request's id.
    assert_eq!(whole.last().unwrap().data["id"], "req-resume");
}

#[tokio::test]
async fn a_busy_session_gets_an_error_event_and_a_failure_ends_with_failed() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let mut running = open(
        &app,
        &token,
        "/agentscope/agents/slow/process",
        json!({"input": [user_text("a long answer to wait for")], "session_id": "busy"}),
    )
    .await;
    running.next().await.expect("the first turn started");
    let refused = process(
        &app,
        &token,
        "/agentscope/agents/slow/process",
        json!({"input": [user_text("me too")], "session_id": "busy"}),
    )
    .await;
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].data["code"], "session_busy");
    assert!(refused[0].data["error"].is_string());
    assert_eq!(refused[0].id, None);
    let rest = running.collect().await;
    assert_eq!(rest.last().unwrap().data["status"], "completed");

    let server = ScriptedOpenAi::start().await;
    let app = app_with_model(&server).await;
    let (_, token) = app.new_tenant().await;
    server.push(Reply::Break(vec![text("Partial ")]));
    let frames = process(
        &app,
        &token,
        "/agentscope/process",
        json!({"input": [user_text("break")], "session_id": "f"}),
    )
    .await;
    assert_numbered(&frames);
    let last = &frames.last().unwrap().data;
    assert_eq!(last["object"], "response");
    assert_eq!(last["status"], "failed");
    assert_eq!(last["error"]["code"], "provider_error");
    assert_eq!(last["completed_at"], Value::Null);
}

#[tokio::test]
async fn a_session_continues_across_aap_and_agentscope_without_duplicated_history() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    app.stream_turn(&token, &session, json!({"messages": [user("one")]}))
        .await
        .collect()
        .await;
    // The client repeats the stored history before its new message.
    let frames = process(
        &app,
        &token,
        "/agentscope/process",
        json!({"session_id": session, "input": [
            user_text("one"),
            {"role": "assistant", "type": "message", "content": [{"type": "text", "text": "one"}]},
            user_text("two"),
        ]}),
    )
    .await;
    assert_eq!(frames.last().unwrap().data["status"], "completed");
    assert_eq!(frames.last().unwrap().data["session_id"], json!(session));
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(
        history.body["history"]["full"],
        json!([
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": [{"type": "text", "text": "one"}]},
            {"role": "user", "content": [{"type": "text", "text": "two"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "two"}]},
        ])
    );
    // History that is not the session's is refused, and nothing is stored.
    let refused = process(
        &app,
        &token,
        "/agentscope/process",
        json!({"session_id": session, "input": [
            user_text("never said"),
            {"role": "assistant", "content": [{"type": "text", "text": "nor this"}]},
            user_text("three"),
        ]}),
    )
    .await;
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].data["code"], "invalid_request");
    let after = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(after.body, history.body);

    // A new session may bring its history along.
    let seeded = process(
        &app,
        &token,
        "/agentscope/process",
        json!({"session_id": "seeded", "input": [
            user_text("earlier"),
            {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
            user_text("now"),
        ]}),
    )
    .await;
    assert_eq!(seeded.last().unwrap().data["status"], "completed");
    let read = app
        .get("/agentscope/sessions/seeded/messages", &token)
        .await;
    let texts: Vec<&str> = read.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["earlier", "noted", "now", "now"]);
}

#[tokio::test]
async fn contents_round_trip_and_large_ones_become_urls_serving_the_same_bytes() {
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[engine]\ninline_part_max_bytes = 32\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let big = "x".repeat(100);
    let big_b64 = base64_of(big.as_bytes());
    let frames = process(
        &app,
        &token,
        "/agentscope/agents/echo/process",
        json!({"session_id": "parts", "input": [{"role": "user", "content": [
            {"type": "text", "text": "see attached"},
            {"type": "data", "data": {"k": 1}},
            {"type": "audio", "data": "UklGRg==", "format": "wav"},
            {"type": "refusal", "refusal": "no"},
            {"type": "file", "filename": "sources/a.txt", "file_data": big_b64},
            {"type": "file", "filename": "sources/b.txt", "file_url": "https://example.com/b"},
            {"type": "file", "filename": "other.txt", "file_url": "https://example.com/o"},
        ]}]}),
    )
    .await;
    assert_eq!(frames.last().unwrap().data["status"], "completed");
    let read = app.get("/agentscope/sessions/parts/messages", &token).await;
    let content = &read.body["messages"][0]["content"];
    assert_eq!(content[1]["data"], json!({"k": 1}));
    assert_eq!(content[2]["format"], "wav");
    assert_eq!(content[2]["data"], "UklGRg==");
    assert_eq!(content[3]["refusal"], "no");
    assert_eq!(content[4]["filename"], "sources/a.txt");
    assert_eq!(content[4]["file_data"], Value::Null);
    let url = content[4]["file_url"].as_str().unwrap();
    assert!(url.starts_with("/files/file_"), "{url}");
    let file = app
        .client
        .get(app.url(url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(file.status(), StatusCode::OK);
    assert_eq!(file.headers()["content-type"], "application/octet-stream");
    assert!(
        file.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("sandbox")
    );
    assert_eq!(file.bytes().await.unwrap(), big.as_bytes());

    // The named parts, listed with a glob; another tenant sees neither list nor file.
    let session = app.get("/sessions", &token).await.body["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = app
        .get(
            &format!("/sessions/{session}/parts?glob=/sources/*"),
            &token,
        )
        .await;
    let names: Vec<&str> = listed.body["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["/sources/a.txt", "/sources/b.txt"]);
    let all = app.get(&format!("/sessions/{session}/parts"), &token).await;
    assert_eq!(all.body["parts"].as_array().unwrap().len(), 3);
    let bad_glob = app
        .get(&format!("/sessions/{session}/parts?glob=/a/{{b"), &token)
        .await;
    assert_eq!(bad_glob.status, StatusCode::BAD_REQUEST);

    let (_, other) = app.new_tenant().await;
    assert_eq!(app.get(url, &other).await.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get(&format!("/sessions/{session}/parts"), &other)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/agentscope/sessions/parts/messages", &other)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // The same key names a different session for another tenant.
    let theirs = process(
        &app,
        &other,
        "/agentscope/agents/echo/process",
        json!({"session_id": "parts", "input": [user_text("mine")]}),
    )
    .await;
    assert_eq!(theirs.last().unwrap().data["status"], "completed");
    let mine = app.get("/agentscope/sessions/parts/messages", &token).await;
    assert_eq!(mine.body["messages"].as_array().unwrap().len(), 2);
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn an_input_schema_is_enforced_on_agentscope_and_aap_naming_the_part() {
    let config = r#"
[[agents]]
name = "strict"
provider = "echo"
image_inputs = ["http"]

[[agents.input_schema]]
content_type = "text/plain"
required = true

[[agents.input_schema]]
name = "/sources/*"
content_type = "*/*"
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;
    let refused = process(
        &app,
        &token,
        "/agentscope/agents/strict/process",
        json!({"session_id": "k", "input": [{"role": "user", "content": [
            {"type": "text", "text": "hi"},
            {"type": "data", "data": {"x": 1}},
        ]}]}),
    )
    .await;
    assert_eq!(refused[0].data["code"], "invalid_request");
    let message = refused[0].data["error"].as_str().unwrap();
    assert!(message.starts_with("messages[0].content[1]"), "{message}");
    assert!(message.contains("application/json"), "{message}");

    let accepted = process(
        &app,
        &token,
        "/agentscope/agents/strict/process",
        json!({"session_id": "k", "input": [{"role": "user", "content": [
            {"type": "text", "text": "hi"},
            {"type": "file", "filename": "sources/1", "file_url": "https://example.com/1"},
        ]}]}),
    )
    .await;
    assert_eq!(accepted.last().unwrap().data["status"], "completed");

    // AAP: an image is not in the schema; a body without text misses the required part.
    let session = app
        .create_session(&token, json!({"agent": {"name": "strict"}}))
        .await;
    let image = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"stream": "none", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "url": "https://example.com/a.png"}
            ]}]}),
        )
        .await;
    assert_eq!(image.status, StatusCode::BAD_REQUEST, "{}", image.text);
    assert_eq!(image.body["error"]["field"], "messages[0].content[1]");
    let meta = app.get("/meta", &token).await;
    let strict = meta.body["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "strict")
        .unwrap()
        .clone();
    assert_eq!(
        strict["capabilities"]["agentry"]["inputSchema"],
        json!([
            {"name": null, "contentType": "text/plain", "required": true},
            {"name": "/sources/*", "contentType": "*/*", "required": false}
        ])
    );
}

#[tokio::test]
async fn bad_requests_are_answered_in_the_faces_own_shapes() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let not_json = app
        .client
        .post(app.url("/agentscope/process"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = not_json.json().await.unwrap();
    assert_eq!(body["detail"][0]["type"], "json_invalid");

    let missing = process(
        &app,
        &token,
        "/agentscope/process",
        json!({"session_id": "x"}),
    )
    .await;
    assert_eq!(missing[0].data["code"], "invalid_request");
    assert!(missing[0].data["error"].as_str().unwrap().contains("input"));

    let unknown = app
        .post(
            "/agentscope/agents/nope/process",
            &token,
            json!({"input": [user_text("hi")], "stream": false}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);

    let no_response = app
        .get("/agentscope/responses/req-never/events", &token)
        .await;
    assert_eq!(no_response.status, StatusCode::NOT_FOUND);

    let unauthenticated = app
        .client
        .post(app.url("/agentscope/process"))
        .json(&json!({"input": [user_text("hi")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), StatusCode::UNAUTHORIZED);

    // Another tenant's response and session are not found.
    let frames = process(
        &app,
        &token,
        "/agentscope/process",
        json!({"input": [user_text("hi")], "id": "mine"}),
    )
    .await;
    let session = frames.last().unwrap().data["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, other) = app.new_tenant().await;
    assert_eq!(
        app.get("/agentscope/responses/mine/events", &other)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let refused = process(
        &app,
        &other,
        "/agentscope/process",
        json!({"input": [user_text("hi")], "session_id": session}),
    )
    .await;
    assert_eq!(refused[0].data["code"], "not_found");
}
