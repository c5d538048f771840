//! Push notification configs: CRUD over both bindings and versions, and deliveries that
//! arrive signed, authorized and in order at a receiver the test starts.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{V1, message, rest, rpc_error, rpc_ok, send_immediately};
use crate::helpers::{TestApp, TestDb, spawn_app_on};
use crate::run_webhooks::Receiver;
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

async fn app(model: &ScriptedOpenAi) -> TestApp {
    let config = format!(
        "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1\"]\n\
         retry_initial_delay_ms = 50\nretry_max_delay_ms = 200\npoll_interval_ms = 100\n\
         [[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\n\
         model = \"m\"\napi_key = \"k\"\n\
         [[agents]]\nname = \"slow\"\nprovider = \"echo\"\nchunk_size = 1\ndelay_ms = 40\n",
        model.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

#[tokio::test]
async fn a_tasks_push_config_gets_each_stop_signed_authorized_and_in_order() {
    let model = ScriptedOpenAi::start().await;
    let app = app(&model).await;
    let (_, token) = app.new_tenant().await;
    let mut receiver = Receiver::start(&[503]);
    let lookup = json!({"name": "lookup", "description": "d", "parameters": {"type": "object"}});
    let context = app
        .create_session(&token, json!({"agent": {"name": "gpt"}, "tools": [lookup]}))
        .await;
    // The model waits for the gate, so the config is there before the task first stops.
    let gate = Arc::new(Notify::new());
    model.push(Reply::Gated(
        gate.clone(),
        Box::new(Reply::Stream(vec![
            tool_fragment(0, Some("a"), Some("lookup"), "{}"),
            finish("tool_calls"),
        ])),
    ));
    let mut sent = message("look it up");
    sent["contextId"] = json!(context);
    let task = send_immediately(&app, "gpt", &token, json!({"message": sent})).await;
    let id = task["id"].as_str().unwrap();
    let created = rpc_ok(
        &app,
        "gpt",
        &token,
        V1,
        "CreateTaskPushNotificationConfig",
        json!({
            "taskId": id, "id": "cfg-1", "url": receiver.url, "token": "tok-123",
            "authentication": {"scheme": "Bearer", "credentials": "receiver-secret"},
        }),
    )
    .await;
    assert_eq!(
        created,
        json!({"id": "cfg-1", "taskId": id, "url": receiver.url, "token": "tok-123",
               "authentication": {"scheme": "Bearer"}})
    );
    gate.notify_one();

    // The first attempt is refused (503): it is retried, and the order holds.
    let first = receiver.next().await;
    let retried = receiver.next().await;
    assert_eq!(first.id, retried.id, "a retry is the same message");
    assert_eq!(first.body, retried.body);
    retried.assert_signed_with("tok-123");
    assert_eq!(retried.authorization, "Bearer receiver-secret");
    assert_eq!(retried.a2a_token, "tok-123");
    assert_eq!(retried.content_type, "application/a2a+json");
    let update = &retried.json()["statusUpdate"];
    assert_eq!(update["taskId"], id);
    assert_eq!(update["contextId"], context.as_str());
    assert_eq!(
        update["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{update}"
    );

    model.push(Reply::Stream(vec![text("found"), finish("stop")]));
    let answer = json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER", "taskId": id,
        "parts": [{"data": {"toolResult": {"toolCallId": "a", "content": "x"}}}]}});
    let done = rpc_ok(&app, "gpt", &token, V1, "SendMessage", answer).await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let last = receiver.next().await;
    last.assert_signed_with("tok-123");
    assert_eq!(
        last.json()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(receiver.pending().is_empty(), "one message per stop");

    // The config is a webhook endpoint of the tenant's, with its deliveries.
    let endpoints = app.get("/webhooks", &token).await;
    let endpoint = endpoints.body["endpoints"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", endpoints.text))
        .iter()
        .find(|e| e["run_id"] == id)
        .unwrap_or_else(|| panic!("{}", endpoints.text))
        .clone();
    assert_eq!(endpoint["format"], "a2a/1.0");
    assert!(!endpoints.text.contains("tok-123") && !endpoints.text.contains("receiver-secret"));
    let deliveries = app
        .get(
            &format!("/webhooks/{}/deliveries", endpoint["id"].as_str().unwrap()),
            &token,
        )
        .await;
    assert!(
        deliveries.text.contains("run.status_changed"),
        "{}",
        deliveries.text
    );
}

#[tokio::test]
async fn push_configs_are_created_read_listed_and_deleted_over_both_bindings_and_versions() {
    let model = ScriptedOpenAi::start().await;
    let app = app(&model).await;
    let (_, token) = app.new_tenant().await;
    let (_, intruder) = app.new_tenant().await;
    let task = send_immediately(&app, "slow", &token, json!({"message": message("push me")})).await;
    let id = task["id"].as_str().unwrap();
    let url = "http://127.0.0.1:9/hook";

    // 1.0 JSON-RPC: no id means the task's id; no token means one is made and shown once.
    let created = rpc_ok(
        &app,
        "slow",
        &token,
        V1,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": url}),
    )
    .await;
    assert_eq!(created["id"], id);
    let made = created["token"].as_str().unwrap();
    assert!(made.len() >= 32, "{created}");
    let got = rpc_ok(
        &app,
        "slow",
        &token,
        V1,
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": id}),
    )
    .await;
    assert_eq!(
        got,
        json!({"id": id, "taskId": id, "url": url}),
        "the token is never shown again"
    );
    let listed = rpc_ok(
        &app,
        "slow",
        &token,
        V1,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    )
    .await;
    assert_eq!(listed, json!({"configs": [got], "nextPageToken": ""}));

    // 0.3 JSON-RPC shapes.
    let set = rpc_ok(
        &app,
        "slow",
        &token,
        None,
        "tasks/pushNotificationConfig/set",
        json!({
        "taskId": id, "pushNotificationConfig": {"id": "old", "url": url, "token": "t-03",
            "authentication": {"schemes": ["Basic"], "credentials": "dXNlcjpwdw=="}}}),
    )
    .await;
    assert_eq!(
        set,
        json!({"taskId": id, "pushNotificationConfig": {"id": "old", "url": url, "token": "t-03",
        "authentication": {"schemes": ["Basic"]}}})
    );
    let old = rpc_ok(
        &app,
        "slow",
        &token,
        None,
        "tasks/pushNotificationConfig/get",
        json!({"id": id, "pushNotificationConfigId": "old"}),
    )
    .await;
    assert_eq!(old["pushNotificationConfig"]["id"], "old");
    let old_list = rpc_ok(
        &app,
        "slow",
        &token,
        None,
        "tasks/pushNotificationConfig/list",
        json!({"id": id}),
    )
    .await;
    assert_eq!(
        old_list.as_array().unwrap().len(),
        2,
        "a bare array: {old_list}"
    );
    let deleted = rpc_ok(
        &app,
        "slow",
        &token,
        None,
        "tasks/pushNotificationConfig/delete",
        json!({"id": id, "pushNotificationConfigId": "old"}),
    )
    .await;
    assert_eq!(deleted, Value::Null);

    // REST 1.0.
    let path = format!("/a2a/slow/tasks/{id}/pushNotificationConfigs");
    let posted = rest(
        &app,
        Method::POST,
        &path,
        &token,
        V1,
        Some(json!({"id": "r", "url": url, "token": "t-rest"})),
    )
    .await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.text);
    assert_eq!(posted.body["token"], "t-rest");
    let one = rest(&app, Method::GET, &format!("{path}/r"), &token, V1, None).await;
    assert_eq!(one.body, json!({"id": "r", "taskId": id, "url": url}));
    let all = rest(&app, Method::GET, &path, &token, V1, None).await;
    assert_eq!(all.body["configs"].as_array().unwrap().len(), 2);
    let gone = rest(&app, Method::DELETE, &format!("{path}/r"), &token, V1, None).await;
    assert_eq!(
        (gone.status, gone.body.clone()),
        (StatusCode::OK, json!({}))
    );
    let again = rest(&app, Method::DELETE, &format!("{path}/r"), &token, V1, None).await;
    assert_eq!(again.status, StatusCode::OK, "delete is idempotent");
    let missing = rest(&app, Method::GET, &format!("{path}/r"), &token, V1, None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);

    // Refusals: a private address (SSRF guard), another tenant's task.
    let private = rpc_error(
        &app,
        "slow",
        &token,
        V1,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": "http://10.1.2.3/hook"}),
    )
    .await;
    assert_eq!(private["code"], -32602, "{private}");
    for (method, params) in [
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "url": url}),
        ),
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": id}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": id}),
        ),
    ] {
        let error = rpc_error(&app, "slow", &intruder, V1, method, params).await;
        assert_eq!(error["code"], -32001, "{method}: {error}");
    }
    let foreign = rest(&app, Method::GET, &path, &intruder, V1, None).await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND);
}
