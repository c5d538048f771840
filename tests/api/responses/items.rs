//! `POST /v1/conversations/{id}/items`: messages added to a conversation's history between
//! responses, read back on every face and by the next response's model; refused while a
//! response runs or function calls wait, and naming the item at fault. Deleting an item
//! stays refused.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::{app_with_model, create};
use crate::helpers::{Reply, TestApp, TestDb, spawn_app, spawn_app_on};
use crate::scripted::{Reply as ModelReply, ScriptedOpenAi, finish, text, tool_fragment, usage};

fn assert_error(reply: &Reply, status: StatusCode, code: &str, param: Option<&str>) {
    assert_eq!(reply.status, status, "{}", reply.text);
    let error = &reply.body["error"];
    assert_eq!(error["type"], "invalid_request_error", "{}", reply.text);
    assert_eq!(error["code"], code, "{}", reply.text);
    assert_eq!(error["param"], param.map_or(Value::Null, |p| json!(p)));
    assert!(!error["message"].as_str().unwrap().is_empty());
}

async fn conversation(app: &TestApp, token: &str, model: &str) -> String {
    let made = app
        .post("/v1/conversations", token, json!({"model": model}))
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.text);
    made.body["id"].as_str().unwrap().to_owned()
}

fn hex(conv: &str) -> &str {
    conv.strip_prefix("conv_").unwrap()
}

#[tokio::test]
async fn added_items_are_the_conversations_history_on_every_face_and_the_models_next_input() {
    let model = ScriptedOpenAi::start().await;
    model.push(ModelReply::Stream(vec![
        text("Forty-two."),
        finish("stop"),
        usage(10, 2),
    ]));
    let app = app_with_model(&model).await;
    let (_, token) = app.new_tenant().await;
    let conv = conversation(&app, &token, "gpt").await;
    let hex = hex(&conv);
    let items = format!("/v1/conversations/{conv}/items");

    let added = app
        .post(
            &items,
            &token,
            json!({"items": [
                {"role": "developer", "content": "Answer in words."},
                {"type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": "Remember 42."}]},
                {"role": "assistant", "content": "Noted."},
            ]}),
        )
        .await;
    assert_eq!(added.status, StatusCode::OK, "{}", added.text);
    let ids: Vec<String> = (0..3).map(|n| format!("msg_{hex}_{n}")).collect();
    assert_eq!(added.body["object"], "list");
    assert_eq!(added.body["has_more"], false);
    assert_eq!(added.body["first_id"], ids[0].as_str());
    assert_eq!(added.body["last_id"], ids[2].as_str());
    assert_eq!(
        added.body["data"][1],
        json!({"type": "message", "id": ids[1], "status": "completed", "role": "user",
               "content": [{"type": "input_text", "text": "Remember 42."}]})
    );

    // Read back here, one by one, and over AAP.
    let listed = app.get(&format!("{items}?order=asc"), &token).await;
    assert_eq!(listed.body["data"], added.body["data"], "{}", listed.text);
    let one = app.get(&format!("{items}/{}", ids[2]), &token).await;
    assert_eq!(one.body, added.body["data"][2]);
    let session = format!("sess_{hex}");
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let full = history.body["history"]["full"].as_array().unwrap();
    let roles: Vec<&str> = full.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant"], "{}", history.text);

    // More items follow them; then the next response's model reads them all.
    let more = app
        .post(
            &items,
            &token,
            json!({"items": [{"role": "user", "content": "And 7."}]}),
        )
        .await;
    assert_eq!(
        more.body["first_id"],
        format!("msg_{hex}_3"),
        "{}",
        more.text
    );
    let answered = create(
        &app,
        &token,
        json!({"model": "gpt", "input": "What number?", "conversation": conv}),
    )
    .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    let sent = &model.requests()[0].body["messages"];
    let contents: Vec<Value> = sent
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system" || m["content"] == "Answer in words.")
        .map(|m| json!([m["role"], m["content"]]))
        .collect();
    assert_eq!(
        contents,
        [
            json!(["system", "Answer in words."]),
            json!(["user", "Remember 42."]),
            json!(["assistant", "Noted."]),
            json!(["user", "And 7."]),
            json!(["user", "What number?"]),
        ],
        "{sent}"
    );
    // The added items are no response's input.
    let id = answered.body["id"].as_str().unwrap();
    let brought = app
        .get(&format!("/v1/responses/{id}/input_items"), &token)
        .await;
    assert_eq!(brought.body["data"].as_array().unwrap().len(), 1);
    let all = app.get(&format!("{items}?order=asc"), &token).await;
    assert_eq!(
        all.body["data"].as_array().unwrap().len(),
        6,
        "{}",
        all.text
    );
}

#[tokio::test]
async fn items_are_refused_while_a_response_runs_or_function_calls_wait() {
    let model = ScriptedOpenAi::start().await;
    model.push(ModelReply::Stream(vec![
        tool_fragment(0, Some("call_1"), Some("lookup"), "{}"),
        finish("tool_calls"),
        usage(5, 5),
    ]));
    model.push(ModelReply::Stream(vec![
        text("Done."),
        finish("stop"),
        usage(5, 1),
    ]));
    let config = format!(
        r#"
[[agents]]
name = "slow"
provider = "echo"
chunk_size = 1
delay_ms = 50

[[agents]]
name = "gpt"
provider = "openai"
base_url = "{}"
model = "m"
timeout_seconds = 5
max_retries = 0
"#,
        model.url
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    let item = json!({"items": [{"role": "user", "content": "an aside"}]});

    // A response running.
    let conv = conversation(&app, &token, "slow").await;
    let running = create(
        &app,
        &token,
        json!({"model": "slow", "input": "s".repeat(200), "conversation": conv,
               "background": true}),
    )
    .await;
    let id = running.body["id"].as_str().unwrap().to_owned();
    let items = format!("/v1/conversations/{conv}/items");
    let busy = app.post(&items, &token, item.clone()).await;
    assert_error(&busy, StatusCode::CONFLICT, "session_busy", None);
    let cancelled = app
        .post(&format!("/v1/responses/{id}/cancel"), &token, json!({}))
        .await;
    assert_eq!(cancelled.body["status"], "cancelled", "{}", cancelled.text);
    let after = app.post(&items, &token, item.clone()).await;
    assert_eq!(after.status, StatusCode::OK, "{}", after.text);

    // A function call waiting for its output.
    let tools = json!([{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]);
    let conv = conversation(&app, &token, "gpt").await;
    let asked = create(
        &app,
        &token,
        json!({"model": "gpt", "input": "look it up", "tools": tools, "conversation": conv}),
    )
    .await;
    assert_eq!(
        asked.body["output"][0]["type"], "function_call",
        "{}",
        asked.text
    );
    let items = format!("/v1/conversations/{conv}/items");
    let waiting = app.post(&items, &token, item.clone()).await;
    assert_error(&waiting, StatusCode::CONFLICT, "conflict", None);
    assert!(waiting.text.contains("call_1"), "{}", waiting.text);
    let before = app.get(&items, &token).await.body["data"]
        .as_array()
        .unwrap()
        .len();
    let answered = create(
        &app,
        &token,
        json!({"model": "gpt", "conversation": conv,
               "input": [{"type": "function_call_output", "call_id": "call_1", "output": "x"}]}),
    )
    .await;
    assert_eq!(answered.body["status"], "completed", "{}", answered.text);
    let added = app.post(&items, &token, item).await;
    assert_eq!(added.status, StatusCode::OK, "{}", added.text);
    assert_eq!(
        app.get(&items, &token).await.body["data"]
            .as_array()
            .unwrap()
            .len(),
        before + 3,
        "the output, the answer and the item"
    );
}

#[tokio::test]
async fn a_bad_item_is_refused_naming_it_and_nothing_is_added() {
    let config = r#"
[[agents]]
name = "docs"
provider = "echo"

[[agents.input_schema]]
content_type = "text/plain"
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;
    let conv = conversation(&app, &token, "docs").await;
    let items = format!("/v1/conversations/{conv}/items");
    let image = json!({"type": "input_image", "image_url": "data:image/png;base64,aGk="});
    for (body, param) in [
        (json!({}), "items"),
        (json!({"items": []}), "items"),
        (json!({"items": [{"role": "user"}]}), "items[0].content"),
        (
            json!({"items": [{"type": "item_reference", "id": "msg_1"}]}),
            "items[0].type",
        ),
        (
            json!({"items": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]}),
            "items[0].tool_call_id",
        ),
        (
            // The input schema takes text only; the second item's second part is an image.
            json!({"items": [
                {"role": "user", "content": "fine"},
                {"type": "reasoning", "summary": []},
                {"role": "user", "content": [{"type": "input_text", "text": "see"}, image]},
            ]}),
            "items[2].content[1]",
        ),
    ] {
        let refused = app.post(&items, &token, body.clone()).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            refused.text
        );
        let named = refused.body["error"]["param"].as_str().unwrap_or_default();
        assert!(named.starts_with(param), "{body}: {}", refused.text);
    }
    let listed = app.get(&items, &token).await;
    assert_eq!(listed.body["data"], json!([]), "{}", listed.text);

    // Deleting an item stays refused, naming why.
    let added = app
        .post(
            &items,
            &token,
            json!({"items": [{"role": "user", "content": "keep me"}]}),
        )
        .await;
    let first = added.body["first_id"].as_str().unwrap();
    let removed = app.delete(&format!("{items}/{first}"), &token).await;
    assert_error(
        &removed,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        None,
    );
    assert!(removed.text.contains("place in the"), "{}", removed.text);
    assert_eq!(app.get(&items, &token).await.body["data"][0]["id"], first);
}

#[tokio::test]
async fn another_tenant_cannot_add_items() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let conv = conversation(&app, &token, "echo").await;
    let items = format!("/v1/conversations/{conv}/items");
    let refused = app
        .post(
            &items,
            &other,
            json!({"items": [{"role": "user", "content": "intruder"}]}),
        )
        .await;
    assert_error(&refused, StatusCode::NOT_FOUND, "not_found", None);
    assert_eq!(app.get(&items, &token).await.body["data"], json!([]));
}
