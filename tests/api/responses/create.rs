//! `POST /v1/responses` and `GET /v1/responses/{id}` as JSON: the Response object, how a
//! response continues a conversation, background responses, and sessions shared with AAP.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::wire::{assert_response_keys, create, names, resume};
use crate::helpers::spawn_app;

fn hex_of(id: &str, prefix: &str) -> String {
    id.strip_prefix(prefix).expect(prefix).to_owned()
}

#[tokio::test]
async fn a_response_answers_in_the_openai_shape_and_reads_back_the_same() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let reply = create(
        &app,
        &token,
        json!({"model": "echo", "input": "Hello, world!", "metadata": {"ticket": "42"},
               "temperature": 0.2, "include": []}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let response = &reply.body;
    assert_response_keys(response);
    let id = response["id"].as_str().unwrap();
    let hex = hex_of(id, "resp_");
    assert_eq!(hex.len(), 32);
    assert_eq!(response["object"], "response");
    assert_eq!(response["status"], "completed");
    assert_eq!(response["model"], "echo");
    assert_eq!(response["background"], false);
    assert_eq!(response["store"], true);
    assert_eq!(response["metadata"], json!({"ticket": "42"}));
    assert_eq!(response["previous_response_id"], Value::Null);
    assert_eq!(response["conversation"], Value::Null);
    assert_eq!(response["error"], Value::Null);
    assert_eq!(response["instructions"], Value::Null);
    assert!(response["created_at"].is_i64());
    assert!(response["completed_at"].as_i64().unwrap() >= response["created_at"].as_i64().unwrap());
    assert_eq!(
        response["output"],
        json!([{"type": "message", "id": format!("msg_{hex}_0"), "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello, world!", "annotations": []}]}])
    );
    let usage = &response["usage"];
    let (input, output) = (
        usage["input_tokens"].as_u64().unwrap(),
        usage["output_tokens"].as_u64().unwrap(),
    );
    assert!(input > 0 && output > 0, "{usage}");
    assert_eq!(usage["total_tokens"], input + output);
    assert_eq!(usage["input_tokens_details"], json!({"cached_tokens": 0}));
    assert_eq!(
        usage["output_tokens_details"],
        json!({"reasoning_tokens": 0})
    );

    let read = app.get(&format!("/v1/responses/{id}"), &token).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(&read.body, response);
}

#[tokio::test]
async fn previous_response_id_continues_from_the_latest_response_only() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let first = create(&app, &token, json!({"model": "echo", "input": "one"})).await;
    let first_id = first.body["id"].as_str().unwrap().to_owned();
    let second = create(
        &app,
        &token,
        json!({"model": "echo", "input": [{"role": "user", "content": "two"}],
               "previous_response_id": first_id}),
    )
    .await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_eq!(second.body["previous_response_id"], first_id.as_str());
    assert_eq!(second.body["output"][0]["content"][0]["text"], "two");

    // One session holds both turns: AAP reads it.
    let sessions = app.get("/sessions", &token).await;
    let sessions = sessions.body["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let session = sessions[0]["sessionId"].as_str().unwrap();
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let texts: Vec<Value> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| json!([m["role"], m["content"]]))
        .collect();
    assert_eq!(
        texts,
        [
            json!(["user", "one"]),
            json!(["assistant", [{"type": "text", "text": "one"}]]),
            json!(["user", "two"]),
            json!(["assistant", [{"type": "text", "text": "two"}]])
        ]
    );

    let fork = create(
        &app,
        &token,
        json!({"model": "echo", "input": "three", "previous_response_id": first_id}),
    )
    .await;
    assert_eq!(fork.status, StatusCode::BAD_REQUEST);
    assert_eq!(fork.body["error"]["param"], "previous_response_id");
    assert!(
        fork.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not the latest response"),
        "{}",
        fork.text
    );
}

#[tokio::test]
async fn input_items_seed_a_new_session_with_their_history() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let reply = create(
        &app,
        &token,
        json!({"model": "echo", "input": [
            {"role": "developer", "content": "Answer briefly."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Look"},
                {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "auto"}
            ]}
        ]}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["status"], "completed");
    let sessions = app.get("/sessions", &token).await;
    let session = sessions.body["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let roles: Vec<&str> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user", "assistant"]);
    let image = &history.body["history"]["full"][3]["content"][1];
    assert_eq!(
        image,
        &json!({"type": "image", "url": "https://example.com/cat.png"})
    );
}

#[tokio::test]
async fn a_background_response_answers_queued_and_its_stream_replays_to_the_end() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let reply = create(
        &app,
        &token,
        json!({"model": "echo", "input": "later", "background": true}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_response_keys(&reply.body);
    assert_eq!(reply.body["status"], "queued");
    assert_eq!(reply.body["background"], true);
    assert_eq!(reply.body["output"], json!([]));
    assert_eq!(reply.body["usage"], Value::Null);
    let id = reply.body["id"].as_str().unwrap();

    let events = resume(&app, &token, id, None).await.collect().await;
    assert_eq!(
        names(&events)[..2],
        ["response.created", "response.in_progress"]
    );
    assert_eq!(events[0].data["response"]["status"], "queued");
    assert_eq!(
        names(&events)[events.len() - 2..],
        ["response.completed", "[DONE]"]
    );

    let read = app.get(&format!("/v1/responses/{id}"), &token).await;
    assert_eq!(read.body["status"], "completed");
    assert_eq!(read.body["background"], true);
    assert_eq!(read.body["output"][0]["content"][0]["text"], "later");
    assert_eq!(read.body, events[events.len() - 2].data["response"]);
}

#[tokio::test]
async fn a_conversation_is_a_session_that_aap_continues_and_the_reverse() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let conv = format!("conv_{}", hex_of(&session, "sess_"));

    // A session made over AAP is continued here, named by its own id.
    let first = create(
        &app,
        &token,
        json!({"model": "echo", "input": "from openai", "conversation": session}),
    )
    .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.body["conversation"], json!({"id": conv}));

    // AAP continues it.
    let frames = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [{"role": "user", "content": "from aap"}]}),
        )
        .await
        .collect()
        .await;
    assert_eq!(frames.last().unwrap().event, "turn_stop");

    // And so does this face again, by the conversation's id.
    let third = create(
        &app,
        &token,
        json!({"model": "echo", "input": "again", "conversation": {"id": conv}}),
    )
    .await;
    assert_eq!(third.status, StatusCode::OK, "{}", third.text);
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let users: Vec<&str> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_else(|| panic!("{m}")))
        .collect();
    assert_eq!(users, ["from openai", "from aap", "again"]);

    // A turn AAP started is a response too, by its id.
    let turns = app.get(&format!("/sessions/{session}/turns"), &token).await;
    // Newest first: the third response, then AAP's turn.
    let aap_turn = turns.body["turns"][1]["turnId"].as_str().unwrap();
    let read = app
        .get(
            &format!("/v1/responses/resp_{}", hex_of(aap_turn, "turn_")),
            &token,
        )
        .await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert_eq!(read.body["status"], "completed");
    assert_eq!(read.body["output"][0]["content"][0]["text"], "from aap");
}
