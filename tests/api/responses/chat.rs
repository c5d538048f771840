//! `POST /v1/chat/completions`: the `chat.completion` object, its data-only chunk stream
//! with and without usage, client tool calls and their round trip (thinking left out), and
//! a failed turn.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::app_with_model;
use crate::helpers::{Reply, TestApp, spawn_app};
use crate::scripted::{
    Reply as Scripted, ScriptedOpenAi, finish, reasoning, text, tool_fragment, usage,
};

pub async fn chat(app: &TestApp, token: &str, body: Value, session: Option<&str>) -> Reply {
    let mut request = app
        .client
        .post(app.url("/v1/chat/completions"))
        .bearer_auth(token)
        .json(&body);
    if let Some(session) = session {
        request = request.header("Agentry-Session", session);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
    }
}

/// A streamed completion's frames: each `data:` line's JSON, `[DONE]` as a string.
pub async fn chat_stream(app: &TestApp, token: &str, mut body: Value) -> Vec<Value> {
    body["stream"] = json!(true);
    let reply = chat(app, token, body, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.headers["content-type"], "text/event-stream");
    assert!(reply.headers.contains_key("agentry-turn-id"));
    reply
        .text
        .split("\n\n")
        .filter(|block| !block.is_empty() && !block.starts_with(':'))
        .map(|block| {
            let data = block.strip_prefix("data: ").expect("data-only frames");
            assert!(!data.contains('\n'), "one line per frame: {block:?}");
            match data {
                "[DONE]" => json!("[DONE]"),
                data => serde_json::from_str(data).expect("JSON data"),
            }
        })
        .collect()
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

#[tokio::test]
async fn a_chat_completion_answers_in_the_openai_shape() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let reply = chat(
        &app,
        &token,
        json!({"model": "echo", "messages": [user("Hello, world!")], "temperature": 0.2,
               "seed": 7, "user": "u-1", "store": false, "metadata": {"k": "v"}}),
        None,
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let body = &reply.body;
    let id = body["id"].as_str().unwrap();
    let hex = id.strip_prefix("chatcmpl-").expect("chatcmpl- id");
    let turn = reply.headers["agentry-turn-id"].to_str().unwrap();
    assert_eq!(turn, format!("turn_{hex}"));
    assert!(
        reply.headers["agentry-session"]
            .to_str()
            .unwrap()
            .starts_with("sess_")
    );
    let usage = &body["usage"];
    let (prompt, completion) = (
        usage["prompt_tokens"].as_u64().unwrap(),
        usage["completion_tokens"].as_u64().unwrap(),
    );
    assert!(prompt > 0 && completion > 0, "{usage}");
    assert_eq!(
        body,
        &json!({
            "id": id, "object": "chat.completion", "created": body["created"], "model": "echo",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello, world!",
                         "refusal": null}, "finish_reason": "stop", "logprobs": null}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        })
    );
    assert!(body["created"].as_i64().unwrap() > 1_700_000_000);
}

#[tokio::test]
async fn a_streamed_completion_sends_chunks_usage_and_done() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let frames = chat_stream(
        &app,
        &token,
        json!({"model": "echo", "messages": [user("Hello, world!")],
               "stream_options": {"include_usage": true}}),
    )
    .await;
    let (done, chunks) = frames.split_last().unwrap();
    assert_eq!(done, "[DONE]");
    let (usage_chunk, chunks) = chunks.split_last().unwrap();
    let id = chunks[0]["id"].clone();
    let created = chunks[0]["created"].clone();
    for chunk in chunks {
        assert_eq!(chunk["id"], id);
        assert_eq!(chunk["created"], created);
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "echo");
        assert_eq!(chunk["usage"], Value::Null, "{chunk}");
        assert!(chunk.as_object().unwrap().contains_key("usage"));
    }
    assert_eq!(
        chunks[0]["choices"],
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null,
                "finish_reason": null}])
    );
    let (last, deltas) = chunks[1..].split_last().unwrap();
    let content: String = deltas
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap())
        .collect();
    assert_eq!(content, "Hello, world!");
    assert_eq!(
        last["choices"],
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}])
    );
    assert_eq!(usage_chunk["id"], id);
    assert_eq!(usage_chunk["choices"], json!([]));
    let tokens = &usage_chunk["usage"];
    assert!(tokens["prompt_tokens"].as_u64().unwrap() > 0, "{tokens}");
    assert_eq!(
        tokens["total_tokens"].as_u64().unwrap(),
        tokens["prompt_tokens"].as_u64().unwrap() + tokens["completion_tokens"].as_u64().unwrap()
    );

    // Without include_usage no chunk has a `usage` key, and none carries the usage.
    let plain = chat_stream(
        &app,
        &token,
        json!({"model": "echo", "messages": [user("Hi")]}),
    )
    .await;
    assert_eq!(plain.last().unwrap(), "[DONE]");
    for chunk in &plain[..plain.len() - 1] {
        assert!(!chunk.as_object().unwrap().contains_key("usage"), "{chunk}");
    }
}

const WEATHER: &str = "get_weather";

fn weather_tool() -> Value {
    json!([{"type": "function", "function": {"name": WEATHER, "description": "The weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
}

/// The model thinks (not part of Chat Completions), then calls the tool.
fn script_tool_call(model: &ScriptedOpenAi) {
    model.push(Scripted::Stream(vec![
        reasoning("The user wants the weather."),
        tool_fragment(0, Some("call_1"), Some(WEATHER), "{\"city\":"),
        tool_fragment(0, None, None, "\"Paris\"}"),
        finish("tool_calls"),
        usage(10, 5),
    ]));
}

#[tokio::test]
async fn a_client_tool_call_round_trips_with_the_whole_history() {
    let model = ScriptedOpenAi::start().await;
    script_tool_call(&model);
    model.push(Scripted::Stream(vec![
        text("Sunny in Paris."),
        finish("stop"),
        usage(20, 4),
    ]));
    let app = app_with_model(&model).await;
    let (_, token) = app.new_tenant().await;
    let question = vec![
        json!({"role": "system", "content": "Answer briefly."}),
        user("Weather in Paris?"),
    ];
    let asked = chat(
        &app,
        &token,
        json!({"model": "gpt", "messages": question, "tools": weather_tool()}),
        None,
    )
    .await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.text);
    let choice = &asked.body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = json!({"id": "call_1", "type": "function",
                      "function": {"name": WEATHER, "arguments": "{\"city\":\"Paris\"}"}});
    assert_eq!(
        choice["message"],
        json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [call]})
    );
    assert_eq!(
        asked.body["usage"],
        json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
    );
    // The system message reached the model with the tool.
    let first = &model.requests()[0].body;
    assert_eq!(first["tools"][0]["function"]["name"], WEATHER);
    assert!(
        first["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["content"] == "Answer briefly."),
        "{first}"
    );

    let mut history = question.clone();
    history.push(choice["message"].clone());
    history.push(json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"}));
    let answered = chat(
        &app,
        &token,
        json!({"model": "gpt", "messages": history, "tools": weather_tool()}),
        None,
    )
    .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        answered.body["choices"][0]["message"]["content"],
        "Sunny in Paris."
    );
    let sent = &model.requests()[1].body["messages"];
    assert!(
        sent.as_array().unwrap().iter().any(|m| m["role"] == "tool"
            && m["tool_call_id"] == "call_1"
            && m["content"] == "sunny"),
        "{sent}"
    );
}

#[tokio::test]
async fn a_streamed_tool_call_sends_its_name_then_its_arguments() {
    let model = ScriptedOpenAi::start().await;
    script_tool_call(&model);
    let app = app_with_model(&model).await;
    let (_, token) = app.new_tenant().await;
    let frames = chat_stream(
        &app,
        &token,
        json!({"model": "gpt", "messages": [user("Weather in Paris?")], "tools": weather_tool(),
               "stream_options": {"include_usage": true}}),
    )
    .await;
    let deltas: Vec<&Value> = frames
        .iter()
        .filter_map(|f| f["choices"].get(0))
        .map(|c| &c["delta"])
        .collect();
    assert_eq!(
        deltas,
        [
            &json!({"role": "assistant", "content": ""}),
            &json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                    "function": {"name": WEATHER, "arguments": ""}}]}),
            &json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":\"Paris\"}"}}]}),
            &json!({}),
        ]
    );
    let n = frames.len();
    assert_eq!(frames[n - 3]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        frames[n - 2]["usage"],
        json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
    );
    assert_eq!(frames[n - 1], "[DONE]");
}

#[tokio::test]
async fn a_failed_turn_is_an_error_in_the_openai_shape() {
    let model = ScriptedOpenAi::start().await;
    let broken = json!({"error": {"message": "the model is down"}});
    model.push(Scripted::Status(500, broken.clone()));
    model.push(Scripted::Status(500, broken));
    let app = app_with_model(&model).await;
    let (_, token) = app.new_tenant().await;
    let body = json!({"model": "gpt", "messages": [user("Hi")]});
    let failed = chat(&app, &token, body.clone(), None).await;
    assert_eq!(
        failed.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        failed.text
    );
    assert_eq!(failed.body["error"]["type"], "server_error");
    // The SDKs retry a 5xx unless told not to: a retry would run the turn again.
    assert_eq!(failed.headers["x-should-retry"], "false");
    assert!(failed.body["error"]["code"].is_string(), "{}", failed.text);
    assert!(
        failed.body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the agent's turn ended without a reply"),
        "{}",
        failed.text
    );

    let frames = chat_stream(&app, &token, body).await;
    assert_eq!(frames.len(), 3, "{frames:?}");
    assert_eq!(frames[0]["choices"][0]["delta"]["role"], "assistant");
    let error = &frames[1]["error"];
    assert_eq!(error["type"], "server_error", "{error}");
    assert_eq!(error["code"], failed.body["error"]["code"]);
    assert_eq!(frames[2], "[DONE]");
}
