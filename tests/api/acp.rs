//! The ACP face at `/acp`: agents, runs in the three modes, events, errors, sessions, and
//! its wire shapes as the reference's captures show them.

mod await_resume;
pub mod frames;
mod lifecycle;
mod runs;
mod sessions;

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp, TestDb, spawn_app, spawn_app_on};
use frames::{Frame, SseReader};

/// `{"role": "user", "parts": [{"content": text}]}` as acp-sdk sends it, nulls included.
pub fn acp_user(text: &str) -> Value {
    json!({"role": "user", "parts": [{"name": null, "content_type": "text/plain", "content": text,
        "content_encoding": "plain", "content_url": null, "metadata": null}],
        "created_at": "2026-11-22T02:01:21.418292Z", "completed_at": "2026-11-22T02:01:21.418305Z"})
}

/// POSTs without a Content-Type header, as acp-sdk's client does.
pub async fn post_raw(app: &TestApp, path: &str, token: &str, body: &Value) -> reqwest::Response {
    app.client
        .post(app.url(path))
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .expect("request sent")
}

pub async fn reply_of(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
    }
}

/// `POST /acp/runs` in `mode`, answered as JSON.
pub async fn run(app: &TestApp, token: &str, body: Value) -> Reply {
    reply_of(post_raw(app, "/acp/runs", token, &body).await).await
}

/// `POST /acp/runs` with mode stream: every frame until the server ends the stream.
pub async fn run_stream(app: &TestApp, token: &str, mut body: Value) -> (String, Vec<Frame>) {
    body["mode"] = json!("stream");
    let response = post_raw(app, "/acp/runs", token, &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream; charset=utf-8"
    );
    let run_id = response.headers()["run-id"].to_str().unwrap().to_owned();
    (run_id, SseReader::new(response).collect().await)
}

/// Frames' ACP types.
pub fn types(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .map(|f| f.data["type"].as_str().unwrap().to_owned())
        .collect()
}

/// A frame's id as `(seq, k)`: `3` is `(3, 0)`, `3.1` is `(3, 1)`.
pub fn frame_id(frame: &Frame) -> (i64, u32) {
    let id = frame.id.as_deref().expect("an id");
    let (seq, k) = id.split_once('.').unwrap_or((id, "0"));
    let k: u32 = k.parse().expect("a frame index");
    assert!(
        k > 0 || !id.contains('.'),
        "{id}: the first frame is the bare seq"
    );
    (seq.parse().expect("a seq"), k)
}

/// The concatenated text of a run's output.
pub fn output_text(run: &Value) -> String {
    run["output"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap().iter())
        .filter(|p| p["content_type"] == "text/plain")
        .filter_map(|p| p["content"].as_str())
        .collect()
}

/// An ACP error body: `{code, message, data}` and nothing else.
pub fn assert_acp_error(reply: &Reply, status: StatusCode, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.text);
    assert_eq!(reply.body["code"], code, "{}", reply.text);
    assert!(reply.body["message"].is_string(), "{}", reply.text);
    let keys: Vec<&String> = reply.body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["code", "data", "message"], "{}", reply.text);
}

const RUN_KEYS: [&str; 9] = [
    "agent_name",
    "await_request",
    "created_at",
    "error",
    "finished_at",
    "output",
    "run_id",
    "session_id",
    "status",
];

fn assert_run_shape(run: &Value) {
    let mut keys: Vec<&str> = run
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(keys, RUN_KEYS, "{run}");
    assert!(uuid::Uuid::parse_str(run["run_id"].as_str().unwrap()).is_ok());
    assert!(uuid::Uuid::parse_str(run["session_id"].as_str().unwrap()).is_ok());
}

#[tokio::test]
async fn manifests_list_the_agents_with_content_types_from_their_schemas() {
    let config = r#"
[[agents]]
name = "strict"
provider = "echo"
description = "Takes text and sources."

[[agents.input_schema]]
content_type = "text/plain"
required = true

[[agents.input_schema]]
name = "/sources/*"
content_type = "{text/url,application/pdf}"

[[agents.output_schema]]
content_type = "text/*"
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;
    let ping = app.get("/acp/ping", &token).await;
    assert_eq!(
        (ping.status, ping.body.clone()),
        (StatusCode::OK, json!({}))
    );
    let agents = app.get("/acp/agents", &token).await;
    assert_eq!(agents.status, StatusCode::OK);
    let names: Vec<&str> = agents.body["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["strict"]);

    let strict = app.get("/acp/agents/strict", &token).await;
    assert_eq!(strict.body["description"], "Takes text and sources.");
    assert_eq!(
        strict.body["input_content_types"],
        json!(["text/plain", "text/url", "application/pdf"])
    );
    assert_eq!(strict.body["output_content_types"], json!(["text/*"]));
    assert_eq!(
        strict.body["metadata"]["annotations"]["agentry"]["input_schema"][1],
        json!({"name": "/sources/*", "content_type": "{text/url,application/pdf}", "required": false})
    );
    assert!(strict.body["metadata"].get("license").unwrap().is_null());
    // Keys in the reference's order (agents.txt, agent_echo.txt), nulls included.
    let metadata_tail = r#"},"documentation":null,"license":null,"programming_language":null,"natural_languages":null,"framework":null,"capabilities":null,"domains":null,"tags":null,"created_at":null,"updated_at":null,"author":null,"contributors":null,"links":null,"dependencies":null,"recommended_models":null},"#;
    let manifest = format!(
        r#"{{"name":"strict","description":"Takes text and sources.","metadata":{{"annotations":{{"agentry":{{"title":null,"version":{version},"input_schema":[{{"name":null,"content_type":"text/plain","required":true}},{{"name":"/sources/*","content_type":"{{text/url,application/pdf}}","required":false}}],"output_schema":[{{"name":null,"content_type":"text/*","required":false}}]}}{metadata_tail}"input_content_types":["text/plain","text/url","application/pdf"],"output_content_types":["text/*"]}}"#,
        version = strict.body["metadata"]["annotations"]["agentry"]["version"],
    );
    assert_eq!(strict.text, manifest);
    assert_eq!(agents.text, format!(r#"{{"agents":[{manifest}]}}"#));

    let missing = app.get("/acp/agents/nope", &token).await;
    assert_acp_error(&missing, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(
        missing.body["message"],
        "Agent nope not found; the agents here: `strict`"
    );
}

#[tokio::test]
async fn a_sync_run_answers_with_the_completed_run_and_its_id_in_a_header() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let reply = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": null, "session": null,
               "input": [acp_user("Howdy!")], "mode": "sync"}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let run = &reply.body;
    assert_run_shape(run);
    assert_eq!(reply.headers["run-id"], run["run_id"].as_str().unwrap());
    assert_eq!(run["agent_name"], "echo");
    assert_eq!(run["status"], "completed");
    assert_eq!(run["await_request"], Value::Null);
    assert_eq!(run["error"], Value::Null);
    assert!(run["finished_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(run["output"].as_array().unwrap().len(), 1);
    let message = &run["output"][0];
    assert_eq!(message["role"], "agent/echo");
    assert_eq!(
        message["parts"],
        json!([{"name": null, "content_type": "text/plain", "content": "Howdy!",
                "content_encoding": "plain", "content_url": null, "metadata": null}])
    );
    assert!(message["completed_at"].is_string());

    // Read back, the run is the same.
    let id = run["run_id"].as_str().unwrap();
    let again = app.get(&format!("/acp/runs/{id}"), &token).await;
    assert_eq!(again.body, reply.body);
    // An agent without schemas takes and gives anything.
    let echo = app.get("/acp/agents/echo", &token).await;
    assert_eq!(echo.body["input_content_types"], json!(["*/*"]));
    assert_eq!(echo.body["output_content_types"], json!(["*/*"]));
    // Without a mode, a run is sync.
    let default = run_default_mode(&app, &token).await;
    assert_eq!(default["status"], "completed");
}

async fn run_default_mode(app: &TestApp, token: &str) -> Value {
    run(
        app,
        token,
        json!({"agent_name": "echo", "input": [{"parts": [{"content": "x"}]}]}),
    )
    .await
    .body
}

#[tokio::test]
async fn an_async_run_is_accepted_created_and_polled_to_its_end() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let reply = run(
        &app,
        &token,
        json!({"agent_name": "slow", "input": [acp_user("abcdef")], "mode": "async"}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    assert_run_shape(&reply.body);
    assert_eq!(reply.body["status"], "created");
    assert_eq!(reply.body["output"], json!([]));
    assert_eq!(reply.body["finished_at"], Value::Null);
    let id = reply.body["run_id"].as_str().unwrap().to_owned();
    assert_eq!(reply.headers["run-id"], id.as_str());

    // Polling sees it run, then end.
    let mut seen = Vec::new();
    let done = loop {
        let poll = app.get(&format!("/acp/runs/{id}"), &token).await;
        assert_eq!(poll.status, StatusCode::OK);
        let status = poll.body["status"].as_str().unwrap().to_owned();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if status == "completed" {
            break poll.body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(seen.contains(&"in-progress".to_owned()), "{seen:?}");
    assert_eq!(output_text(&done), "abcdef");
    assert_eq!(done["session_id"], reply.body["session_id"]);
}

#[tokio::test]
async fn a_streamed_run_sends_the_reference_event_sequence_with_ids() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (run_id, frames) = run_stream(
        &app,
        &token,
        json!({"agent_name": "thinker", "input": [acp_user("Howdy!")]}),
    )
    .await;
    let kinds = types(&frames);
    assert_eq!(
        &kinds[..3],
        ["run.created", "run.in-progress", "message.created"]
    );
    let tail = &kinds[kinds.len() - 3..];
    assert_eq!(tail, ["message.completed", "generic", "run.completed"]);
    assert!(
        kinds[3..kinds.len() - 3]
            .iter()
            .all(|k| k == "message.part"),
        "{kinds:?}"
    );
    // Every frame carries its own id: its event's seq, then its place among the event's
    // frames (`<seq>`, `<seq>.1`, …), increasing.
    let ids: Vec<(i64, u32)> = frames.iter().map(frame_id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(ids[1], (ids[0].0, 1));
    assert_eq!(frames[0].data["run"]["status"], "created");
    assert_eq!(frames[0].data["run"]["run_id"], run_id.as_str());
    assert_eq!(frames[1].data["run"]["status"], "in-progress");
    assert_eq!(frames[2].data["message"]["role"], "agent/thinker");
    assert_eq!(frames[2].data["message"]["parts"], json!([]));
    // Thinking streams as trajectory parts without content; the answer as text parts.
    let parts: Vec<&Value> = frames
        .iter()
        .filter(|f| f.data["type"] == "message.part")
        .map(|f| &f.data["part"])
        .collect();
    let thinking: String = parts
        .iter()
        .filter(|p| p["metadata"]["kind"] == "trajectory")
        .map(|p| {
            assert_eq!(p["content"], Value::Null);
            p["metadata"]["message"].as_str().unwrap()
        })
        .collect();
    assert!(!thinking.is_empty());
    let text: String = parts
        .iter()
        .filter(|p| p["metadata"].is_null())
        .map(|p| p["content"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Howdy!");
    let generic = &frames[frames.len() - 2].data["generic"]["agentry"];
    assert_eq!(generic["stop_reason"], "end_turn");
    assert!(generic["turn_id"].as_str().unwrap().starts_with("turn_"));
    let done = &frames.last().unwrap().data["run"];
    assert_eq!(done["status"], "completed");
    // The output merges the deltas: one thinking part, one text part.
    let output = done["output"][0]["parts"].as_array().unwrap();
    assert_eq!(output.len(), 2);
    assert_eq!(output[0]["metadata"]["message"], thinking.as_str());
    assert_eq!(output[1]["content"], "Howdy!");
    let completed = &frames[frames.len() - 3].data["message"];
    assert_eq!(completed["parts"], done["output"][0]["parts"]);

    // The events list is the same sequence, as JSON, each event's keys in the reference's
    // order (run_events.txt) and trajectory metadata complete (run_stream_parts.txt).
    let listed = app.get(&format!("/acp/runs/{run_id}/events"), &token).await;
    assert!(
        listed.text.starts_with(&format!(
            r#"{{"events":[{{"type":"run.created","run":{{"run_id":"{run_id}","agent_name":"thinker","session_id":"#
        )),
        "{}",
        listed.text
    );
    for expected in [
        r#"{"type":"message.created","message":{"role":"agent/thinker","parts":[],"created_at":""#,
        r#"{"type":"message.part","part":{"name":null,"content_type":"text/plain","content":null,"content_encoding":"plain","content_url":null,"metadata":{"kind":"trajectory","message":""#,
        r#"","tool_name":null,"tool_input":null,"tool_output":null}}}"#,
        r#"{"type":"generic","generic":{"agentry":"#,
        r#"{"type":"run.completed","run":{"run_id":"#,
    ] {
        assert!(
            listed.text.contains(expected),
            "{expected} in {}",
            listed.text
        );
    }
    let listed_text = listed.text.clone();
    let listed: Vec<Value> = listed.body["events"].as_array().unwrap().clone();
    let streamed: Vec<Value> = frames.iter().map(|f| f.data.clone()).collect();
    assert_eq!(listed, streamed);
    // Byte for byte: the list holds the frames' data as sent.
    let raw: Vec<&str> = frames.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(listed_text, format!(r#"{{"events":[{}]}}"#, raw.join(",")));
}

#[tokio::test]
async fn events_resume_after_a_cursor_as_a_list_or_a_stream() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (run_id, frames) = run_stream(
        &app,
        &token,
        json!({"agent_name": "slow", "input": [acp_user("abcd")]}),
    )
    .await;
    let middle = frames[4].id.clone().unwrap();
    let expected: Vec<Value> = frames[5..].iter().map(|f| f.data.clone()).collect();
    assert!(!expected.is_empty());
    let listed = app
        .get(&format!("/acp/runs/{run_id}/events?after={middle}"), &token)
        .await;
    assert_eq!(listed.body["events"], json!(expected));

    let resumed = SseReader::new(
        app.client
            .get(app.url(&format!("/acp/runs/{run_id}/events")))
            .bearer_auth(&token)
            .header("Accept", "text/event-stream")
            .header("Last-Event-ID", middle.as_str())
            .send()
            .await
            .unwrap(),
    )
    .collect()
    .await;
    let data: Vec<Value> = resumed.iter().map(|f| f.data.clone()).collect();
    assert_eq!(data, expected);

    // A live run followed from its start over the events route ends with it.
    let started = run(
        &app,
        &token,
        json!({"agent_name": "slow", "input": [acp_user("xyz")], "mode": "async"}),
    )
    .await;
    let id = started.body["run_id"].as_str().unwrap();
    let live = SseReader::new(
        app.client
            .get(app.url(&format!("/acp/runs/{id}/events")))
            .bearer_auth(&token)
            .header("Accept", "text/event-stream")
            .send()
            .await
            .unwrap(),
    )
    .collect()
    .await;
    assert_eq!(types(&live)[0], "run.created");
    assert_eq!(live.last().unwrap().data["type"], "run.completed");
    assert_eq!(output_text(&live.last().unwrap().data["run"]), "xyz");
}

/// The run's events after `after`, as the JSON list (raw data of each event) and as SSE
/// resumed with `Last-Event-ID` (raw data and ids).
async fn resume_after(
    app: &TestApp,
    token: &str,
    run_id: &str,
    after: &str,
) -> (String, Vec<Frame>) {
    let listed = app
        .get(&format!("/acp/runs/{run_id}/events?after={after}"), token)
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let resumed = SseReader::new(
        app.client
            .get(app.url(&format!("/acp/runs/{run_id}/events")))
            .bearer_auth(token)
            .header("Accept", "text/event-stream")
            .header("Last-Event-ID", after)
            .send()
            .await
            .unwrap(),
    )
    .collect()
    .await;
    (listed.text, resumed)
}

#[tokio::test]
async fn a_stream_resumed_after_any_frame_id_yields_exactly_the_rest() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (run_id, frames) = run_stream(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [acp_user("Howdy!")]}),
    )
    .await;
    // The turn's start renders to two frames: `run.created` and `run.in-progress`.
    assert_eq!(types(&frames)[..2], ["run.created", "run.in-progress"]);
    let first = frames[0].id.clone().unwrap();
    assert_eq!(frames[1].id.as_deref(), Some(format!("{first}.1").as_str()));
    let ids: Vec<&str> = frames.iter().map(|f| f.id.as_deref().unwrap()).collect();
    let unique: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    for (i, frame) in frames.iter().enumerate() {
        let after = frame.id.as_deref().unwrap();
        let rest = &frames[i + 1..];
        let (listed, resumed) = resume_after(&app, &token, &run_id, after).await;
        let raw: Vec<&str> = rest.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(
            listed,
            format!(r#"{{"events":[{}]}}"#, raw.join(",")),
            "after {after}"
        );
        assert_eq!(resumed, rest, "after {after}");
    }
    // Before the first frame (a plain seq), everything.
    let before = (frame_id(&frames[0]).0 - 1).to_string();
    let (_, all) = resume_after(&app, &token, &run_id, &before).await;
    assert_eq!(all, frames);
    // Anything else is refused, naming the cursor: no frame has a negative id either.
    for value in ["3.x", "-1"] {
        let bad = app
            .get(&format!("/acp/runs/{run_id}/events?after={value}"), &token)
            .await;
        assert_acp_error(&bad, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
        assert_eq!(bad.body["data"]["field"], "after", "{value}");
    }
    for value in ["x", "-1"] {
        let bad = reply_of(
            app.client
                .get(app.url(&format!("/acp/runs/{run_id}/events")))
                .bearer_auth(&token)
                .header("Last-Event-ID", value)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_acp_error(&bad, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
        assert_eq!(bad.body["data"]["field"], "Last-Event-ID", "{value}");
    }
}

#[tokio::test]
async fn unknown_agents_runs_and_bad_input_get_the_acp_error_body() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let agent = run(
        &app,
        &token,
        json!({"agent_name": "nope", "input": [acp_user("x")]}),
    )
    .await;
    assert_acp_error(&agent, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(
        agent.body["message"],
        "Agent nope not found; the agents here: `echo`, `tooly`, `slow`, `thinker`"
    );
    let zero = "00000000-0000-0000-0000-000000000000";
    for path in [
        format!("/acp/runs/{zero}"),
        format!("/acp/runs/{zero}/events"),
        "/acp/runs/not-a-run".to_owned(),
    ] {
        let missing = app.get(&path, &token).await;
        assert_acp_error(&missing, StatusCode::NOT_FOUND, "not_found");
    }
    let missing = app.get(&format!("/acp/runs/{zero}"), &token).await;
    assert_eq!(missing.body["message"], format!("Run {zero} not found"));
    let cancel = reply_of(
        post_raw(
            &app,
            &format!("/acp/runs/{zero}/cancel"),
            &token,
            &json!({}),
        )
        .await,
    )
    .await;
    assert_acp_error(&cancel, StatusCode::NOT_FOUND, "not_found");

    let empty = run(&app, &token, json!({"agent_name": "echo", "input": []})).await;
    assert_acp_error(&empty, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    let role = run(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [{"role": "assistant", "parts": [{"content": "x"}]}]}),
    )
    .await;
    assert_acp_error(&role, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    assert_eq!(role.body["data"]["field"], "input[0].role");
    assert!(
        role.body["message"]
            .as_str()
            .unwrap()
            .contains("must match"),
        "{}",
        role.text
    );
    // The reference takes agent roles in input; agentry keeps the history itself and names
    // the message instead.
    let agent_role = run(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [acp_user("x"),
            {"role": "agent/echo", "parts": [{"content": "y"}]}]}),
    )
    .await;
    assert_acp_error(
        &agent_role,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_input",
    );
    assert_eq!(agent_role.body["data"]["field"], "input[1].role");
    assert!(
        agent_role.body["message"]
            .as_str()
            .unwrap()
            .contains("the session keeps"),
        "{}",
        agent_role.text
    );
    let both = run(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [{"parts": [{"content": "x", "content_url": "http://e.com/x"}]}]}),
    )
    .await;
    assert_acp_error(&both, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    let mismatch = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": uuid::Uuid::new_v4().to_string(),
               "session": {"id": uuid::Uuid::new_v4().to_string(), "history": [], "state": null},
               "input": [acp_user("x")]}),
    )
    .await;
    assert_acp_error(&mismatch, StatusCode::BAD_REQUEST, "invalid_input");
    assert_eq!(mismatch.body["message"], "Session ID mismatch");
    let wrong_method = app.get("/acp/runs", &token).await;
    assert_acp_error(
        &wrong_method,
        StatusCode::METHOD_NOT_ALLOWED,
        "server_error",
    );
    let unknown_route = app.get("/acp/nowhere", &token).await;
    assert_acp_error(&unknown_route, StatusCode::NOT_FOUND, "not_found");
    let unauthenticated = app
        .request(reqwest::Method::GET, "/acp/agents", None, None)
        .await;
    assert_acp_error(&unauthenticated, StatusCode::UNAUTHORIZED, "missing_token");
    assert_eq!(unauthenticated.body["data"]["code"], "missing_token");
}

#[tokio::test]
async fn part_names_are_rooted_and_invalid_names_or_schema_violations_name_the_part() {
    let config = r#"
[[agents]]
name = "strict"
provider = "echo"

[[agents.input_schema]]
content_type = "text/plain"
required = true

[[agents.input_schema]]
name = "/sources/*"
content_type = "*/*"
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;
    // acp-sdk's bare name is rooted: `sources/1` is `/sources/1`.
    let ok = run(
        &app,
        &token,
        json!({"agent_name": "strict", "input": [{"role": "user", "parts": [
            {"content": "read this"},
            {"name": "sources/1", "content_type": "text/url", "content": "https://example.com"}
        ]}]}),
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    assert_eq!(ok.body["status"], "completed");
    let session = ok.body["session_id"].as_str().unwrap();
    let described = app.get(&format!("/acp/sessions/{session}"), &token).await;
    let first = described.body["history"][0].as_str().unwrap().to_owned();
    let path = first
        .split_once("/acp/")
        .map(|(_, p)| format!("/acp/{p}"))
        .unwrap();
    let stored = app.get(&path, &token).await;
    assert_eq!(stored.body["parts"][1]["name"], "/sources/1");

    let bad_name = run(
        &app,
        &token,
        json!({"agent_name": "strict", "input": [{"role": "user", "parts": [
            {"content": "hi"}, {"name": "my notes.txt", "content": "x"}
        ]}]}),
    )
    .await;
    assert_acp_error(&bad_name, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    assert_eq!(bad_name.body["data"]["field"], "input[0].parts[1].name");
    assert!(
        bad_name.body["message"]
            .as_str()
            .unwrap()
            .contains("my notes.txt")
    );

    let outside = run(
        &app,
        &token,
        json!({"agent_name": "strict", "input": [{"role": "user", "parts": [
            {"content": "hi"}, {"name": "/notes/1", "content": "x"}
        ]}]}),
    )
    .await;
    assert_acp_error(&outside, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    assert_eq!(
        outside.body["data"]["field"],
        "input[0].parts[1] (`/notes/1`)"
    );
    assert!(
        outside.body["message"]
            .as_str()
            .unwrap()
            .contains("matches no part"),
        "{}",
        outside.text
    );
    let no_text = run(
        &app,
        &token,
        json!({"agent_name": "strict", "input": [{"role": "user", "parts": [
            {"name": "/sources/1", "content": "x"}
        ]}]}),
    )
    .await;
    assert_acp_error(&no_text, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    assert!(
        no_text.body["message"]
            .as_str()
            .unwrap()
            .contains("required")
    );
}

#[tokio::test]
async fn another_tenant_sees_none_of_a_tenants_runs_or_sessions() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let session = uuid::Uuid::new_v4().to_string();
    let reply = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": session, "input": [acp_user("mine")]}),
    )
    .await;
    assert_eq!(reply.body["session_id"], session.as_str());
    let id = reply.body["run_id"].as_str().unwrap();
    for path in [
        format!("/acp/runs/{id}"),
        format!("/acp/runs/{id}/events"),
        format!("/acp/sessions/{session}"),
        format!("/acp/sessions/{session}/history/0"),
    ] {
        let hidden = app.get(&path, &other).await;
        assert_acp_error(&hidden, StatusCode::NOT_FOUND, "not_found");
        assert_eq!(
            app.get(&path, &token).await.status,
            StatusCode::OK,
            "{path}"
        );
    }
    for path in [format!("/acp/runs/{id}"), format!("/acp/runs/{id}/cancel")] {
        let hidden = reply_of(post_raw(&app, &path, &other, &json!({})).await).await;
        assert_acp_error(&hidden, StatusCode::NOT_FOUND, "not_found");
    }
    // The same client session id in another tenant names another session.
    let theirs = run(
        &app,
        &other,
        json!({"agent_name": "echo", "session_id": session, "input": [acp_user("theirs")]}),
    )
    .await;
    assert_eq!(theirs.body["session_id"], session.as_str());
    let mine = app.get(&format!("/acp/sessions/{session}"), &token).await;
    let theirs = app.get(&format!("/acp/sessions/{session}"), &other).await;
    assert_eq!(mine.body["history"].as_array().unwrap().len(), 2);
    assert_eq!(theirs.body["history"].as_array().unwrap().len(), 2);
    let read = |reply: &Reply| {
        let url = reply.body["history"][0].as_str().unwrap().to_owned();
        url.split_once("/acp/")
            .map(|(_, p)| format!("/acp/{p}"))
            .unwrap()
    };
    let first_mine = app.get(&read(&mine), &token).await;
    assert_eq!(first_mine.body["parts"][0]["content"], "mine");
    let first_theirs = app.get(&read(&theirs), &other).await;
    assert_eq!(first_theirs.body["parts"][0]["content"], "theirs");
    for path in ["/acp/ping", "/acp/agents", "/acp/agents/echo"] {
        let refused = app.request(reqwest::Method::GET, path, None, None).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{path}");
    }
}
