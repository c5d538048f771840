//! Bad input gets a 400 naming the field at fault, and never a 500.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;

#[tokio::test]
async fn bad_session_requests_name_the_field_at_fault() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let client_tool =
        |name: &str| json!({"name": name, "description": "d", "parameters": {"type": "object"}});
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "agent"),
        (json!({"agent": "echo"}), "agent"),
        (json!({"agent": {}}), "agent.name"),
        (json!({"agent": {"name": "nobody"}}), "agent.name"),
        (
            json!({"agent": {"name": "tooly", "options": {"colour": "red"}}}),
            "agent.options.colour",
        ),
        (
            json!({"agent": {"name": "tooly", "options": {"model": "huge"}}}),
            "agent.options.model",
        ),
        (
            json!({"agent": {"name": "tooly", "options": {"model": 3}}}),
            "agent.options.model",
        ),
        (
            json!({"agent": {"name": "tooly", "tools": [{"name": "teleport"}]}}),
            "agent.tools[0].name",
        ),
        (
            json!({"agent": {"name": "tooly", "tools": [{"name": "memory"}]}}),
            "agent.tools[0].name",
        ),
        (
            json!({"agent": {"name": "tooly", "tools": [{"name": "clock"}, {"name": "clock"}]}}),
            "agent.tools[1].name",
        ),
        (
            json!({"agent": {"name": "tooly", "tools": [{"name": "clock", "trust": "yes"}]}}),
            "agent.tools[0].trust",
        ),
        (
            json!({"agent": {"name": "tooly"}, "tools": [client_tool("clock")]}),
            "tools[0].name",
        ),
        (
            json!({"agent": {"name": "tooly"}, "tools": [client_tool("memory")]}),
            "tools[0].name",
        ),
        (
            json!({"agent": {"name": "tooly"}, "tools": [client_tool("lookup"), client_tool("lookup")]}),
            "tools[1].name",
        ),
        (
            json!({"agent": {"name": "tooly"}, "tools": [client_tool("lookup")]}),
            "tools",
        ),
        (
            json!({"agent": {"name": "tooly"}, "tools": [{"name": "x", "parameters": {}}]}),
            "tools[0].description",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": {"role": "user"}}),
            "messages",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": [{"role": "robot", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": [{"role": "user"}]}),
            "messages[0].content",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": [{"role": "user", "content": [{"type": "video"}]}]}),
            "messages[0].content[0].type",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": [{"role": "user", "content": [{"type": "image", "url": "http://plain.example"}]}]}),
            "messages[0].content[0].url",
        ),
        (
            json!({"agent": {"name": "tooly"}, "messages": [{"role": "user", "content": [{"type": "image", "url": "data:image/png;base64,iVBORw0KGgo="}]}]}),
            "messages[0].content[0].url",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": [{"role": "tool", "content": "x"}]}),
            "messages[0].toolCallId",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": [{"role": "ok", "content": "x"}, {"role": "user", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "tool_use", "name": "clock", "input": {}}]}]}),
            "messages[1].content[0].toolCallId",
        ),
    ];
    for (body, field) in cases {
        let reply = app.post("/sessions", &token, body.clone()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "invalid_request", "{body}");
        assert_eq!(
            reply.body["error"]["field"], field,
            "{body}: {}",
            reply.text
        );
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with(field),
            "{body}: {}",
            reply.text
        );
    }
    // None of them stored anything.
    let list = app.get("/sessions", &token).await;
    assert_eq!(list.body["sessions"], json!([]));
}

#[tokio::test]
async fn bad_bodies_queries_and_paths_get_json_errors() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "tooly"}}))
        .await;

    let not_json = app
        .client
        .post(app.url("/sessions"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), StatusCode::BAD_REQUEST);
    let body: Value = not_json.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");

    let huge = "x".repeat(2 * 1024 * 1024);
    let too_large = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo"}, "messages": [{"role": "user", "content": huge}]}),
        )
        .await;
    assert_eq!(too_large.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(too_large.code(), "payload_too_large");

    let history_cases = [
        (
            format!("/sessions/{session}/history"),
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            format!("/sessions/{session}/history?type=partial"),
            StatusCode::BAD_REQUEST,
            "invalid_query",
        ),
        (
            format!("/sessions/{session}/history?type=compacted"),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/sessions/sess_0123456789abcdef0123456789abcdef/history?type=full".to_owned(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/sessions/garbage".to_owned(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ];
    for (path, status, code) in history_cases {
        let reply = app.get(&path, &token).await;
        assert_eq!(reply.status, status, "{path}: {}", reply.text);
        assert_eq!(reply.code(), code, "{path}");
    }
}

#[tokio::test]
async fn bad_admin_requests_name_the_field_at_fault() {
    let app = spawn_app().await;
    let tenant = app.create_tenant("validated").await;
    let admin = app.admin_token.clone();
    let cases = [
        ("/admin/tenants".to_owned(), "POST", json!({}), "name"),
        (
            "/admin/tenants".to_owned(),
            "POST",
            json!({"name": "  "}),
            "name",
        ),
        (
            "/admin/tenants".to_owned(),
            "POST",
            json!({"name": "a", "plan": "gold"}),
            "plan",
        ),
        (
            format!("/admin/tenants/{tenant}"),
            "PATCH",
            json!({"status": "deleted"}),
            "status",
        ),
        (
            format!("/admin/tenants/{tenant}/tokens"),
            "POST",
            json!({"ttl_seconds": 0}),
            "ttl_seconds",
        ),
        (
            format!("/admin/tenants/{tenant}/tokens"),
            "POST",
            json!({"ttl_seconds": -5}),
            "ttl_seconds",
        ),
        (
            format!("/admin/tenants/{tenant}/credentials"),
            "POST",
            json!({"name": 5}),
            "name",
        ),
    ];
    for (path, method, body, field) in cases {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let reply = app.request(method, &path, Some(&admin), Some(&body)).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{path} {body}: {}",
            reply.text
        );
        assert_eq!(
            reply.body["error"]["field"], field,
            "{path} {body}: {}",
            reply.text
        );
    }
    let tenant_now = app.get(&format!("/admin/tenants/{tenant}"), &admin).await;
    assert_eq!(tenant_now.body["status"], "active");
    assert_eq!(tenant_now.body["name"], "validated");
}
