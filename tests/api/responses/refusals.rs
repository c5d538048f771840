//! Refusals through this face in OpenAI's error shape: a full quota (429 with `Retry-After`),
//! and an input message the agent's body schema refuses, named by its input item.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::create;
use crate::helpers::{Reply, TestDb, spawn_app, spawn_app_on};

fn assert_rate_limited(reply: &Reply, quota: &str) {
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.text
    );
    let error = reply.body["error"].as_object().expect("an error object");
    let mut keys: Vec<&str> = error.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["code", "message", "param", "type"], "{}", reply.text);
    assert_eq!(error["type"], "rate_limit_exceeded");
    assert_eq!(error["code"], "quota_exceeded");
    assert!(
        error["message"].as_str().unwrap().contains(quota),
        "{}",
        reply.text
    );
    let retry: u64 = reply.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(
        reply.headers["ratelimit-policy"]
            .to_str()
            .unwrap()
            .contains(quota)
    );
}

#[tokio::test]
async fn a_full_quota_is_a_429_in_openai_shape_with_retry_after() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let set = app
        .patch(
            &format!("/admin/tenants/{tenant}/quotas"),
            &app.admin_token,
            json!({"turns_per_minute": 1}),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    let first = create(&app, &token, json!({"model": "echo", "input": "one"})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let second = create(&app, &token, json!({"model": "echo", "input": "two"})).await;
    assert_rate_limited(&second, "turns_per_minute");

    // The per-request quota refuses every route of the face alike.
    let set = app
        .patch(
            &format!("/admin/tenants/{tenant}/quotas"),
            &app.admin_token,
            json!({"requests_per_minute": 1}),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    let mut refused = None;
    for _ in 0..3 {
        let read = app.get("/v1/models", &token).await;
        if read.status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(read);
            break;
        }
    }
    assert_rate_limited(&refused.expect("a refusal"), "requests_per_minute");
}

#[tokio::test]
async fn a_message_its_agents_schema_refuses_is_named_by_its_input_item() {
    let config = r#"
[[agents]]
name = "docs"
provider = "echo"

[[agents.input_schema]]
content_type = "text/plain"
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;
    let image = json!({"type": "input_image", "image_url": "data:image/png;base64,aGk="});
    let text = |t: &str| json!({"type": "input_text", "text": t});
    for (input, param) in [
        // The turn's own message: the last item.
        (
            json!([{"role": "user", "content": [text("see"), image.clone()]}]),
            "input[0].content[1]",
        ),
        // A message seeding the history, after items that make no message of their own.
        (
            json!([
                {"role": "developer", "content": "Be brief."},
                {"type": "reasoning", "summary": []},
                {"role": "user", "content": [image.clone()]},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "fine"},
            ]),
            "input[2].content[0]",
        ),
        // The turn's message after a seeded history.
        (
            json!([
                {"role": "user", "content": "fine"},
                {"role": "assistant", "content": "ok"},
                {"type": "reasoning", "summary": []},
                {"role": "user", "content": [text("a"), text("b"), image.clone()]},
            ]),
            "input[3].content[2]",
        ),
    ] {
        let refused = create(&app, &token, json!({"model": "docs", "input": input})).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
        assert_eq!(refused.body["error"]["type"], "invalid_request_error");
        let named = refused.body["error"]["param"].as_str().unwrap_or_default();
        assert!(named.starts_with(param), "{param}: {}", refused.text);
        let message = refused.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("docs"), "{}", refused.text);
    }
    let fine = create(
        &app,
        &token,
        json!({"model": "docs", "input": [{"role": "user", "content": [text("only text")]}]}),
    )
    .await;
    assert_eq!(fine.body["status"], "completed", "{}", fine.text);
    assert_eq!(fine.body["error"], Value::Null);
}
