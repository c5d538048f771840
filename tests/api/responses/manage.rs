//! Cancel, delete and input items of a response, and a background response a killed
//! server left running.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::{DONE, Events, app_with_model, create, names, resume};
use crate::helpers::spawn_app;
use crate::process::{Deployment, SLOW_AGENT};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment, usage};

#[tokio::test]
async fn a_background_response_is_cancelled_once_and_its_stream_ends_there() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_model(&server).await;
    let (_, token) = app.new_tenant().await;
    server.push(Reply::Hang);
    let reply = create(
        &app,
        &token,
        json!({"model": "gpt", "input": "wait", "background": true}),
    )
    .await;
    let id = reply.body["id"].as_str().unwrap().to_owned();
    server.wait_for_requests(1).await;

    let cancelled = app
        .post(&format!("/v1/responses/{id}/cancel"), &token, json!({}))
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(cancelled.body["status"], "cancelled");
    assert_eq!(cancelled.body["error"], Value::Null);
    assert_eq!(cancelled.body["id"], id.as_str());
    let again = app
        .post(&format!("/v1/responses/{id}/cancel"), &token, json!({}))
        .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body, cancelled.body);
    assert_eq!(
        app.get(&format!("/v1/responses/{id}"), &token).await.body,
        cancelled.body
    );

    let events = resume(&app, &token, &id, None).await.collect().await;
    let n = events.len();
    assert_eq!(names(&events)[n - 2..], ["response.failed", DONE]);
    assert_eq!(events[n - 2].data["response"]["status"], "cancelled");

    server.push(Reply::Stream(vec![
        text("Now."),
        finish("stop"),
        usage(1, 1),
    ]));
    let plain = create(&app, &token, json!({"model": "gpt", "input": "now"})).await;
    assert_eq!(plain.status, StatusCode::OK, "{}", plain.text);
    let refused = app
        .post(
            &format!(
                "/v1/responses/{}/cancel",
                plain.body["id"].as_str().unwrap()
            ),
            &token,
            json!({}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.body["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn a_deleted_response_is_not_found_and_its_conversation_keeps_its_history() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let reply = create(&app, &token, json!({"model": "echo", "input": "forget me"})).await;
    let id = reply.body["id"].as_str().unwrap().to_owned();
    let deleted = app.delete(&format!("/v1/responses/{id}"), &token).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert_eq!(
        deleted.body,
        json!({"id": id, "object": "response", "deleted": true})
    );
    for path in [
        format!("/v1/responses/{id}"),
        format!("/v1/responses/{id}/input_items"),
        format!("/v1/responses/{id}?stream=true"),
    ] {
        assert_eq!(
            app.get(&path, &token).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    assert_eq!(
        app.delete(&format!("/v1/responses/{id}"), &token)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let sessions = app.get("/sessions", &token).await;
    assert_eq!(sessions.body["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn input_items_are_what_the_response_brought_paginated_newest_first() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_model(&server).await;
    let (_, token) = app.new_tenant().await;
    server.push(Reply::Stream(vec![
        tool_fragment(0, Some("call_a"), Some("lookup"), "{\"q\":\"a\"}"),
        tool_fragment(1, Some("call_b"), Some("lookup"), "{\"q\":\"b\"}"),
        finish("tool_calls"),
        usage(5, 5),
    ]));
    let tools = json!([{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]);
    let first = create(
        &app,
        &token,
        json!({"model": "gpt", "input": "Look up a and b", "tools": tools}),
    )
    .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let first_id = first.body["id"].as_str().unwrap().to_owned();
    let calls: Vec<&str> = first.body["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["call_a", "call_b"]);

    let items = app
        .get(&format!("/v1/responses/{first_id}/input_items"), &token)
        .await;
    assert_eq!(items.status, StatusCode::OK, "{}", items.text);
    let hex = first_id.strip_prefix("resp_").unwrap();
    let item = json!({"type": "message", "id": format!("msg_{hex}_in0"), "status": "completed",
                      "role": "user", "content": [{"type": "input_text", "text": "Look up a and b"}]});
    assert_eq!(
        items.body,
        json!({"object": "list", "data": [item], "first_id": item["id"], "last_id": item["id"],
               "has_more": false})
    );

    server.push(Reply::Stream(vec![
        text("Both found."),
        finish("stop"),
        usage(9, 2),
    ]));
    let second = create(
        &app,
        &token,
        json!({"model": "gpt", "previous_response_id": first_id, "input": [
            {"type": "function_call_output", "call_id": "call_a", "output": "A"},
            {"type": "function_call_output", "call_id": "call_b", "output": "B"}
        ]}),
    )
    .await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    let second_id = second.body["id"].as_str().unwrap();
    let path = format!("/v1/responses/{second_id}/input_items");
    let page = app.get(&format!("{path}?limit=1"), &token).await;
    assert_eq!(page.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(page.body["data"][0]["type"], "function_call_output");
    assert_eq!(page.body["data"][0]["call_id"], "call_b");
    assert_eq!(page.body["data"][0]["output"], "B");
    assert_eq!(page.body["has_more"], true);
    let after = page.body["last_id"].as_str().unwrap();
    let next = app
        .get(&format!("{path}?limit=1&after={after}"), &token)
        .await;
    assert_eq!(next.body["data"][0]["call_id"], "call_a");
    assert_eq!(next.body["has_more"], false);
    let ascending = app.get(&format!("{path}?order=asc"), &token).await;
    let order: Vec<&str> = ascending.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["call_a", "call_b"]);
    for bad in ["limit=0", "limit=101", "order=up", "after=nothing"] {
        let refused = app.get(&format!("{path}?{bad}"), &token).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn a_background_response_a_killed_server_left_running_fails_and_replays_to_that_end() {
    let setup = Deployment::new(SLOW_AGENT).await;
    let (_, token) = setup.tenant_token("responses");
    let server = setup.start(&[]);
    let client = reqwest::Client::new();
    let created: Value = client
        .post(server.url("/v1/responses"))
        .bearer_auth(&token)
        .json(&json!({"model": "slow", "input": "k".repeat(200), "background": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let stream_url = format!("/v1/responses/{id}?stream=true");
    let mut live = Events::new(
        client
            .get(server.url(&stream_url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    );
    let mut seen = Vec::new();
    while seen.len() < 6 {
        seen.push(live.next().await.unwrap());
    }
    assert_eq!(seen[5].event, "response.output_text.delta");
    server.kill();
    drop(live);

    let server = setup.start(&[]);
    setup.db.wait_for_no_unfinished_turns().await;
    let read: Value = client
        .get(server.url(&format!("/v1/responses/{id}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["status"], "failed");
    assert_eq!(read["error"]["code"], "interrupted");
    assert!(
        read["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    let replay = Events::new(
        client
            .get(server.url(&stream_url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    )
    .collect()
    .await;
    assert_eq!(
        replay[..seen.len()],
        seen[..],
        "what the client saw is replayed as it was"
    );
    let n = replay.len();
    assert_eq!(names(&replay)[n - 2..], ["response.failed", DONE]);
    assert_eq!(replay[n - 2].data["response"], read);
    let tail = Events::new(
        client
            .get(server.url(&format!("{stream_url}&starting_after=5")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    )
    .collect()
    .await;
    assert_eq!(tail, replay[6..]);
}
