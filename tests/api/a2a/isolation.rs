//! Tenancy and errors on the A2A face: another tenant's tasks and contexts are not found on
//! every operation, a `tenant` field must be the caller's, and bad requests get A2A's codes.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{V1, message, rest, rpc, rpc_error, rpc_ok, send};
use crate::helpers::spawn_app;

#[tokio::test]
async fn another_tenants_task_and_context_are_not_found_on_every_operation() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let (_, intruder) = app.new_tenant().await;
    let task = send(&app, "echo", &token, "mine").await;
    let id = task["id"].as_str().unwrap();
    let context = task["contextId"].as_str().unwrap();

    let not_found = |error: &Value| {
        assert_eq!(error["code"], -32001, "{error}");
        assert_eq!(error["data"][0]["reason"], "TASK_NOT_FOUND", "{error}");
    };
    for (method, params) in [
        ("GetTask", json!({"id": id})),
        ("CancelTask", json!({"id": id})),
        ("SubscribeToTask", json!({"id": id})),
        (
            "SendMessage",
            json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER", "taskId": id, "parts": [{"text": "x"}]}}),
        ),
        (
            "SendMessage",
            json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER", "contextId": context, "parts": [{"text": "x"}]}}),
        ),
    ] {
        not_found(&rpc_error(&app, "echo", &intruder, V1, method, params).await);
    }
    let listed = rpc_ok(&app, "echo", &intruder, V1, "ListTasks", json!({})).await;
    assert_eq!(listed["totalSize"], 0);
    let in_context = rpc_ok(
        &app,
        "echo",
        &intruder,
        V1,
        "ListTasks",
        json!({"contextId": context}),
    )
    .await;
    assert_eq!(in_context["tasks"], json!([]));
    for path in [
        format!("/a2a/echo/tasks/{id}"),
        format!("/a2a/echo/v1/tasks/{id}"),
    ] {
        let reply = rest(&app, Method::GET, &path, &intruder, V1, None).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            reply.text
        );
        assert_eq!(reply.body["error"]["status"], "NOT_FOUND");
        assert_eq!(
            reply.body["error"]["details"][0]["reason"],
            "TASK_NOT_FOUND"
        );
    }
    let cancel = rest(
        &app,
        Method::POST,
        &format!("/a2a/echo/tasks/{id}:cancel"),
        &intruder,
        V1,
        None,
    )
    .await;
    assert_eq!(cancel.status, StatusCode::NOT_FOUND);
    let subscribe = rest(
        &app,
        Method::GET,
        &format!("/a2a/echo/tasks/{id}:subscribe"),
        &intruder,
        V1,
        None,
    )
    .await;
    assert_eq!(subscribe.status, StatusCode::NOT_FOUND);

    // The owner still sees it; a `tenant` field must name the caller's own tenant.
    let own = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "GetTask",
        json!({"id": id, "tenant": tenant}),
    )
    .await;
    assert_eq!(own["id"], id);
    let other_tenant = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "GetTask",
        json!({"id": id, "tenant": "ten_someone"}),
    )
    .await;
    not_found(&other_tenant);
    // Another agent's endpoint does not find it either.
    not_found(&rpc_error(&app, "slow", &token, V1, "GetTask", json!({"id": id})).await);
}

#[tokio::test]
async fn bad_requests_get_a2a_error_codes_never_a_500() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;

    let unknown = rpc_error(&app, "echo", &token, V1, "DoSomething", json!({})).await;
    assert_eq!(unknown["code"], -32601);
    // A 1.0 method needs A2A-Version 1.0; absent is 0.3.
    let versionless = rpc_error(
        &app,
        "echo",
        &token,
        None,
        "SendMessage",
        json!({"message": message("x")}),
    )
    .await;
    assert_eq!(versionless["code"], -32009, "{versionless}");
    let future = rpc_error(
        &app,
        "echo",
        &token,
        Some("2.0"),
        "GetTask",
        json!({"id": "x"}),
    )
    .await;
    assert_eq!(future["code"], -32009);
    let missing = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "GetTask",
        json!({"id": "run_nope"}),
    )
    .await;
    assert_eq!(missing["code"], -32001);
    let no_message = rpc_error(&app, "echo", &token, V1, "SendMessage", json!({})).await;
    assert_eq!(no_message["code"], -32602);
    assert_eq!(no_message["data"][0]["metadata"]["field"], "message");
    assert_eq!(
        no_message["data"][1]["@type"],
        "type.googleapis.com/google.rpc.BadRequest"
    );
    let empty_parts = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER", "parts": []}}),
    )
    .await;
    assert_eq!(empty_parts["data"][0]["metadata"]["field"], "message.parts");
    let agent_role = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        json!({"message": {"messageId": super::message_id(), "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}),
    )
    .await;
    assert_eq!(agent_role["code"], -32602);
    let old_error = rpc_error(
        &app,
        "echo",
        &token,
        None,
        "tasks/get",
        json!({"id": "run_nope"}),
    )
    .await;
    assert_eq!(old_error["code"], -32001);
    assert!(
        old_error.get("data").is_none(),
        "0.3 errors carry no typed details: {old_error}"
    );

    let (app, token) = (&app, token.as_str());
    let body = |raw: &'static str| async move {
        let response = app
            .client
            .post(app.url("/a2a/echo"))
            .bearer_auth(token)
            .header("A2A-Version", "1.0")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.json::<Value>().await.unwrap()
    };
    let parse = body("{not json").await;
    assert_eq!(parse["error"]["code"], -32700);
    assert_eq!(parse["id"], Value::Null);
    let not_rpc = body(r#"{"id": 3, "method": "GetTask"}"#).await;
    assert_eq!(not_rpc["error"]["code"], -32600);
    assert_eq!(not_rpc["id"], 3);

    // Without a token: 401 at the HTTP layer, with a challenge, on both bindings.
    let anonymous = app
        .request(
            Method::POST,
            "/a2a/echo",
            None,
            Some(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask"})),
        )
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(anonymous.headers["www-authenticate"], "Bearer");
    assert_eq!(anonymous.body["error"]["status"], "UNAUTHENTICATED");
    let anonymous_rest = app
        .request(Method::GET, "/a2a/echo/tasks", None, None)
        .await;
    assert_eq!(anonymous_rest.status, StatusCode::UNAUTHORIZED);
    let no_agent = rpc(app, "nobody", token, V1, "GetTask", json!({"id": "x"})).await;
    assert_eq!(no_agent.status, StatusCode::NOT_FOUND);

    // REST: bad JSON is 400 INVALID_ARGUMENT, an unknown task 404.
    let raw = app
        .client
        .post(app.url("/a2a/echo/message:send"))
        .bearer_auth(token)
        .header("A2A-Version", "1.0")
        .body("[1, 2")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::BAD_REQUEST);
    let raw: Value = raw.json().await.unwrap();
    assert_eq!(raw["error"]["status"], "INVALID_ARGUMENT");
    let bad_part = rest(
        app,
        Method::POST,
        "/a2a/echo/message:send",
        token,
        V1,
        Some(
            json!({"message": {"messageId": super::message_id(), "role": "ROLE_USER", "parts": [{"raw": "***"}]}}),
        ),
    )
    .await;
    assert_eq!(bad_part.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        bad_part.body["error"]["details"][0]["metadata"]["field"], "message.parts[0].raw",
        "{}",
        bad_part.text
    );
}
