//! The Conversations API over sessions: a session read as a conversation and its history
//! as items (paged), deleting it, another tenant's not found, bad queries refused.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::wire::create;
use crate::helpers::{Reply, TestApp, spawn_app};

fn assert_error(reply: &Reply, status: StatusCode, param: Option<&str>) {
    assert_eq!(reply.status, status, "{}", reply.text);
    let error = reply.body["error"].as_object().expect("an error object");
    let mut keys: Vec<&str> = error.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["code", "message", "param", "type"], "{}", reply.text);
    assert_eq!(error["type"], "invalid_request_error", "{}", reply.text);
    assert_eq!(error["param"], param.map_or(Value::Null, |p| json!(p)));
    assert!(!error["message"].as_str().unwrap().is_empty());
}

fn user(id: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "status": "completed", "role": "user",
           "content": [{"type": "input_text", "text": text}]})
}

fn assistant(id: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// An AAP session of `echo` with a turn of this face and one of AAP: (session, conv id).
async fn two_turns(app: &TestApp, token: &str) -> (String, String) {
    let session = app
        .create_session(token, json!({"agent": {"name": "echo"}}))
        .await;
    let conv = format!("conv_{}", session.strip_prefix("sess_").unwrap());
    let first = create(
        app,
        token,
        json!({"model": "echo", "input": "from openai", "conversation": conv}),
    )
    .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let frames = app
        .stream_turn(
            token,
            &session,
            json!({"stream": "delta", "messages": [{"role": "user", "content": "from aap"}]}),
        )
        .await
        .collect()
        .await;
    assert_eq!(frames.last().unwrap().event, "turn_stop");
    (session, conv)
}

#[tokio::test]
async fn a_session_reads_as_a_conversation_with_its_history_as_items() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (session, conv) = two_turns(&app, &token).await;
    let hex = session.strip_prefix("sess_").unwrap();

    let read = app.get(&format!("/v1/conversations/{conv}"), &token).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    let created_at = read.body["created_at"]
        .as_i64()
        .expect("created_at seconds");
    assert!(created_at > 1_700_000_000);
    assert_eq!(
        read.body,
        json!({"id": conv, "object": "conversation", "created_at": created_at, "metadata": {}})
    );
    // The session's own id names it too.
    let by_session = app
        .get(&format!("/v1/conversations/{session}"), &token)
        .await;
    assert_eq!(by_session.body, read.body);

    let all = [
        user(&format!("msg_{hex}_0"), "from openai"),
        assistant(&format!("msg_{hex}_1"), "from openai"),
        user(&format!("msg_{hex}_2"), "from aap"),
        assistant(&format!("msg_{hex}_3"), "from aap"),
    ];
    let items = app
        .get(&format!("/v1/conversations/{conv}/items?order=asc"), &token)
        .await;
    assert_eq!(items.status, StatusCode::OK, "{}", items.text);
    assert_eq!(
        items.body,
        json!({"object": "list", "data": all, "first_id": all[0]["id"],
               "last_id": all[3]["id"], "has_more": false})
    );

    // Newest first by default, in pages.
    let first = app
        .get(&format!("/v1/conversations/{conv}/items?limit=3"), &token)
        .await;
    assert_eq!(
        first.body,
        json!({"object": "list", "data": [all[3], all[2], all[1]], "first_id": all[3]["id"],
               "last_id": all[1]["id"], "has_more": true})
    );
    let last_id = first.body["last_id"].as_str().unwrap();
    let rest = app
        .get(
            &format!("/v1/conversations/{conv}/items?limit=3&after={last_id}"),
            &token,
        )
        .await;
    assert_eq!(
        rest.body,
        json!({"object": "list", "data": [all[0]], "first_id": all[0]["id"],
               "last_id": all[0]["id"], "has_more": false})
    );

    let item = app
        .get(
            &format!("/v1/conversations/{conv}/items/msg_{hex}_2"),
            &token,
        )
        .await;
    assert_eq!(item.status, StatusCode::OK, "{}", item.text);
    assert_eq!(item.body, all[2]);
    let missing = app
        .get(
            &format!("/v1/conversations/{conv}/items/msg_{hex}_9"),
            &token,
        )
        .await;
    assert_error(&missing, StatusCode::NOT_FOUND, None);

    // The conversation goes on here and reads on.
    let more = create(
        &app,
        &token,
        json!({"model": "echo", "input": "again", "conversation": {"id": conv}}),
    )
    .await;
    assert_eq!(more.status, StatusCode::OK, "{}", more.text);
    let newest = app
        .get(&format!("/v1/conversations/{conv}/items?limit=1"), &token)
        .await;
    assert_eq!(
        newest.body["data"],
        json!([assistant(&format!("msg_{hex}_5"), "again")])
    );
    assert_eq!(newest.body["has_more"], true);
}

#[tokio::test]
async fn a_function_call_and_its_output_are_items_of_the_conversation() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    // A new conversation seeded with a function call round trip.
    let reply = create(
        &app,
        &token,
        json!({"model": "echo", "input": [
            {"role": "user", "content": "weather?"},
            {"type": "function_call", "call_id": "call_1", "name": "weather",
             "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "thanks"},
        ]}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let turn = reply.body["id"]
        .as_str()
        .unwrap()
        .strip_prefix("resp_")
        .unwrap();
    let turns = app.get("/sessions", &token).await;
    let session = turns.body["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let hex = session.strip_prefix("sess_").unwrap();
    assert_ne!(hex, turn);
    let items = app
        .get(
            &format!("/v1/conversations/{session}/items?order=asc"),
            &token,
        )
        .await;
    assert_eq!(items.status, StatusCode::OK, "{}", items.text);
    let data = items.body["data"].as_array().unwrap();
    assert_eq!(data[0], user(&format!("msg_{hex}_0"), "weather?"));
    assert_eq!(
        data[1],
        json!({"type": "function_call", "id": format!("fc_{hex}_1_0"), "call_id": "call_1",
               "name": "weather", "arguments": "{\"city\":\"Oslo\"}", "status": "completed"})
    );
    assert_eq!(
        data[2],
        json!({"type": "function_call_output", "id": format!("fco_{hex}_2"),
               "call_id": "call_1", "output": "sunny", "status": "completed"})
    );
    assert_eq!(data[3], assistant(&format!("msg_{hex}_3"), "Sunny."));
    assert_eq!(data[4], user(&format!("msg_{hex}_4"), "thanks"));
    let call = app
        .get(
            &format!("/v1/conversations/{session}/items/fc_{hex}_1_0"),
            &token,
        )
        .await;
    assert_eq!(call.body, data[1]);
}

#[tokio::test]
async fn deleting_a_conversation_deletes_its_session() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (session, conv) = two_turns(&app, &token).await;
    let deleted = app
        .delete(&format!("/v1/conversations/{conv}"), &token)
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.text);
    assert_eq!(
        deleted.body,
        json!({"id": conv, "object": "conversation.deleted", "deleted": true})
    );
    assert_eq!(
        app.get(&format!("/sessions/{session}"), &token)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    for path in [
        format!("/v1/conversations/{conv}"),
        format!("/v1/conversations/{conv}/items"),
    ] {
        assert_error(&app.get(&path, &token).await, StatusCode::NOT_FOUND, None);
    }
    assert_error(
        &app.delete(&format!("/v1/conversations/{conv}"), &token)
            .await,
        StatusCode::NOT_FOUND,
        None,
    );
}

#[tokio::test]
async fn another_tenants_conversation_and_items_are_not_found() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let (session, conv) = two_turns(&app, &token).await;
    let hex = session.strip_prefix("sess_").unwrap();
    for path in [
        format!("/v1/conversations/{conv}"),
        format!("/v1/conversations/{session}"),
        format!("/v1/conversations/{conv}/items"),
        format!("/v1/conversations/{conv}/items/msg_{hex}_0"),
    ] {
        assert_error(&app.get(&path, &other).await, StatusCode::NOT_FOUND, None);
    }
    assert_error(
        &app.delete(&format!("/v1/conversations/{conv}"), &other)
            .await,
        StatusCode::NOT_FOUND,
        None,
    );
    // Still there for its tenant.
    let mine = app.get(&format!("/v1/conversations/{conv}"), &token).await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.text);
}

#[tokio::test]
async fn bad_queries_and_unknown_ids_are_refused_in_openai_shape() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (_, conv) = two_turns(&app, &token).await;
    let items = format!("/v1/conversations/{conv}/items");
    for (query, param) in [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("order=up", "order"),
        ("after=msg_nothere", "after"),
    ] {
        let reply = app.get(&format!("{items}?{query}"), &token).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, Some(param));
    }
    for id in ["conv_x", "conv_0194f0c2a1b27c3d8e9f0a1b2c3d4e5f", "nothing"] {
        assert_error(
            &app.get(&format!("/v1/conversations/{id}"), &token).await,
            StatusCode::NOT_FOUND,
            None,
        );
    }
    let reply = app
        .request(
            Method::PUT,
            &format!("/v1/conversations/{conv}"),
            Some(&token),
            Some(&json!({})),
        )
        .await;
    assert_error(&reply, StatusCode::METHOD_NOT_ALLOWED, None);
    // Items are never deleted.
    let first = app.get(&format!("{items}?order=asc"), &token).await.body["first_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let removed = app.delete(&format!("{items}/{first}"), &token).await;
    assert_error(&removed, StatusCode::METHOD_NOT_ALLOWED, None);
    let after = app.get(&format!("{items}?order=asc"), &token).await;
    assert_eq!(after.body["data"].as_array().unwrap().len(), 4);
    assert_eq!(after.body["first_id"], first.as_str());
}

#[tokio::test]
async fn a_conversation_made_here_is_seeded_and_continued_over_aap() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let made = app
        .post(
            "/v1/conversations",
            &token,
            json!({"model": "echo", "metadata": {}, "items": [
                {"role": "user", "content": "hi"},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "hello"}]},
            ]}),
        )
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.text);
    let conv = made.body["id"].as_str().unwrap().to_owned();
    let hex = conv.strip_prefix("conv_").unwrap().to_owned();
    assert_eq!(hex.len(), 32);
    let created_at = made.body["created_at"].as_i64().unwrap();
    assert_eq!(
        made.body,
        json!({"id": conv, "object": "conversation", "created_at": created_at, "metadata": {}})
    );
    assert_eq!(
        app.get(&format!("/v1/conversations/{conv}"), &token)
            .await
            .body,
        made.body
    );

    // AAP continues the session it is.
    let session = format!("sess_{hex}");
    let frames = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [{"role": "user", "content": "over aap"}]}),
        )
        .await
        .collect()
        .await;
    assert_eq!(frames.last().unwrap().event, "turn_stop");
    let items = app
        .get(&format!("/v1/conversations/{conv}/items?order=asc"), &token)
        .await;
    assert_eq!(
        items.body["data"],
        json!([
            user(&format!("msg_{hex}_0"), "hi"),
            assistant(&format!("msg_{hex}_1"), "hello"),
            user(&format!("msg_{hex}_2"), "over aap"),
            assistant(&format!("msg_{hex}_3"), "over aap"),
        ])
    );
    // And this face, by the conversation.
    let next = create(
        &app,
        &token,
        json!({"model": "echo", "input": "here", "conversation": conv}),
    )
    .await;
    assert_eq!(next.status, StatusCode::OK, "{}", next.text);
    assert_eq!(next.body["conversation"], json!({"id": conv}));
}

#[tokio::test]
async fn a_bad_conversation_body_is_refused_naming_the_field() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    for (body, status, param) in [
        (json!({}), StatusCode::BAD_REQUEST, "model"),
        (json!({"model": 7}), StatusCode::BAD_REQUEST, "model"),
        (
            json!({"model": "echo", "metadata": {"a": 1}}),
            StatusCode::BAD_REQUEST,
            "metadata.a",
        ),
        (
            json!({"model": "echo", "items": "hi"}),
            StatusCode::BAD_REQUEST,
            "items",
        ),
        (
            json!({"model": "echo", "items": [{"type": "item_reference", "id": "x"}]}),
            StatusCode::BAD_REQUEST,
            "items[0]",
        ),
        (json!({"model": "nobody"}), StatusCode::NOT_FOUND, "model"),
    ] {
        let reply = app.post("/v1/conversations", &token, body.clone()).await;
        assert_eq!(reply.status, status, "{body}: {}", reply.text);
        let error = &reply.body["error"];
        assert!(
            error["param"].as_str().unwrap().starts_with(param),
            "{body}: {}",
            reply.text
        );
        assert!(!error["message"].as_str().unwrap().is_empty());
    }
    let reply = app
        .request(Method::POST, "/v1/conversations", Some(&token), None)
        .await;
    assert_error(&reply, StatusCode::BAD_REQUEST, Some("body"));
    assert_eq!(
        app.get("/sessions", &token).await.body["sessions"],
        json!([]),
        "nothing was created"
    );
}

#[tokio::test]
async fn a_conversation_brings_a_bounded_history() {
    let app = crate::helpers::spawn_app_on(
        std::sync::Arc::new(crate::helpers::TestDb::new().await),
        "[engine]\nmax_seed_messages = 3\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let items = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"role": "user", "content": format!("m{i}")}))
            .collect()
    };
    let refused = app
        .post(
            "/v1/conversations",
            &token,
            json!({"model": "echo", "items": items(4)}),
        )
        .await;
    assert_error(&refused, StatusCode::BAD_REQUEST, Some("items"));
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 3"),
        "{}",
        refused.text
    );
    let made = app
        .post(
            "/v1/conversations",
            &token,
            json!({"model": "echo", "items": items(3)}),
        )
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.text);
    let conv = made.body["id"].as_str().unwrap();
    let listed = app
        .get(&format!("/v1/conversations/{conv}/items"), &token)
        .await;
    assert_eq!(listed.body["data"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn a_conversations_metadata_is_kept_and_replaced() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let made = app
        .post(
            "/v1/conversations",
            &token,
            json!({"model": "echo", "metadata": {"topic": "demo"}}),
        )
        .await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.text);
    assert_eq!(made.body["metadata"], json!({"topic": "demo"}));
    let conv = made.body["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/conversations/{conv}");
    assert_eq!(app.get(&path, &token).await.body, made.body);

    let updated = app
        .post(
            &path,
            &token,
            json!({"metadata": {"topic": "other", "x": "y"}}),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    let mut expected = made.body.clone();
    expected["metadata"] = json!({"topic": "other", "x": "y"});
    assert_eq!(updated.body, expected);
    assert_eq!(app.get(&path, &token).await.body, expected);
    // A response's metadata stays the response's.
    let reply = create(
        &app,
        &token,
        json!({"model": "echo", "input": "x", "conversation": conv, "metadata": {"r": "1"}}),
    )
    .await;
    assert_eq!(reply.body["metadata"], json!({"r": "1"}));
    assert_eq!(app.get(&path, &token).await.body, expected);

    for (body, param) in [
        (json!({}), "metadata"),
        (json!({"metadata": "x"}), "metadata"),
        (json!({"metadata": {"k": 2}}), "metadata.k"),
    ] {
        let reply = app.post(&path, &token, body).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, Some(param));
    }
    assert_error(
        &app.post(&path, &other, json!({"metadata": {"a": "b"}}))
            .await,
        StatusCode::NOT_FOUND,
        None,
    );
    assert_eq!(app.get(&path, &token).await.body, expected);

    let cleared = app.post(&path, &token, json!({"metadata": null})).await;
    assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.text);
    assert_eq!(cleared.body["metadata"], json!({}));
    assert_eq!(app.get(&path, &token).await.body["metadata"], json!({}));
}
