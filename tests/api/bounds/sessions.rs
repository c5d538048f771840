//! A session's size is limited in messages and bytes: a turn whose input would go beyond
//! is refused with 409 session_full, nothing of it stored.

use reqwest::StatusCode;
use serde_json::json;

use crate::hardening::app_with;
use crate::helpers::user;

#[tokio::test]
async fn a_turn_past_the_sessions_messages_or_bytes_is_refused_as_session_full() {
    let app = app_with("[limits]\nsession_max_messages = 5\nsession_max_bytes = 100000\n").await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let path = format!("/sessions/{session}/turns");
    // Two turns: four messages (the user's and the echo's).
    for text in ["one", "two"] {
        let reply = app
            .post(&path, &token, json!({"messages": [user(text)]}))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let third = app
        .post(&path, &token, json!({"messages": [user("three")]}))
        .await;
    assert_eq!(
        third.status,
        StatusCode::OK,
        "the fifth message fits: {}",
        third.text
    );
    let fourth = app
        .post(&path, &token, json!({"messages": [user("four")]}))
        .await;
    assert_eq!(fourth.status, StatusCode::CONFLICT, "{}", fourth.text);
    assert_eq!(fourth.code(), "session_full");
    assert!(
        fourth.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("5 messages"),
        "{}",
        fourth.text
    );
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(history.body["history"]["full"].as_array().unwrap().len(), 6);

    // Bytes: a 60 KB message and its echo fill a session of 100 KB.
    let bytes = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let path = format!("/sessions/{bytes}/turns");
    let big = "b".repeat(60_000);
    let first = app
        .post(&path, &token, json!({"messages": [user(&big)]}))
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let refused = app
        .post(&path, &token, json!({"messages": [user("small")]}))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert_eq!(refused.code(), "session_full");
    let history = app
        .get(&format!("/sessions/{bytes}/history?type=full"), &token)
        .await;
    assert_eq!(history.body["history"]["full"].as_array().unwrap().len(), 2);
}
