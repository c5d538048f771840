//! What the A2A conformance kit checks beyond the scenarios: proto field names read as their
//! JSON names on every operation, push configs for hosts DNS cannot resolve (yet), and the
//! content types of requests and answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{V1, artifact_text, message_id, rest, rpc_error, rpc_ok};
use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on};

#[tokio::test]
async fn proto_field_names_are_read_on_every_operation() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    // SendMessage: the message's and the configuration's fields by their proto names.
    let sent = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        json!({"message": {"message_id": message_id(), "role": "ROLE_USER",
            "parts": [{"text": "snake", "media_type": "text/plain"}]},
            "configuration": {"accepted_output_modes": ["text/plain"], "history_length": 1}}),
    )
    .await;
    let task = sent["task"]["id"].as_str().unwrap().to_owned();
    let context = sent["task"]["contextId"].as_str().unwrap().to_owned();
    assert_eq!(artifact_text(&sent["task"]), "snake");
    // A follow-up in the context, named by `context_id`.
    let followed = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        json!({"message": {"message_id": message_id(), "role": "ROLE_USER", "context_id": context,
            "parts": [{"text": "again"}]}}),
    )
    .await;
    assert_eq!(followed["task"]["contextId"], context.as_str());
    // GetTask and ListTasks.
    let got = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "GetTask",
        json!({"id": task, "history_length": 0}),
    )
    .await;
    assert_eq!(got["id"], task.as_str());
    assert!(got.get("history").is_none_or(|h| h == &json!([])), "{got}");
    let listed = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"context_id": context, "page_size": 1, "include_artifacts": false}),
    )
    .await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1, "{listed}");
    assert_ne!(listed["nextPageToken"], "", "{listed}");
    let next = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"context_id": context, "page_size": 1, "page_token": listed["nextPageToken"]}),
    )
    .await;
    assert_eq!(next["tasks"][0]["id"], task.as_str(), "{next}");
    // The push config operations, named by `task_id`.
    let created = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "CreateTaskPushNotificationConfig",
        json!({"task_id": task, "id": "c1", "url": "https://example.com/hook"}),
    )
    .await;
    assert_eq!(created["taskId"], task.as_str(), "{created}");
    let read = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "GetTaskPushNotificationConfig",
        json!({"task_id": task, "id": "c1"}),
    )
    .await;
    assert_eq!(read["url"], "https://example.com/hook");
    let configs = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTaskPushNotificationConfigs",
        json!({"task_id": task}),
    )
    .await;
    assert_eq!(configs["configs"].as_array().unwrap().len(), 1, "{configs}");
    rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "DeleteTaskPushNotificationConfig",
        json!({"task_id": task, "id": "c1"}),
    )
    .await;
    // CancelTask of an ended task: refused as such, so its id was read.
    let ended = rpc_error(&app, "echo", &token, V1, "CancelTask", json!({"id": task})).await;
    assert_eq!(ended["code"], -32002, "{ended}");
    // 0.3's methods too.
    let old = rpc_ok(
        &app,
        "echo",
        &token,
        None,
        "message/send",
        json!({"message": {"kind": "message", "message_id": message_id(), "role": "user",
            "parts": [{"kind": "text", "text": "old"}]}}),
    )
    .await;
    let old_task = old["id"].as_str().unwrap().to_owned();
    rpc_ok(
        &app,
        "echo",
        &token,
        None,
        "tasks/pushNotificationConfig/set",
        json!({"task_id": old_task, "push_notification_config": {"id": "c2",
            "url": "https://example.com/old"}}),
    )
    .await;
    let old_read = rpc_ok(
        &app,
        "echo",
        &token,
        None,
        "tasks/pushNotificationConfig/get",
        json!({"id": old_task, "push_notification_config_id": "c2"}),
    )
    .await;
    assert_eq!(
        old_read["pushNotificationConfig"]["url"], "https://example.com/old",
        "{old_read}"
    );
    // HTTP+JSON: a query's names and a body's.
    let page = rest(
        &app,
        Method::GET,
        &format!("/a2a/echo/tasks?context_id={context}&page_size=1"),
        &token,
        V1,
        None,
    )
    .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert_eq!(page.body["tasks"].as_array().unwrap().len(), 1);
    let sent = rest(
        &app,
        Method::POST,
        "/a2a/echo/message:send",
        &token,
        V1,
        Some(
            json!({"message": {"message_id": message_id(), "role": "ROLE_USER",
            "context_id": context, "parts": [{"text": "rest"}]}}),
        ),
    )
    .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.text);
    assert_eq!(sent.body["task"]["contextId"], context.as_str());
    // A field sent under both names is refused, naming it.
    let twice = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "GetTask",
        json!({"id": task, "history_length": 0, "historyLength": 1}),
    )
    .await;
    assert_eq!(twice["code"], -32602, "{twice}");
    assert!(
        twice["message"].as_str().unwrap().contains("historyLength"),
        "{twice}"
    );
}

/// Polls `path` until `done` holds of its body.
async fn poll(app: &TestApp, token: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = app.get(path, token).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        if done(&reply.body) {
            return reply.body;
        }
        assert!(Instant::now() < deadline, "never reached: {}", reply.text);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_push_config_for_a_host_dns_cannot_resolve_is_created_and_its_delivery_says_why() {
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[webhooks]\nretry_initial_delay_ms = 50\nretry_max_delay_ms = 200\npoll_interval_ms = 100\n\
         [[agents]]\nname = \"slower\"\nprovider = \"echo\"\nchunk_size = 1\ndelay_ms = 100\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    // About 3 s of work: the config is in place before the task stops.
    let sent = rpc_ok(
        &app,
        "slower",
        &token,
        V1,
        "SendMessage",
        json!({"message": {"messageId": message_id(), "role": "ROLE_USER",
            "parts": [{"text": "spelled out slowly, one by one"}]},
            "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task = sent["task"]["id"].as_str().unwrap().to_owned();
    let url = "https://hooks.agentry-test.invalid/a2a";
    let created = rpc_ok(
        &app,
        "slower",
        &token,
        V1,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "nowhere", "url": url}),
    )
    .await;
    assert_eq!(created["url"], url, "{created}");
    // An address is still checked at once, without DNS.
    for internal in [
        "https://10.1.2.3/hook",
        "https://localhost/hook",
        "https://[::1]/hook",
    ] {
        let refused = rpc_error(
            &app,
            "slower",
            &token,
            V1,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "id": "inside", "url": internal}),
        )
        .await;
        assert_eq!(refused["code"], -32602, "{internal}: {refused}");
        assert!(
            refused["message"]
                .as_str()
                .unwrap()
                .contains("internal address"),
            "{refused}"
        );
    }
    let endpoints = app.get("/webhooks", &token).await;
    let endpoint = endpoints.body["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["run_id"] == task.as_str())
        .unwrap_or_else(|| panic!("{}", endpoints.text))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deliveries = poll(
        &app,
        &token,
        &format!("/webhooks/{endpoint}/deliveries"),
        |b| b["deliveries"][0]["attempts"].as_i64() >= Some(1),
    )
    .await;
    let error = deliveries["deliveries"][0]["last_error"].as_str().unwrap();
    assert!(error.contains("cannot be resolved"), "{error}");
    assert!(deliveries["deliveries"][0]["last_status"].is_null());
}

/// A raw JSON-RPC request with the given content type.
async fn rpc_as(
    app: &TestApp,
    token: &str,
    content_type: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut request = app
        .client
        .post(app.url("/a2a/echo"))
        .bearer_auth(token)
        .header("A2A-Version", "1.0")
        .body(body.to_string());
    if let Some(content_type) = content_type {
        request = request.header("Content-Type", content_type);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn answers_are_application_json_unless_the_request_used_a2a_json_and_rpc_must_be_json() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let send = json!({"jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params":
        {"message": {"messageId": message_id(), "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    for (sent, answered) in [
        (Some("application/json"), "application/json"),
        (None, "application/json"),
        (Some("application/a2a+json"), "application/a2a+json"),
        (
            Some("application/a2a+json; charset=utf-8"),
            "application/a2a+json",
        ),
    ] {
        let mut body = send.clone();
        body["params"]["message"]["messageId"] = json!(message_id());
        let response = rpc_as(&app, &token, sent, &body).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], answered, "{sent:?}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            body["result"]["task"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
    // Not JSON: ContentTypeNotSupported, answering the request's id.
    for sent in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
    ] {
        let response = rpc_as(&app, &token, Some(sent), &send).await;
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["id"], 9, "{body}");
        assert_eq!(body["error"]["code"], -32005, "{sent}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(sent),
            "{body}"
        );
    }
    // An error answers in the type asked for too.
    let missing = rpc_as(
        &app,
        &token,
        Some("application/a2a+json"),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "run_nope"}}),
    )
    .await;
    assert_eq!(missing.headers()["content-type"], "application/a2a+json");
    // HTTP+JSON, 1.0: the same rule, by Content-Type or Accept.
    let plain = rest(&app, Method::GET, "/a2a/echo/tasks", &token, V1, None).await;
    assert_eq!(plain.status, StatusCode::OK, "{}", plain.text);
    assert_eq!(plain.headers["content-type"], "application/json");
    for (header, status) in [
        ("/a2a/echo/tasks", StatusCode::OK),
        ("/a2a/echo/tasks/run_nope", StatusCode::NOT_FOUND),
    ] {
        let asked = app
            .client
            .get(app.url(header))
            .bearer_auth(&token)
            .header("A2A-Version", "1.0")
            .header("Accept", "application/a2a+json")
            .send()
            .await
            .unwrap();
        assert_eq!(asked.status(), status);
        assert_eq!(
            asked.headers()["content-type"],
            "application/a2a+json",
            "{header}"
        );
    }
}

#[tokio::test]
async fn a_strict_card_leaves_out_0_3_fields_but_keeps_its_0_3_interfaces() {
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[a2a]\ncard_v03_fields = false\n",
    )
    .await;
    let card = app
        .request(
            Method::GET,
            "/a2a/echo/.well-known/agent-card.json",
            None,
            None,
        )
        .await
        .body;
    for field in [
        "url",
        "preferredTransport",
        "protocolVersion",
        "additionalInterfaces",
        "security",
        "supportsAuthenticatedExtendedCard",
    ] {
        assert!(card.get(field).is_none(), "{field}: {card}");
    }
    assert_eq!(
        card["securitySchemes"]["bearer"],
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}})
    );
    let versions: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["protocolVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["1.0", "1.0", "0.3", "0.3"]);
}
