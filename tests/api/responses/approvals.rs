//! Server tools waiting for the client's permission: an `mcp_approval_request` output item
//! (streamed as any item), answered by an `mcp_approval_response` input item of the next
//! response, approved (the tool runs) or denied (the model reads the reason).

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::{DONE, create, names, open_stream};
use crate::helpers::{TestApp, TestDb, spawn_app_on};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

/// `gpt` with the server tool `clock`, which asks permission unless trusted.
async fn app_with_clock(server: &ScriptedOpenAi) -> TestApp {
    let config = format!(
        "[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
         timeout_seconds = 5\nmax_retries = 0\n\n[[agents.tools]]\nname = \"clock\"\n",
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

/// A conversation (an AAP session) with `clock` enabled, untrusted.
async fn clock_conversation(app: &TestApp, token: &str) -> String {
    app.create_session(
        token,
        json!({"agent": {"name": "gpt", "tools": [{"name": "clock"}]}}),
    )
    .await
}

/// A response in a new clock conversation that stops on its approval request (`mcpr_c`).
async fn ask_for_the_time(server: &ScriptedOpenAi, app: &TestApp, token: &str) -> Value {
    let conversation = clock_conversation(app, token).await;
    server.push(clock_call());
    let asked = create(
        app,
        token,
        json!({"model": "gpt", "conversation": conversation, "input": "time?"}),
    )
    .await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.body);
    assert_eq!(asked.body["status"], "completed", "{}", asked.body);
    assert_eq!(asked.body["output"], json!([approval_request()]));
    asked.body
}

fn clock_call() -> Reply {
    Reply::Stream(vec![
        tool_fragment(0, Some("c"), Some("clock"), "{}"),
        finish("tool_calls"),
    ])
}

fn approval_request() -> Value {
    json!({"type": "mcp_approval_request", "id": "mcpr_c", "server_label": "agentry",
           "name": "clock", "arguments": "{}"})
}

fn answer(approve: bool, reason: Option<&str>) -> Value {
    let mut item = json!({"type": "mcp_approval_response", "approval_request_id": "mcpr_c",
                          "approve": approve});
    if let Some(reason) = reason {
        item["reason"] = json!(reason);
    }
    item
}

/// The tool message the model read last.
fn tool_message_seen(server: &ScriptedOpenAi) -> String {
    let body = server.requests().last().unwrap().body.clone();
    let tool = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .cloned()
        .expect("a tool message");
    tool["content"].as_str().unwrap().to_owned()
}

fn output_text(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap().clone())
        .map(|p| p["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_approved_server_tool_runs_and_its_result_reaches_the_model() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_clock(&server).await;
    let (_, token) = app.new_tenant().await;
    let asked = ask_for_the_time(&server, &app, &token).await;

    server.push(Reply::Stream(vec![text("Noon."), finish("stop")]));
    let approved = create(
        &app,
        &token,
        json!({"model": "gpt", "previous_response_id": asked["id"],
               "input": [answer(true, None)]}),
    )
    .await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.body);
    assert_eq!(approved.body["status"], "completed");
    assert_eq!(output_text(&approved.body), "Noon.");
    let seen = tool_message_seen(&server);
    assert!(!seen.contains("denied"), "the clock ran: {seen}");
}

#[tokio::test]
async fn a_streamed_approval_request_is_an_item_and_a_denial_reaches_the_model() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_clock(&server).await;
    let (_, token) = app.new_tenant().await;
    let conversation = clock_conversation(&app, &token).await;

    server.push(clock_call());
    let events = open_stream(
        &app,
        &token,
        json!({"model": "gpt", "conversation": conversation, "input": "time?"}),
    )
    .await
    .collect()
    .await;
    assert_eq!(
        names(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed",
            DONE,
        ]
    );
    for event in &events[2..4] {
        assert_eq!(event.data["output_index"], 0);
        assert_eq!(event.data["item"], approval_request());
    }
    let completed = &events[4].data["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"], json!([approval_request()]));

    server.push(Reply::Stream(vec![text("No clock then."), finish("stop")]));
    let events = open_stream(
        &app,
        &token,
        json!({"model": "gpt", "conversation": conversation,
               "input": [answer(false, Some("not now"))]}),
    )
    .await
    .collect()
    .await;
    let done = events
        .iter()
        .find(|e| e.event == "response.completed")
        .expect("completed");
    assert_eq!(output_text(&done.data["response"]), "No clock then.");
    assert_eq!(tool_message_seen(&server), "Tool call denied: not now");
}

#[tokio::test]
async fn an_answer_to_no_waiting_approval_request_is_refused_naming_its_item() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_clock(&server).await;
    let (_, token) = app.new_tenant().await;
    let asked = ask_for_the_time(&server, &app, &token).await;

    for (input, param) in [
        (
            json!([{"type": "mcp_approval_response", "approval_request_id": "mcpr_zz",
                    "approve": true}]),
            "input[0].approval_request_id",
        ),
        (
            json!([{"type": "mcp_approval_response", "approval_request_id": "c",
                    "approve": true}]),
            "input[0].approval_request_id",
        ),
        (
            json!([answer(true, None), answer(false, None)]),
            "input[1].approval_request_id",
        ),
        (
            json!([{"type": "mcp_approval_response", "approval_request_id": "mcpr_c"}]),
            "input[0].approve",
        ),
    ] {
        let reply = create(
            &app,
            &token,
            json!({"model": "gpt", "previous_response_id": asked["id"], "input": input}),
        )
        .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        assert_eq!(reply.body["error"]["type"], "invalid_request_error");
        assert_eq!(reply.body["error"]["param"], param, "{}", reply.body);
    }
    // A conversation with no call waiting refuses an answer too.
    let fresh = create(
        &app,
        &token,
        json!({"model": "gpt", "input": [answer(true, None)]}),
    )
    .await;
    assert_eq!(fresh.status, StatusCode::BAD_REQUEST, "{}", fresh.body);
    assert_eq!(fresh.body["error"]["param"], "input[0].approval_request_id");
    // The call still waits: answering it now works.
    server.push(Reply::Stream(vec![text("Noon."), finish("stop")]));
    let approved = create(
        &app,
        &token,
        json!({"model": "gpt", "previous_response_id": asked["id"],
               "input": [answer(true, None)]}),
    )
    .await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.body);
    assert_eq!(output_text(&approved.body), "Noon.");
}
