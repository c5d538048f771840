//! Chat completions and sessions: the history a request repeats seeds a new session (within
//! `engine.max_seed_messages`), `Agentry-Session` continues one when the repeated history is
//! the stored one (tool calls included), and another tenant's session is out of reach.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::chat::chat;
use super::wire::app_with_model;
use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on};
use crate::scripted::{Reply as Scripted, ScriptedOpenAi, finish, text, tool_fragment};

pub fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

pub fn assistant(text: &str) -> Value {
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
    // Of several trailing user messages, the last is the turn.
    let twice = json!([user("x"), user("y")]);
    let reply = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": twice}),
        None,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["choices"][0]["message"]["content"], "y");
    assert_eq!(
        history(&app, &token, &session_of(&reply)).await,
        [
            json!(["user", "x"]),
            json!(["user", "y"]),
            json!(["assistant", "y"])
        ]
    );

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
async fn a_named_session_answers_its_tool_calls_with_the_whole_history_repeated() {
    let model = ScriptedOpenAi::start().await;
    model.push(Scripted::Stream(vec![
        text("Let me look."),
        tool_fragment(0, Some("call_7"), Some("lookup"), "{\"q\":\"x\"}"),
        finish("tool_calls"),
    ]));
    model.push(Scripted::Stream(vec![text("Found it."), finish("stop")]));
    let app = app_with_model(&model).await;
    let (_, token) = app.new_tenant().await;
    let tools = json!([{"type": "function", "function": {"name": "lookup"}}]);
    let key = Some("tools-1");
    let mut messages = vec![user("Find x")];
    let asked = chat(
        &app,
        &token,
        json!({"model": "gpt", "messages": messages, "tools": tools}),
        key,
    )
    .await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.text);
    let message = asked.body["choices"][0]["message"].clone();
    assert_eq!(message["content"], "Let me look.");
    messages.push(message);
    messages.push(json!({"role": "tool", "tool_call_id": "call_7", "content": "x is here"}));
    let answered = chat(
        &app,
        &token,
        json!({"model": "gpt", "messages": messages, "tools": tools}),
        key,
    )
    .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(session_of(&answered), session_of(&asked));
    assert_eq!(
        answered.body["choices"][0]["message"]["content"],
        "Found it."
    );
    assert_eq!(
        history(&app, &token, &session_of(&asked)).await,
        [
            json!(["user", "Find x"]),
            json!(["assistant", "Let me look."]),
            json!(["tool", "x is here"]),
            json!(["assistant", "Found it."]),
        ]
    );
}
