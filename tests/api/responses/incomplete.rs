//! A response cut short is `incomplete` with `incomplete_details.reason`, streamed and not:
//! by the model's length stop (`max_output_tokens`) or by the agent's step limit
//! (`max_steps`).

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::{DONE, app_with_model, create, names, open_stream};
use crate::helpers::{TestDb, spawn_app_on};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment, usage};

fn cut_short(model: &ScriptedOpenAi) {
    model.push(Reply::Stream(vec![
        text("The answer is"),
        finish("length"),
        usage(5, 16),
    ]));
}

fn assert_incomplete(response: &Value, reason: &str) {
    assert_eq!(response["status"], "incomplete", "{response}");
    assert_eq!(response["incomplete_details"], json!({"reason": reason}));
    assert_eq!(response["error"], Value::Null);
    assert_eq!(response["completed_at"], Value::Null);
}

#[tokio::test]
async fn a_length_stop_leaves_the_response_incomplete_streamed_and_not() {
    let model = ScriptedOpenAi::start().await;
    let app = app_with_model(&model).await;
    let (_, token) = app.new_tenant().await;

    cut_short(&model);
    let reply = create(&app, &token, json!({"model": "gpt", "input": "Tell me"})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_incomplete(&reply.body, "max_output_tokens");
    assert_eq!(
        reply.body["output"][0]["content"][0]["text"],
        "The answer is"
    );
    assert_eq!(reply.body["usage"]["output_tokens"], 16);

    cut_short(&model);
    let events = open_stream(&app, &token, json!({"model": "gpt", "input": "Tell me"}))
        .await
        .collect()
        .await;
    let n = events.len();
    assert_eq!(
        names(&events)[n - 3..],
        ["response.output_item.done", "response.incomplete", DONE]
    );
    assert_eq!(
        events[n - 3].data["item"]["content"][0]["text"],
        "The answer is"
    );
    let ended = &events[n - 2].data["response"];
    assert_incomplete(ended, "max_output_tokens");
    let id = ended["id"].as_str().unwrap();
    assert_eq!(
        &app.get(&format!("/v1/responses/{id}"), &token).await.body,
        ended
    );
}

#[tokio::test]
async fn the_agents_step_limit_leaves_the_response_incomplete_streamed_and_not() {
    let model = ScriptedOpenAi::start().await;
    let config = format!(
        r#"
[[agents]]
name = "short"
provider = "openai"
base_url = "{}"
model = "m"
timeout_seconds = 5
max_retries = 0
max_steps = 1
"#,
        model.url
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    // A call of a tool the session does not have: the turn answers it and steps again,
    // past its one step.
    let keeps_calling = || {
        model.push(Reply::Stream(vec![
            text("Let me look."),
            tool_fragment(0, Some("call_1"), Some("nowhere"), "{}"),
            finish("tool_calls"),
            usage(5, 5),
        ]))
    };

    keeps_calling();
    let reply = create(&app, &token, json!({"model": "short", "input": "Go"})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_incomplete(&reply.body, "max_steps");
    assert_eq!(
        reply.body["output"][0]["content"][0]["text"],
        "Let me look."
    );

    keeps_calling();
    let events = open_stream(&app, &token, json!({"model": "short", "input": "Go"}))
        .await
        .collect()
        .await;
    let n = events.len();
    assert_eq!(names(&events)[n - 2..], ["response.incomplete", DONE]);
    assert_incomplete(&events[n - 2].data["response"], "max_steps");
    assert!(
        !names(&events).contains(&"response.failed"),
        "{:?}",
        names(&events)
    );
}
