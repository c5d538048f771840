//! Tool-call ids are unique within a session, whatever the model sends: calls without an id
//! get one, a repeated id is renamed for clients and named as the model sent it when the
//! history goes back to the model, on both HTTP providers.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

#[derive(Clone, Copy)]
enum Api {
    OpenAi,
    Anthropic,
}

async fn app_on(server: &ScriptedOpenAi, api: Api) -> TestApp {
    let provider = match api {
        Api::OpenAi => "openai",
        Api::Anthropic => "anthropic",
    };
    let config = format!(
        "[[agents]]\nname = \"gpt\"\nprovider = \"{provider}\"\nbase_url = \"{}\"\n\
         model = \"m\"\napi_key = \"k\"\ntimeout_seconds = 5\nmax_retries = 0\n",
        server.url
    );
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

/// The model calls the client tool `lookup` with `id` (none: `None`).
fn call(api: Api, id: Option<&str>) -> Reply {
    match api {
        Api::OpenAi => Reply::Stream(vec![
            tool_fragment(0, id, Some("lookup"), "{\"q\":\"x\"}"),
            finish("tool_calls"),
        ]),
        Api::Anthropic => {
            let mut block = json!({"type": "tool_use", "name": "lookup", "input": {}});
            if let Some(id) = id {
                block["id"] = json!(id);
            }
            Reply::Events(vec![
                (
                    "message_start",
                    json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
                ),
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0, "content_block": block}),
                ),
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "{\"q\":\"x\"}"}}),
                ),
                (
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ),
                (
                    "message_delta",
                    json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 1}}),
                ),
                ("message_stop", json!({"type": "message_stop"})),
            ])
        }
    }
}

fn answer(api: Api, words: &str) -> Reply {
    match api {
        Api::OpenAi => Reply::Stream(vec![text(words), finish("stop")]),
        Api::Anthropic => Reply::Events(vec![
            (
                "message_start",
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": words}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 1}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]),
    }
}

/// A turn of `messages` without a stream: its JSON answer.
async fn turn(app: &TestApp, token: &str, session: &str, messages: Value) -> Value {
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            token,
            json!({"messages": messages}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    reply.body
}

/// The id of the one tool call a turn stopped on.
fn called(body: &Value) -> String {
    assert_eq!(body["stopReason"], "tool_use", "{body}");
    let blocks = body["messages"][0]["content"].as_array().unwrap();
    let calls: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
    assert_eq!(calls.len(), 1, "{body}");
    calls[0]["toolCallId"].as_str().unwrap().to_owned()
}

/// The tool call ids the provider was sent in a request, as (assistant calls, tool results).
fn ids_sent(api: Api, body: &Value) -> (Vec<String>, Vec<String>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for message in body["messages"].as_array().unwrap() {
        match api {
            Api::OpenAi => {
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    calls.push(call["id"].as_str().unwrap().to_owned());
                }
                if message["role"] == "tool" {
                    results.push(message["tool_call_id"].as_str().unwrap().to_owned());
                }
            }
            Api::Anthropic => {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_use" {
                        calls.push(block["id"].as_str().unwrap().to_owned());
                    }
                    if block["type"] == "tool_result" {
                        results.push(block["tool_use_id"].as_str().unwrap().to_owned());
                    }
                }
            }
        }
    }
    (calls, results)
}

/// Two turns whose model calls the client tool with `id` each time: both calls are offered
/// with ids of their own, answered, and the session goes on. Returns the two ids and what
/// the provider was sent last.
async fn two_turns_calling(api: Api, id: Option<&str>) -> (String, String, Value) {
    let server = ScriptedOpenAi::start().await;
    let app = app_on(&server, api).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt"}, "tools": [{"name": "lookup", "description": "Looks up",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]}),
        )
        .await;
    let mut ids = Vec::new();
    for round in 0..2 {
        server.push(call(api, id));
        server.push(answer(api, "found it"));
        let stopped = turn(&app, &token, &session, json!([user("look it up")])).await;
        let call_id = called(&stopped);
        let answered = turn(
            &app,
            &token,
            &session,
            json!([{"role": "tool", "toolCallId": call_id, "content": format!("result {round}")}]),
        )
        .await;
        assert_eq!(answered["stopReason"], "end_turn", "{answered}");
        ids.push(call_id);
    }
    // The session goes on after both.
    server.push(answer(api, "bye"));
    let last = turn(&app, &token, &session, json!([user("thanks")])).await;
    assert_eq!(last["stopReason"], "end_turn", "{last}");
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let full = history.body["history"]["full"].as_array().unwrap();
    let answered: Vec<&str> = full
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(answered, [ids[0].as_str(), ids[1].as_str()]);
    let sent = server.requests().last().unwrap().body.clone();
    (ids[0].clone(), ids[1].clone(), sent)
}

#[tokio::test]
async fn calls_without_ids_get_ids_of_their_own_on_every_provider() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let (first, second, sent) = two_turns_calling(api, None).await;
        assert_ne!(first, second);
        for id in [&first, &second] {
            assert!(id.starts_with("call_") && id.len() > 20, "{id}");
        }
        // The model gets the generated ids, each call with its result.
        let (calls, results) = ids_sent(api, &sent);
        assert_eq!(calls, [first.clone(), second.clone()]);
        assert_eq!(results, calls);
    }
}

#[tokio::test]
async fn a_repeated_call_id_is_renamed_for_clients_and_sent_back_as_the_model_gave_it() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let (first, second, sent) = two_turns_calling(api, Some("call_0")).await;
        assert_eq!(first, "call_0");
        assert_ne!(second, "call_0");
        assert!(second.starts_with("call_0"), "{second}");
        let (calls, results) = ids_sent(api, &sent);
        assert_eq!(calls, ["call_0", "call_0"]);
        assert_eq!(results, ["call_0", "call_0"]);
    }
}
