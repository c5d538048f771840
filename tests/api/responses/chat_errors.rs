//! Chat completions refused: every rule names the parameter at fault (`messages[i]…` for
//! a message, as the client numbers them) in OpenAI's error shape.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::chat::chat;
use super::chat_sessions::{assistant, user};
use crate::helpers::{TestDb, spawn_app_on};

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
        (json!({"model": "echo@2", "messages": hi()}), 400, "model"),
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
    // The session header: a key too long to name a session, an id that names none.
    let body = json!({"model": "echo", "messages": hi()});
    let long = "k".repeat(300);
    let refused = chat(&app, &token, body.clone(), Some(&long)).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.body["error"]["param"], "Agentry-Session");
    let unknown = chat(&app, &token, body, Some("sess_nothing")).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
    assert_eq!(unknown.body["error"]["code"], "not_found");
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
