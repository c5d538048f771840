//! Chat completions and sessions: the history a request repeats seeds a new session (within
//! `engine.max_seed_messages`), `Agentry-Session` continues one when the repeated history is
//! the stored one, another tenant's session is out of reach, and every refusal names the
//! parameter at fault in OpenAI's error shape.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::chat::chat;
use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on};

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

fn session_of(reply: &crate::helpers::Reply) -> String {
    reply.headers["agentry-session"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// The session's full history as `[role, text]` pairs.
async fn history(app: &TestApp, token: &str, session: &str) -> Vec<Value> {
    let reply = app
        .get(&format!("/sessions/{session}/history?type=full"), token)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    reply.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(text) => text.clone(),
                blocks => blocks[0]["text"].as_str().unwrap_or_default().to_owned(),
            };
            json!([m["role"], text])
        })
        .collect()
}

#[tokio::test]
async fn the_history_before_the_last_user_message_seeds_a_bounded_new_session() {
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[engine]\nmax_seed_messages = 3\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let messages = json!([{"role": "developer", "content": "Be brief."}, user("a"),
                          assistant("b"), user("c")]);
    let reply = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": messages}),
        None,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["choices"][0]["message"]["content"], "c");
    let session = session_of(&reply);
    assert_eq!(
        history(&app, &token, &session).await,
        [
            json!(["system", "Be brief."]),
            json!(["user", "a"]),
            json!(["assistant", "b"]),
            json!(["user", "c"]),
            json!(["assistant", "c"]),
        ]
    );
    // The same request again is a new session.
    let again = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": messages}),
        None,
    )
    .await;
    assert_ne!(session_of(&again), session);

    let long = json!([
        user("1"),
        assistant("2"),
        user("3"),
        assistant("4"),
        user("5")
    ]);
    let refused = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": long}),
        None,
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.body["error"]["param"], "messages");
    assert_eq!(refused.body["error"]["type"], "invalid_request_error");
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 3 messages"),
        "{}",
        refused.text
    );
}

#[tokio::test]
async fn a_named_session_continues_when_the_repeated_history_is_the_stored_one() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let key = Some("chat-1");
    let first = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": [user("a")]}),
        key,
    )
    .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let session = session_of(&first);
    let second = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": [user("a"), assistant("a"), user("b")]}),
        key,
    )
    .await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_eq!(session_of(&second), session);
    // Only the new message, by the session's own id.
    let third = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": [user("c")]}),
        Some(&session),
    )
    .await;
    assert_eq!(third.status, StatusCode::OK, "{}", third.text);
    assert_eq!(
        history(&app, &token, &session).await,
        ["a", "a", "b", "b", "c", "c"]
            .iter()
            .enumerate()
            .map(|(i, t)| json!([if i % 2 == 0 { "user" } else { "assistant" }, t]))
            .collect::<Vec<_>>()
    );

    let rewritten = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": [user("b"), assistant("not what was said"), user("d")]}),
        key,
    )
    .await;
    assert_eq!(
        rewritten.status,
        StatusCode::BAD_REQUEST,
        "{}",
        rewritten.text
    );
    assert_eq!(rewritten.body["error"]["param"], "messages");
    assert_eq!(history(&app, &token, &session).await.len(), 6);

    let other_model = chat(
        &app,
        &token,
        json!({"model": "echo@2", "messages": [user("e")]}),
        key,
    )
    .await;
    assert_eq!(
        other_model.status,
        StatusCode::BAD_REQUEST,
        "{}",
        other_model.text
    );
    assert_eq!(other_model.body["error"]["param"], "model");
}

#[tokio::test]
async fn another_tenants_session_is_out_of_reach() {
    let app = spawn_app().await;
    let (_, mine) = app.new_tenant().await;
    let (_, theirs) = app.new_tenant().await;
    let body = json!({"model": "echo", "messages": [user("secret")]});
    let first = chat(&app, &mine, body.clone(), Some("shared-key")).await;
    let session = session_of(&first);

    let by_id = chat(&app, &theirs, body.clone(), Some(&session)).await;
    assert_eq!(by_id.status, StatusCode::NOT_FOUND, "{}", by_id.text);
    assert_eq!(by_id.body["error"]["type"], "invalid_request_error");
    // The same key names the other tenant's own, new session.
    let by_key = chat(
        &app,
        &theirs,
        json!({"model": "echo", "messages": [user("x")]}),
        Some("shared-key"),
    )
    .await;
    assert_eq!(by_key.status, StatusCode::OK, "{}", by_key.text);
    assert_ne!(session_of(&by_key), session);
    assert_eq!(history(&app, &theirs, &session_of(&by_key)).await.len(), 2);
    assert_eq!(history(&app, &mine, &session).await.len(), 2);
}

#[tokio::test]
async fn every_refusal_names_its_parameter() {
    let config = r#"
[[agents]]
name = "echo"
provider = "echo"

[[agents]]
name = "strict"
provider = "echo"
image_inputs = ["http"]

[[agents.input_schema]]
content_type = "text/plain"
required = true
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;
    let hi = || json!([user("hi")]);
    let image = json!({"role": "user", "content": [{"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]});
    let cases = [
        (json!({"messages": hi()}), 400, "model"),
        (json!({"model": "echo"}), 400, "messages"),
        (json!({"model": "echo", "messages": []}), 400, "messages"),
        (json!({"model": "nobody", "messages": hi()}), 404, "model"),
        (
            json!({"model": "echo", "messages": [{"role": "function", "content": "x"}]}),
            400,
            "messages[0].role",
        ),
        (
            json!({"model": "echo", "messages": [user("a"), assistant("b")]}),
            400,
            "messages[1]",
        ),
        (
            json!({"model": "echo", "messages": [{"role": "user"}]}),
            400,
            "messages[0].content",
        ),
        (json!({"model": "echo", "messages": hi(), "n": 2}), 400, "n"),
        (
            json!({"model": "echo", "messages": hi(), "logprobs": true}),
            400,
            "logprobs",
        ),
        (
            json!({"model": "echo", "messages": hi(), "response_format": {"type": "json_object"}}),
            400,
            "response_format",
        ),
        (
            json!({"model": "echo", "messages": hi(), "audio": {"voice": "alloy", "format": "mp3"}}),
            400,
            "audio",
        ),
        (
            json!({"model": "echo", "messages": hi(), "stop": ["x"]}),
            400,
            "stop",
        ),
        (
            json!({"model": "echo", "messages": hi(), "tool_choice": "required"}),
            400,
            "tool_choice",
        ),
        (
            json!({"model": "echo", "messages": hi(), "stream_options": {"include_usage": true}}),
            400,
            "stream_options",
        ),
        (
            json!({"model": "echo", "messages": hi(), "tools": [{"type": "function"}]}),
            400,
            "tools[0].function",
        ),
        (
            json!({"model": "echo", "messages": hi(), "metadata": {"k": 1}}),
            400,
            "metadata.k",
        ),
        // A pending tool call is answered before a new user message.
        (
            json!({"model": "echo", "messages": [user("a"), {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            user("b")]}),
            400,
            "messages",
        ),
        (
            json!({"model": "echo", "messages": [user("a"), {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c9", "content": "x"}]}),
            400,
            "messages[2].tool_call_id",
        ),
        // The agent's input schema, in the new message and in the history.
        (
            json!({"model": "strict", "messages": [image.clone()]}),
            400,
            "messages[0].content[1]",
        ),
        (
            json!({"model": "strict", "messages": [image, assistant("ok"), user("more")]}),
            400,
            "messages[0].content[1]",
        ),
    ];
    for (body, status, param) in cases {
        let reply = chat(&app, &token, body.clone(), None).await;
        assert_eq!(reply.status.as_u16(), status, "{body}: {}", reply.text);
        assert_eq!(
            reply.body["error"]["param"], param,
            "{body}: {}",
            reply.text
        );
        assert!(reply.body["error"]["message"].is_string(), "{}", reply.text);
    }
    let unauthenticated = app
        .client
        .post(app.url("/v1/chat/completions"))
        .json(&json!({"model": "echo", "messages": hi()}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), StatusCode::UNAUTHORIZED);
    let body: Value = unauthenticated.json().await.unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
}
