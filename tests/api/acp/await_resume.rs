//! Awaiting runs: a client tool's call or an untrusted server tool's call stops the run
//! as `awaiting`; a resume answers them and the run goes on; anything else is refused.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::frames::SseReader;
use super::{acp_user, assert_acp_error, output_text, post_raw, reply_of, run, types};
use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

pub(super) async fn app_with_gpt(server: &ScriptedOpenAi) -> TestApp {
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
name = "clock"
"#,
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

/// An AAP session of `gpt` with a client tool `lookup` and the untrusted server tool
/// `clock` (ACP itself cannot declare tools); its id written as ACP writes it, a UUID.
pub(super) async fn tool_session(app: &TestApp, token: &str) -> (String, String) {
    let lookup = json!({"name": "lookup", "description": "d", "parameters": {"type": "object"}});
    let session = app
        .create_session(
            token,
            json!({"agent": {"name": "gpt", "tools": [{"name": "clock"}]}, "tools": [lookup]}),
        )
        .await;
    let hex = session.trim_start_matches("sess_");
    let uuid = uuid::Uuid::parse_str(hex).unwrap().hyphenated().to_string();
    (session, uuid)
}

fn both_calls() -> Reply {
    Reply::Stream(vec![
        tool_fragment(0, Some("a"), Some("lookup"), r#"{"q": "x"}"#),
        tool_fragment(1, Some("c"), Some("clock"), "{}"),
        finish("tool_calls"),
    ])
}

/// A sync run of `gpt` on the session (`uuid`) whose model calls both tools: it awaits them.
pub(super) async fn awaiting_run(
    app: &TestApp,
    server: &ScriptedOpenAi,
    token: &str,
    uuid: &str,
) -> crate::helpers::Reply {
    server.push(both_calls());
    let awaiting = run(
        app,
        token,
        json!({"agent_name": "gpt", "session_id": uuid, "input": [acp_user("look it up")]}),
    )
    .await;
    assert_eq!(awaiting.status, StatusCode::OK, "{}", awaiting.text);
    assert_eq!(awaiting.body["status"], "awaiting", "{}", awaiting.text);
    awaiting
}

pub(super) async fn resume(
    app: &TestApp,
    token: &str,
    run_id: &str,
    body: Value,
) -> crate::helpers::Reply {
    reply_of(post_raw(app, &format!("/acp/runs/{run_id}"), token, &body).await).await
}

pub(super) fn answers(mode: &str) -> Value {
    json!({"await_resume": {"type": "message", "message": {"role": "user", "parts": [
        {"name": "/tool_results/a", "content_type": "text/plain", "content": "found"},
        {"name": "tool_permissions/c", "content_type": "application/json",
         "content": "{\"granted\": false, \"reason\": \"not now\"}"}
    ]}}, "mode": mode})
}

#[tokio::test]
async fn a_sync_run_awaits_its_calls_and_a_resume_answers_them() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let (session, uuid) = tool_session(&app, &token).await;
    let awaiting = awaiting_run(&app, &server, &token, &uuid).await;
    assert_eq!(awaiting.status, StatusCode::OK, "{}", awaiting.text);
    assert_eq!(awaiting.body["status"], "awaiting");
    assert_eq!(awaiting.body["session_id"], uuid.as_str());
    assert_eq!(awaiting.body["finished_at"], Value::Null);
    let request = &awaiting.body["await_request"];
    assert_eq!(request["type"], "message");
    assert_eq!(request["message"]["role"], "agent/gpt");
    // Timestamped as the reference does (await_sync.txt): made with the first call,
    // completed when the turn stopped.
    let made = request["message"]["created_at"].as_str().unwrap();
    let completed = request["message"]["completed_at"].as_str().unwrap();
    assert!(
        made.ends_with('Z') && made <= completed,
        "{made} {completed}"
    );
    assert!(completed <= awaiting.body["output"][0]["completed_at"].as_str().unwrap());
    assert!(made >= awaiting.body["created_at"].as_str().unwrap());
    let parts = request["message"]["parts"].as_array().unwrap();
    let names: Vec<&str> = parts.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["/tool_calls/a", "/tool_calls/c"]);
    assert_eq!(parts[0]["content_type"], "application/json");
    let calls: Vec<Value> = parts
        .iter()
        .map(|p| serde_json::from_str(p["content"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(
        calls,
        [
            json!({"id": "a", "name": "lookup", "input": {"q": "x"}, "answer": "result"}),
            json!({"id": "c", "name": "clock", "input": {}, "answer": "permission"})
        ]
    );
    // The calls are in the output too, as trajectory parts.
    let trajectory = &awaiting.body["output"][0]["parts"][0]["metadata"];
    assert_eq!(trajectory["kind"], "trajectory");
    assert_eq!(trajectory["tool_name"], "lookup");
    assert_eq!(trajectory["tool_input"], json!({"q": "x"}));
    assert!(
        awaiting.text.contains(
            r#""metadata":{"kind":"trajectory","message":null,"tool_name":"lookup","tool_input":{"q":"x"},"tool_output":null}"#
        ),
        "{}",
        awaiting.text
    );

    server.push(Reply::Stream(vec![text("Found it."), finish("stop")]));
    let run_id = awaiting.body["run_id"].as_str().unwrap();
    let done = resume(&app, &token, run_id, answers("sync")).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.text);
    assert_eq!(done.body["run_id"], run_id);
    assert_eq!(done.body["status"], "completed");
    assert_eq!(done.body["await_request"], Value::Null);
    assert!(output_text(&done.body).ends_with("Found it."));
    // The model got the result and the refusal.
    let sent = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tools: Vec<(&str, &str)> = sent
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(tools, [("a", "found"), ("c", "Tool call denied: not now")]);

    // A completed run cannot be resumed again, and stays as it was.
    let again = resume(&app, &token, run_id, answers("sync")).await;
    assert_acp_error(&again, StatusCode::FORBIDDEN, "server_error");
    assert_eq!(again.body["data"]["code"], "run_not_awaiting");
    let after = app.get(&format!("/acp/runs/{run_id}"), &token).await;
    assert_eq!(after.body, done.body);
    // AAP sees both turns of the run in the session.
    let turns = app.get(&format!("/sessions/{session}/turns"), &token).await;
    assert_eq!(turns.body["turns"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_streamed_run_ends_at_awaiting_and_a_streamed_resume_carries_on() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let (_, uuid) = tool_session(&app, &token).await;
    server.push(both_calls());
    let (run_id, frames) = super::run_stream(
        &app,
        &token,
        json!({"agent_name": "gpt", "session_id": uuid, "input": [acp_user("look")]}),
    )
    .await;
    assert_eq!(
        types(&frames),
        [
            "run.created",
            "run.in-progress",
            "message.created",
            "message.part",
            "message.part",
            "message.completed",
            "generic",
            "run.awaiting"
        ]
    );
    assert_eq!(
        frames[6].data["generic"]["agentry"]["stop_reason"],
        "tool_use"
    );
    let awaiting = &frames[7].data["run"];
    assert_eq!(awaiting["status"], "awaiting");
    assert_eq!(
        awaiting["await_request"]["message"]["parts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    server.push(Reply::Stream(vec![text("Done."), finish("stop")]));
    let mut granted = answers("stream");
    granted["await_resume"]["message"]["parts"][1]["content"] = json!("{\"granted\": true}");
    let response = post_raw(&app, &format!("/acp/runs/{run_id}"), &token, &granted).await;
    assert_eq!(response.status(), StatusCode::OK);
    let resumed = SseReader::new(response).collect().await;
    assert_eq!(
        types(&resumed),
        [
            "run.in-progress",
            "message.created",
            "message.part",
            "message.completed",
            "message.created",
            "message.part",
            "message.completed",
            "generic",
            "run.completed"
        ]
    );
    // The granted server tool ran: its result is a trajectory part; then the model answers.
    let ran = &resumed[2].data["part"];
    assert_eq!(ran["metadata"]["tool_name"], "clock");
    let output: Value = serde_json::from_str(ran["content"].as_str().unwrap()).unwrap();
    assert_eq!(output["id"], "c");
    assert!(
        !output["output"]
            .as_str()
            .unwrap()
            .starts_with("Tool call denied")
    );
    assert_eq!(resumed[0].data["run"]["await_request"], Value::Null);
    let done = &resumed.last().unwrap().data["run"];
    assert_eq!(done["status"], "completed");
    assert!(output_text(done).ends_with("Done."));
    // Resumed frames continue the ids of the run's events.
    let last_before = frames.last().unwrap().seq();
    assert!(resumed.iter().all(|f| f.seq() > last_before));
    // The events list holds both turns.
    let listed = app.get(&format!("/acp/runs/{run_id}/events"), &token).await;
    assert_eq!(
        listed.body["events"].as_array().unwrap().len(),
        frames.len() + resumed.len()
    );
}

#[tokio::test]
async fn resuming_a_run_that_does_not_await_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let done = run(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [acp_user("hi")]}),
    )
    .await;
    let run_id = done.body["run_id"].as_str().unwrap();
    let events = app.get(&format!("/acp/runs/{run_id}/events"), &token).await;
    let refused = resume(
        &app,
        &token,
        run_id,
        json!({"await_resume": {"type": "message", "message": {"parts": [{"content": "x"}]}}}),
    )
    .await;
    assert_acp_error(&refused, StatusCode::FORBIDDEN, "server_error");
    assert_eq!(refused.body["data"]["code"], "run_not_awaiting");
    // A body that is not a resume is refused as such first, as the reference does.
    let invalid = resume(&app, &token, run_id, json!({"mode": "sync"})).await;
    assert_acp_error(&invalid, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    assert!(
        refused.body["message"]
            .as_str()
            .unwrap()
            .contains("has no await request")
    );
    assert_eq!(
        app.get(&format!("/acp/runs/{run_id}"), &token).await.body,
        done.body
    );
    assert_eq!(
        app.get(&format!("/acp/runs/{run_id}/events"), &token)
            .await
            .body,
        events.body
    );
}

#[tokio::test]
async fn a_run_whose_calls_are_answered_over_aap_awaits_no_more() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let (session, uuid) = tool_session(&app, &token).await;
    let awaiting = awaiting_run(&app, &server, &token, &uuid).await;
    assert_eq!(awaiting.body["status"], "awaiting", "{}", awaiting.text);
    let run_id = awaiting.body["run_id"].as_str().unwrap();
    let stopped = awaiting.body["await_request"]["message"]["completed_at"].clone();

    // The client answers over AAP instead.
    server.push(Reply::Stream(vec![text("Answered."), finish("stop")]));
    let answered = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [
                {"role": "tool", "toolCallId": "a", "content": "found"},
                {"role": "tool_permission", "toolCallId": "c", "granted": false}
            ]}),
        )
        .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    // The run ended when it stopped: completed, nothing awaited, no resume.
    let now = app.get(&format!("/acp/runs/{run_id}"), &token).await;
    assert_eq!(now.body["status"], "completed", "{}", now.text);
    assert_eq!(now.body["await_request"], Value::Null);
    assert_eq!(now.body["finished_at"], stopped);
    let refused = resume(&app, &token, run_id, answers("sync")).await;
    assert_acp_error(&refused, StatusCode::FORBIDDEN, "server_error");
    assert_eq!(refused.body["data"]["code"], "run_not_awaiting");
    assert_eq!(server.requests().len(), 2, "nothing ran again");
}

#[tokio::test]
async fn cancelling_an_awaiting_run_answers_its_calls_so_the_session_goes_on() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let (session_id, uuid) = tool_session(&app, &token).await;
    let awaiting = awaiting_run(&app, &server, &token, &uuid).await;
    let run_id = awaiting.body["run_id"].as_str().unwrap();
    let cancel = reply_of(
        post_raw(
            &app,
            &format!("/acp/runs/{run_id}/cancel"),
            &token,
            &json!({}),
        )
        .await,
    )
    .await;
    assert_eq!(cancel.status, StatusCode::ACCEPTED, "{}", cancel.text);
    assert_eq!(cancel.body["status"], "cancelled");
    assert_eq!(cancel.body["await_request"], Value::Null);
    assert!(cancel.body["finished_at"].is_string());
    let events = app.get(&format!("/acp/runs/{run_id}/events"), &token).await;
    let last = events.body["events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["type"], "run.cancelled");
    let again = reply_of(
        post_raw(
            &app,
            &format!("/acp/runs/{run_id}/cancel"),
            &token,
            &json!({}),
        )
        .await,
    )
    .await;
    assert_acp_error(&again, StatusCode::FORBIDDEN, "server_error");
    let resumed = resume(&app, &token, run_id, answers("sync")).await;
    assert_acp_error(&resumed, StatusCode::FORBIDDEN, "server_error");

    // The calls were answered: the session takes a new message.
    server.push(Reply::Stream(vec![text("Hello again."), finish("stop")]));
    let next = run(
        &app,
        &token,
        json!({"agent_name": "gpt", "session_id": uuid, "input": [acp_user("next")]}),
    )
    .await;
    assert_eq!(next.body["status"], "completed", "{}", next.text);
    let history = app
        .get(&format!("/sessions/{session_id}/history?type=full"), &token)
        .await;
    let tool_ids: Vec<&str> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(tool_ids, ["a", "c"]);
}

#[tokio::test]
async fn a_resume_waiting_for_a_turn_slot_is_in_progress_not_ended() {
    let server = ScriptedOpenAi::start().await;
    // One turn at a time, and an agent whose turn holds the slot until it is cancelled.
    let config = format!(
        r#"
[engine]
max_concurrent_turns = 1

[[agents]]
name = "gpt"
provider = "openai"
base_url = "{}"
model = "m"
max_retries = 0

[[agents.tools]]
name = "clock"

[[agents]]
name = "slow"
provider = "echo"
chunk_size = 1
delay_ms = 1000
"#,
        server.url
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    let (_, uuid) = tool_session(&app, &token).await;
    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("a"), Some("lookup"), "{}"),
        finish("tool_calls"),
    ]));
    let awaiting = run(
        &app,
        &token,
        json!({"agent_name": "gpt", "session_id": uuid, "input": [acp_user("look")]}),
    )
    .await;
    assert_eq!(awaiting.body["status"], "awaiting", "{}", awaiting.text);
    let run_id = awaiting.body["run_id"].as_str().unwrap();

    let busy = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let mut holder = app
        .stream_turn(
            &token,
            &busy,
            json!({"stream": "delta", "messages": [user("a long story")]}),
        )
        .await;
    let started = holder.next().await.unwrap();
    assert_eq!(started.event, "turn_start");
    let holder_turn = holder.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();

    // The resume is accepted and queued: the run goes on, it has not ended.
    server.push(Reply::Stream(vec![text("Got it."), finish("stop")]));
    let accepted = resume(
        &app,
        &token,
        run_id,
        json!({"await_resume": {"type": "message", "message": {"role": "user",
               "parts": [{"content": "the answer"}]}}, "mode": "async"}),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    assert_eq!(accepted.body["status"], "in-progress", "{}", accepted.text);
    let queued = app.get(&format!("/acp/runs/{run_id}"), &token).await;
    assert_eq!(queued.body["status"], "in-progress", "{}", queued.text);
    assert_eq!(queued.body["await_request"], Value::Null);
    assert_eq!(queued.body["finished_at"], Value::Null);

    // Once the slot is free, the resumed turn runs to its end.
    let cancelled = app
        .post(
            &format!("/sessions/{busy}/turns/{holder_turn}/cancel"),
            &token,
            json!({}),
        )
        .await;
    assert!(cancelled.status.is_success(), "{}", cancelled.text);
    let done = loop {
        let poll = app.get(&format!("/acp/runs/{run_id}"), &token).await;
        if poll.body["status"] == "completed" {
            break poll.body;
        }
        assert_eq!(poll.body["status"], "in-progress", "{}", poll.text);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(output_text(&done).ends_with("Got it."), "{done}");
}

#[tokio::test]
async fn an_async_resume_is_accepted_and_the_run_is_polled_to_its_end() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let (_, uuid) = tool_session(&app, &token).await;
    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("a"), Some("lookup"), "{}"),
        finish("tool_calls"),
    ]));
    let awaiting = run(
        &app,
        &token,
        json!({"agent_name": "gpt", "session_id": uuid, "input": [acp_user("look")]}),
    )
    .await;
    assert_eq!(awaiting.body["status"], "awaiting");
    let run_id = awaiting.body["run_id"].as_str().unwrap();
    server.push(Reply::Stream(vec![text("Got it."), finish("stop")]));
    // A plain message answers the one pending client call.
    let accepted = resume(
        &app,
        &token,
        run_id,
        json!({"await_resume": {"type": "message", "message": {"role": "user",
               "parts": [{"content": "the answer"}]}}, "mode": "async"}),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    assert_eq!(accepted.body["run_id"], run_id);
    let done = loop {
        let poll = app.get(&format!("/acp/runs/{run_id}"), &token).await;
        if poll.body["status"] == "completed" {
            break poll.body;
        }
        assert_ne!(poll.body["status"], "failed", "{}", poll.text);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(output_text(&done).ends_with("Got it."));
    let sent = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tool = sent.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["content"], "the answer");
}

#[tokio::test]
async fn a_failed_turn_is_a_failed_run_answered_with_200_as_the_reference_does() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    server.push(Reply::Status(
        400,
        json!({"error": {"message": "bad model"}}),
    ));
    let failed = run(
        &app,
        &token,
        json!({"agent_name": "gpt", "input": [acp_user("hi")]}),
    )
    .await;
    assert_eq!(failed.status, StatusCode::OK, "{}", failed.text);
    assert_eq!(failed.body["status"], "failed");
    assert_eq!(failed.body["error"]["code"], "server_error");
    assert_eq!(failed.body["error"]["data"]["code"], "provider_error");
    assert!(failed.body["error"]["message"].is_string());
    assert!(failed.body["finished_at"].is_string());
    let id = failed.body["run_id"].as_str().unwrap();
    let events = app.get(&format!("/acp/runs/{id}/events"), &token).await;
    let last = events.body["events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["type"], "run.failed");
    assert_eq!(last["run"], failed.body);
}

/// The rules every face with contexts shares: text answers the single pending client call
/// only when it is not empty and comes alone; a session is its agent's.
#[tokio::test]
async fn free_text_answers_the_single_client_call_only_when_not_empty_and_alone() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let (_, uuid) = tool_session(&app, &token).await;
    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("a"), Some("lookup"), "{}"),
        finish("tool_calls"),
    ]));
    let awaiting = run(
        &app,
        &token,
        json!({"agent_name": "gpt", "session_id": uuid, "input": [acp_user("look")]}),
    )
    .await;
    assert_eq!(awaiting.body["status"], "awaiting", "{}", awaiting.text);
    let run_id = awaiting.body["run_id"].as_str().unwrap();
    let with_parts = |parts: Value| json!({"await_resume": {"type": "message", "message": {"role": "user", "parts": parts}}});

    let empty = resume(&app, &token, run_id, with_parts(json!([{"content": ""}]))).await;
    assert_acp_error(&empty, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    assert_eq!(
        empty.body["data"]["field"], "await_resume.message",
        "{}",
        empty.text
    );
    let beside = resume(
        &app,
        &token,
        run_id,
        with_parts(json!([
            {"name": "/tool_results/a", "content": "found"},
            {"content": "and a remark"}
        ])),
    )
    .await;
    assert_acp_error(&beside, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    assert_eq!(
        beside.body["data"]["field"], "await_resume.message.parts[1]",
        "{}",
        beside.text
    );
    let still = app.get(&format!("/acp/runs/{run_id}"), &token).await;
    assert_eq!(still.body["status"], "awaiting", "refusals change nothing");

    server.push(Reply::Stream(vec![text("Got it."), finish("stop")]));
    let done = resume(&app, &token, run_id, with_parts(json!([{"content": "42"}]))).await;
    assert_eq!(done.body["status"], "completed", "{}", done.text);
    let sent = server.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tool = sent.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["content"], "42");
}

/// A session is its agent's: a run of another agent on it is refused, naming the field.
#[tokio::test]
async fn a_run_of_another_agent_on_a_session_is_refused() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let started = run(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [acp_user("hi")]}),
    )
    .await;
    assert_eq!(started.body["status"], "completed", "{}", started.text);
    let session = started.body["session_id"].as_str().unwrap();
    let elsewhere = run(
        &app,
        &token,
        json!({"agent_name": "tooly", "session_id": session, "input": [acp_user("hi")]}),
    )
    .await;
    assert_acp_error(
        &elsewhere,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_input",
    );
    assert_eq!(
        elsewhere.body["data"]["field"], "agent_name",
        "{}",
        elsewhere.text
    );
    assert!(
        elsewhere.body["message"]
            .as_str()
            .unwrap()
            .contains("belongs to agent `echo`"),
        "{}",
        elsewhere.text
    );
}
