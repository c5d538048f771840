//! Streamed responses: the semantic events of text, reasoning and function calls with
//! their sequence numbers, replay after any sequence number, failures, and the function
//! tools round trip.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::{DONE, app_with_model, create, names, open_stream, resume};
use crate::helpers::spawn_app;
use crate::scripted::{Reply, ScriptedOpenAi, finish, reasoning, text, tool_fragment, usage};

/// Sequence numbers run 0..n-1 over every event but `[DONE]`, which is last.
fn assert_numbered(events: &[super::wire::Event]) {
    let (done, numbered) = events.split_last().expect("events");
    assert_eq!(done.event, DONE);
    for (i, event) in numbered.iter().enumerate() {
        assert_eq!(event.data["sequence_number"], json!(i), "{event:?}");
    }
}

#[tokio::test]
async fn a_streamed_text_response_sends_the_spec_sequence() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let events = open_stream(
        &app,
        &token,
        json!({"model": "echo", "input": "Hello, world!"}),
    )
    .await
    .collect()
    .await;
    assert_numbered(&events);
    assert_eq!(
        names(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
            DONE,
        ]
    );
    let created = &events[0].data["response"];
    let id = created["id"].as_str().unwrap();
    let item_id = format!("msg_{}_0", id.strip_prefix("resp_").unwrap());
    assert_eq!(created["status"], "in_progress");
    assert_eq!(created["output"], json!([]));
    assert_eq!(created["usage"], Value::Null);
    assert_eq!(events[1].data["response"]["status"], "in_progress");
    assert_eq!(
        events[2].data,
        json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
               "item": {"type": "message", "id": item_id, "status": "in_progress",
                        "role": "assistant", "content": []}})
    );
    assert_eq!(
        events[3].data,
        json!({"type": "response.content_part.added", "sequence_number": 3, "item_id": item_id,
               "output_index": 0, "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}})
    );
    assert_eq!(
        events[4].data,
        json!({"type": "response.output_text.delta", "sequence_number": 4, "item_id": item_id,
               "output_index": 0, "content_index": 0, "delta": "Hello, w", "logprobs": []})
    );
    assert_eq!(events[5].data["delta"], "orld!");
    assert_eq!(
        events[6].data,
        json!({"type": "response.output_text.done", "sequence_number": 6, "item_id": item_id,
               "output_index": 0, "content_index": 0, "text": "Hello, world!", "logprobs": []})
    );
    assert_eq!(
        events[7].data["part"],
        json!({"type": "output_text", "text": "Hello, world!", "annotations": []})
    );
    let message = json!({"type": "message", "id": item_id, "status": "completed",
                         "role": "assistant",
                         "content": [{"type": "output_text", "text": "Hello, world!", "annotations": []}]});
    assert_eq!(events[8].data["item"], message);
    let completed = &events[9].data["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"], json!([message]));
    assert!(completed["usage"]["total_tokens"].as_u64().unwrap() > 0);

    // The stored response is what the stream ended with.
    let read = app.get(&format!("/v1/responses/{id}"), &token).await;
    assert_eq!(&read.body, completed);
}

#[tokio::test]
async fn a_stream_replays_exactly_the_events_after_a_sequence_number() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let events = open_stream(
        &app,
        &token,
        json!({"model": "echo", "input": "Replay me, please"}),
    )
    .await
    .collect()
    .await;
    let id = events[0].data["response"]["id"].as_str().unwrap();
    let whole = resume(&app, &token, id, None).await.collect().await;
    assert_eq!(whole, events);
    for after in [0, 3, 5, events.len() as u64 - 2] {
        let tail = resume(&app, &token, id, Some(after)).await.collect().await;
        assert_eq!(tail, events[after as usize + 1..], "after {after}");
    }
}

#[tokio::test]
async fn reasoning_text_and_a_function_call_stream_as_items_and_the_call_is_answered() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_model(&server).await;
    let (_, token) = app.new_tenant().await;
    server.push(Reply::Stream(vec![
        reasoning("Weather "),
        reasoning("needed."),
        text("Let me check."),
        tool_fragment(0, Some("call_1"), Some("get_weather"), "{\"city\":"),
        tool_fragment(0, None, None, "\"Paris\"}"),
        finish("tool_calls"),
        usage(11, 7),
    ]));
    let tools = json!([{"type": "function", "name": "get_weather", "description": "Weather of a city",
                        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                        "strict": null}]);
    let events = open_stream(
        &app,
        &token,
        json!({"model": "gpt", "input": "Weather in Paris?", "tools": tools}),
    )
    .await
    .collect()
    .await;
    assert_numbered(&events);
    assert_eq!(
        names(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.reasoning_text.delta",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
            DONE,
        ]
    );
    let id = events[0].data["response"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hex = id.strip_prefix("resp_").unwrap();
    assert_eq!(
        events[2].data["item"],
        json!({"type": "reasoning", "id": format!("rs_{hex}_0"), "status": "in_progress",
               "summary": [], "content": []})
    );
    assert_eq!(
        events[3].data["part"],
        json!({"type": "reasoning_text", "text": ""})
    );
    assert_eq!(
        events[4].data,
        json!({"type": "response.reasoning_text.delta", "sequence_number": 4,
               "item_id": format!("rs_{hex}_0"), "output_index": 0, "content_index": 0,
               "delta": "Weather "})
    );
    assert_eq!(events[6].data["text"], "Weather needed.");
    assert_eq!(events[9].data["output_index"], 1);
    let call = json!({"type": "function_call", "id": format!("fc_{hex}_2"), "call_id": "call_1",
                      "name": "get_weather", "arguments": "{\"city\":\"Paris\"}",
                      "status": "completed"});
    assert_eq!(
        events[15].data["item"],
        json!({"type": "function_call", "id": format!("fc_{hex}_2"), "call_id": "call_1",
               "name": "get_weather", "arguments": "", "status": "in_progress"})
    );
    assert_eq!(
        events[16].data,
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 16,
               "item_id": format!("fc_{hex}_2"), "output_index": 2,
               "delta": "{\"city\":\"Paris\"}"})
    );
    assert_eq!(
        events[17].data,
        json!({"type": "response.function_call_arguments.done", "sequence_number": 17,
               "item_id": format!("fc_{hex}_2"), "output_index": 2,
               "arguments": "{\"city\":\"Paris\"}"})
    );
    assert_eq!(events[18].data["item"], call);
    let completed = &events[19].data["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["output"].as_array().unwrap().len(), 3);
    assert_eq!(completed["output"][2], call);
    assert_eq!(completed["usage"]["input_tokens"], 11);
    assert_eq!(completed["usage"]["output_tokens"], 7);
    assert_eq!(completed["tools"], tools);

    // The client runs the call and answers it.
    server.push(Reply::Stream(vec![
        text("Sunny in Paris."),
        finish("stop"),
        usage(30, 4),
    ]));
    let answer = create(
        &app,
        &token,
        json!({"model": "gpt", "previous_response_id": id,
               "input": [{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.body["status"], "completed");
    assert_eq!(answer.body["previous_response_id"], id.as_str());
    assert_eq!(
        answer.body["output"][0]["content"][0]["text"],
        "Sunny in Paris."
    );
    let sent = &server.requests()[1].body["messages"];
    let tool = sent
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the model got the call's output");
    assert_eq!(tool["tool_call_id"], "call_1");
    assert_eq!(tool["content"], "sunny");
    // The function tools persist in the conversation: they are sent again.
    assert_eq!(
        server.requests()[1].body["tools"][0]["function"]["name"],
        "get_weather"
    );
}

#[tokio::test]
async fn a_failed_turn_ends_the_stream_with_response_failed() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_model(&server).await;
    let (_, token) = app.new_tenant().await;
    server.push(Reply::Break(vec![text("Partial ")]));
    let events = open_stream(&app, &token, json!({"model": "gpt", "input": "break"}))
        .await
        .collect()
        .await;
    assert_numbered(&events);
    let n = events.len();
    assert_eq!(
        names(&events)[n - 3..],
        ["response.output_item.done", "response.failed", DONE]
    );
    let failed = &events[n - 2].data["response"];
    assert_eq!(failed["output"][0]["content"][0]["text"], "Partial ");
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], "provider_error");
    assert!(failed["error"]["message"].is_string());
    assert_eq!(failed["completed_at"], Value::Null);
}
