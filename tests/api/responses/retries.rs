//! `Idempotency-Key` on `POST /v1/responses`: a retry with the same key and body gets the
//! same response (JSON, stream or background) and runs no second turn; the key with another
//! body is refused.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::{DONE, Events, names};
use crate::helpers::{Reply, TestApp, spawn_app};

async fn post_keyed(app: &TestApp, token: &str, key: &str, body: &Value) -> reqwest::Response {
    app.client
        .post(app.url("/v1/responses"))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn reply_of(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    Reply {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    }
}

/// How many turns the tenant's sessions hold, over AAP.
async fn turns(app: &TestApp, token: &str) -> usize {
    let sessions = app.get("/sessions", token).await.body["sessions"]
        .as_array()
        .unwrap()
        .clone();
    let mut count = 0;
    for session in sessions {
        let id = session["sessionId"].as_str().unwrap();
        let listed = app.get(&format!("/sessions/{id}/turns"), token).await;
        count += listed.body["turns"].as_array().unwrap().len();
    }
    count
}

#[tokio::test]
async fn a_retry_with_the_same_key_gets_the_same_response_and_runs_no_second_turn() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let body = json!({"model": "echo", "input": "Once only", "metadata": {"n": "1"}});
    let first = reply_of(post_keyed(&app, &token, "key-1", &body).await).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let again = reply_of(post_keyed(&app, &token, "key-1", &body).await).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.body, first.body);
    assert_eq!(turns(&app, &token).await, 1);

    // Another body with the key is refused; another key is another response.
    let other = json!({"model": "echo", "input": "Something else"});
    let reused = reply_of(post_keyed(&app, &token, "key-1", &other).await).await;
    assert_eq!(
        reused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reused.text
    );
    assert_eq!(reused.body["error"]["code"], "idempotency_key_reused");
    assert_eq!(reused.body["error"]["type"], "invalid_request_error");
    let fresh = reply_of(post_keyed(&app, &token, "key-2", &body).await).await;
    assert_ne!(fresh.body["id"], first.body["id"]);
    assert_eq!(turns(&app, &token).await, 2);

    // A retry continuing a conversation is the same response too.
    let next = json!({"model": "echo", "input": "Next", "previous_response_id": first.body["id"]});
    let continued = reply_of(post_keyed(&app, &token, "key-3", &next).await).await;
    assert_eq!(continued.status, StatusCode::OK, "{}", continued.text);
    let repeated = reply_of(post_keyed(&app, &token, "key-3", &next).await).await;
    assert_eq!(repeated.body, continued.body);
    assert_eq!(turns(&app, &token).await, 3);

    // Another tenant's key is its own.
    let (_, other_token) = app.new_tenant().await;
    let theirs = reply_of(post_keyed(&app, &other_token, "key-1", &body).await).await;
    assert_eq!(theirs.status, StatusCode::OK, "{}", theirs.text);
    assert_ne!(theirs.body["id"], first.body["id"]);
}

#[tokio::test]
async fn a_retried_stream_replays_the_same_events_and_a_retried_background_response_is_the_same() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let body = json!({"model": "echo", "input": "Streamed once", "stream": true});
    let first = Events::new(post_keyed(&app, &token, "s-1", &body).await)
        .collect()
        .await;
    assert_eq!(names(&first).last(), Some(&DONE));
    let again = Events::new(post_keyed(&app, &token, "s-1", &body).await)
        .collect()
        .await;
    assert_eq!(again, first);

    let background = json!({"model": "slow", "input": "b".repeat(40), "background": true});
    let queued = reply_of(post_keyed(&app, &token, "b-1", &background).await).await;
    assert_eq!(queued.body["status"], "queued", "{}", queued.text);
    let retried = reply_of(post_keyed(&app, &token, "b-1", &background).await).await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.text);
    assert_eq!(retried.body["id"], queued.body["id"]);
    assert_eq!(retried.body["background"], true);
    assert_eq!(turns(&app, &token).await, 2);

    let bad = reply_of(post_keyed(&app, &token, "", &background).await).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    assert_eq!(bad.body["error"]["param"], "Idempotency-Key");
}

#[tokio::test]
async fn identical_keyed_requests_sent_at_once_get_one_response() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let body = json!({"model": "slow", "input": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "All at once"},
    ]});
    let replies = futures_util::future::join_all(
        (0..4).map(|_| async { reply_of(post_keyed(&app, &token, "burst", &body).await).await }),
    )
    .await;
    for reply in &replies {
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        assert_eq!(reply.body["id"], replies[0].body["id"], "{}", reply.text);
        assert_eq!(reply.body["status"], "completed", "{}", reply.text);
    }
    assert_eq!(turns(&app, &token).await, 1);
    let sessions = app.get("/sessions", &token).await;
    assert_eq!(sessions.body["sessions"].as_array().unwrap().len(), 1);
}
