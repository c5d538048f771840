//! HTTP hygiene: every rejection is the same JSON shape; operations endpoints answer.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;

fn assert_error_shape(body: &Value) {
    let error = body["error"].as_object().expect("an error object");
    assert!(error["code"].is_string());
    assert!(error["message"].is_string());
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let cases = [
        (
            reqwest::Method::GET,
            "/no/such/route",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            reqwest::Method::PUT,
            "/sessions",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            reqwest::Method::DELETE,
            "/meta",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            reqwest::Method::GET,
            "/sessions/sess_nope",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ];
    for (method, path, status, code) in cases {
        let reply = app.request(method.clone(), path, Some(&token), None).await;
        assert_eq!(reply.status, status, "{method} {path}: {}", reply.text);
        assert_error_shape(&reply.body);
        assert_eq!(reply.code(), code);
    }
}

#[tokio::test]
async fn a_json_body_without_content_type_is_accepted() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let response = app
        .client
        .post(app.url("/sessions"))
        .bearer_auth(&token)
        .body(json!({"agent": {"name": "echo"}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let body: Value = response.json().await.unwrap();
    assert!(body["sessionId"].as_str().unwrap().starts_with("sess_"));
}

#[tokio::test]
async fn an_oversized_body_is_a_json_413_everywhere() {
    let app = spawn_app().await;
    let huge = "y".repeat(2 * 1024 * 1024);
    let response = app
        .client
        .post(app.url("/auth/token"))
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "payload_too_large");
}

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = spawn_app().await;
    let health = app
        .request(reqwest::Method::GET, "/healthz", None, None)
        .await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.body["status"], "ok");
    let ready = app
        .request(reqwest::Method::GET, "/readyz", None, None)
        .await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.body["status"], "ready");

    app.state.store().close().await;
    let unready = app
        .request(reqwest::Method::GET, "/readyz", None, None)
        .await;
    assert_eq!(unready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(unready.code(), "database_unavailable");
    assert!(
        !unready.text.contains(".db"),
        "no paths leak: {}",
        unready.text
    );
}
