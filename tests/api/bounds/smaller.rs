//! Small bounds: JSON-RPC ids, timestamps a database can store, NUL in config ids, the
//! address classification, a refused push config, the card's URLs and the memory a
//! credential's hashing keeps.

use base64::Engine;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::a2a::{V1, message, rest, rpc, rpc_error, rpc_ok, send};
use crate::hardening::app_with;
use crate::helpers::spawn_app;

#[tokio::test]
async fn a_json_rpc_id_over_256_bytes_is_an_invalid_request_without_the_id() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let call = |id: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "GetTask",
                          "params": {"id": "nope"}});
        app.client
            .post(app.url("/a2a/echo"))
            .bearer_auth(&token)
            .header("A2A-Version", "1.0")
            .json(&body)
            .send()
    };
    let long: String = "x".repeat(257);
    let reply: Value = call(json!(long)).await.unwrap().json().await.unwrap();
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert_eq!(reply["id"], Value::Null, "{reply}");
    assert!(
        reply["error"]["message"].as_str().unwrap().contains("256"),
        "{reply}"
    );

    // 256 bytes is still an id, echoed.
    let fits: String = "y".repeat(256);
    let reply: Value = call(json!(fits)).await.unwrap().json().await.unwrap();
    assert_eq!(reply["id"], json!(fits));
    assert_eq!(reply["error"]["code"], -32001, "task not found: {reply}");
}

#[tokio::test]
async fn a_far_negative_page_token_and_usage_range_are_refused_with_400() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    for text in ["one", "two"] {
        send(&app, "echo", &token, text).await;
    }
    let page = rest(
        &app,
        Method::GET,
        "/a2a/echo/tasks?pageSize=1",
        &token,
        V1,
        None,
    )
    .await;
    let next = page.body["nextPageToken"].as_str().unwrap();
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let raw = String::from_utf8(engine.decode(next).unwrap()).unwrap();
    let (_, run) = raw.split_once(':').unwrap();
    for micros in ["-3000000000000000000", "300000000000000000"] {
        let forged = engine.encode(format!("{micros}:{run}"));
        let reply = rest(
            &app,
            Method::GET,
            &format!("/a2a/echo/tasks?pageToken={forged}"),
            &token,
            V1,
            None,
        )
        .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
        let error = rpc_error(
            &app,
            "echo",
            &token,
            V1,
            "ListTasks",
            json!({"pageToken": forged}),
        )
        .await;
        assert_eq!(error["code"], -32602, "{error}");
    }
    let error = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"statusTimestampAfter": "0000-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(error["code"], -32602, "{error}");

    for query in [
        "from=-9999-01-01T00:00:00Z",
        "from=2020-01-01T00:00:00Z&to=+20000-01-01T00:00:00Z",
    ] {
        let reply = app.get(&format!("/usage?{query}"), &token).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "invalid_query");
    }
    let tenant_usage = app.get("/usage?from=0001-01-01T00:00:00Z", &token).await;
    assert_eq!(tenant_usage.status, StatusCode::OK, "{}", tenant_usage.text);
}

#[tokio::test]
async fn a_nul_in_a_push_config_id_is_not_found_on_get_and_nothing_on_delete() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let task = send(&app, "echo", &token, "hi").await;
    let id = task["id"].as_str().unwrap();
    let error = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": "a\u{0}b"}),
    )
    .await;
    assert_eq!(error["code"], -32001, "{error}");
    let deleted = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "DeleteTaskPushNotificationConfig",
        json!({"taskId": id, "id": "a\u{0}b"}),
    )
    .await;
    assert_eq!(deleted, Value::Null);
    let path = format!("/a2a/echo/tasks/{id}/pushNotificationConfigs/a%00b");
    let got = rest(&app, Method::GET, &path, &token, V1, None).await;
    assert_eq!(got.status, StatusCode::NOT_FOUND, "{}", got.text);
    let gone = rest(&app, Method::DELETE, &path, &token, V1, None).await;
    assert!(gone.status.is_success(), "{}", gone.text);
}

#[tokio::test]
async fn special_purpose_addresses_of_both_families_are_refused_as_targets() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    for url in [
        "https://[fec0::1]/hook",
        "https://240.0.0.1/hook",
        "https://192.0.0.8/hook",
        "https://[100::1]/hook",
        "https://[2001::7f00:1]/hook",
        "https://[2001:db8::1]/hook",
        "https://198.18.0.1/hook",
        "https://[5f00::1]/hook",
    ] {
        let reply = app.post("/webhooks", &token, json!({"url": url})).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{url}: {}",
            reply.text
        );
        assert_eq!(reply.body["error"]["field"], "url", "{}", reply.text);
    }
}

#[tokio::test]
async fn a_send_whose_push_config_is_refused_leaves_no_task() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    for config in [
        json!({"url": "https://10.0.0.1/hook"}),
        json!({"url": "https://hooks.example/hook", "token": "has spaces"}),
    ] {
        let reply = rpc(
            &app,
            "echo",
            &token,
            V1,
            "SendMessage",
            json!({"message": message("hi"),
                   "configuration": {"taskPushNotificationConfig": config}}),
        )
        .await;
        assert_eq!(reply.body["error"]["code"], -32602, "{}", reply.text);
    }
    let tasks = rpc_ok(&app, "echo", &token, V1, "ListTasks", json!({})).await;
    assert_eq!(tasks["tasks"], json!([]), "{tasks}");
    let runs = app.get("/runs", &token).await;
    assert_eq!(runs.body["runs"], json!([]), "{}", runs.text);
    let sessions = app.get("/sessions", &token).await;
    assert_eq!(sessions.body["sessions"], json!([]), "{}", sessions.text);
}

#[tokio::test]
async fn the_card_never_reflects_the_host_header() {
    let app = spawn_app().await;
    let card: Value = app
        .client
        .get(app.url("/.well-known/agent-card.json"))
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = card.to_string();
    assert!(!text.contains("evil.example"), "{text}");
    let port = app.address.rsplit(':').next().unwrap();
    assert!(
        text.contains(&format!("127.0.0.1:{port}/a2a/echo")),
        "{text}"
    );

    let configured = app_with("[server]\npublic_url = \"https://agents.example.com/\"\n").await;
    let card: Value = configured
        .client
        .get(configured.url("/a2a/echo/.well-known/agent-card.json"))
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = card.to_string();
    assert!(!text.contains("evil.example"), "{text}");
    assert!(
        text.contains("\"https://agents.example.com/a2a/echo\""),
        "{text}"
    );
}
