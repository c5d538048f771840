//! Another tenant's response, conversation and items are not found on every route of the
//! face, and nothing of them changes; a response started here is continued over AAP and
//! an AAP turn is continued here by its id.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::wire::create;
use crate::helpers::{Reply, spawn_app};

fn assert_not_found(reply: &Reply, route: &str) {
    assert_eq!(
        reply.status,
        StatusCode::NOT_FOUND,
        "{route}: {}",
        reply.text
    );
    assert_eq!(
        reply.body["error"]["type"], "invalid_request_error",
        "{route}"
    );
    assert!(
        reply.body["error"]["message"].is_string(),
        "{route}: {}",
        reply.text
    );
}

#[tokio::test]
async fn another_tenants_response_conversation_and_items_are_not_found_on_every_route() {
    let app = spawn_app().await;
    let (_, owner) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let made = app
        .post("/v1/conversations", &owner, json!({"model": "echo"}))
        .await;
    let conv = made.body["id"].as_str().unwrap().to_owned();
    let session = format!("sess_{}", conv.strip_prefix("conv_").unwrap());
    let reply = create(
        &app,
        &owner,
        json!({"model": "echo", "input": "mine", "conversation": conv}),
    )
    .await;
    let id = reply.body["id"].as_str().unwrap().to_owned();
    let items = format!("/v1/conversations/{conv}/items");
    let item = app.get(&items, &owner).await.body["first_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let routes: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, format!("/v1/responses/{id}"), None),
        (Method::GET, format!("/v1/responses/{id}?stream=true"), None),
        (
            Method::POST,
            format!("/v1/responses/{id}/cancel"),
            Some(json!({})),
        ),
        (Method::GET, format!("/v1/responses/{id}/input_items"), None),
        (Method::DELETE, format!("/v1/responses/{id}"), None),
        (Method::GET, format!("/v1/conversations/{conv}"), None),
        (Method::GET, format!("/v1/conversations/{session}"), None),
        (
            Method::POST,
            format!("/v1/conversations/{conv}"),
            Some(json!({"metadata": {"stolen": "yes"}})),
        ),
        (Method::GET, items.clone(), None),
        (
            Method::POST,
            items.clone(),
            Some(json!({"items": [{"role": "user", "content": "intruder"}]})),
        ),
        (Method::GET, format!("{items}/{item}"), None),
        (Method::DELETE, format!("/v1/conversations/{conv}"), None),
    ];
    for (method, path, body) in &routes {
        let reply = app
            .request(method.clone(), path, Some(&other), body.as_ref())
            .await;
        assert_not_found(&reply, &format!("{method} {path}"));
    }

    // All of it is still there for its tenant, unchanged.
    let read = app.get(&format!("/v1/responses/{id}"), &owner).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert_eq!(read.body, reply.body);
    let conversation = app.get(&format!("/v1/conversations/{conv}"), &owner).await;
    assert_eq!(
        conversation.body["metadata"],
        json!({}),
        "{}",
        conversation.text
    );
    let listed = app.get(&items, &owner).await;
    assert_eq!(
        listed.body["data"].as_array().unwrap().len(),
        2,
        "{}",
        listed.text
    );
}

#[tokio::test]
async fn a_response_started_here_continues_over_aap_and_an_aap_turn_continues_here() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let first = create(
        &app,
        &token,
        json!({"model": "echo", "input": "from openai"}),
    )
    .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let first_id = first.body["id"].as_str().unwrap().to_owned();

    // The response's session, as AAP lists it, takes an AAP turn.
    let sessions = app.get("/sessions", &token).await;
    let session = sessions.body["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
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

    // That turn is now the latest response: continuing the first one would fork.
    let fork = create(
        &app,
        &token,
        json!({"model": "echo", "input": "x", "previous_response_id": first_id}),
    )
    .await;
    assert_eq!(fork.status, StatusCode::BAD_REQUEST, "{}", fork.text);
    assert_eq!(fork.body["error"]["param"], "previous_response_id");
    let turns = app.get(&format!("/sessions/{session}/turns"), &token).await;
    let aap_turn = turns.body["turns"][0]["turnId"].as_str().unwrap();
    let aap_response = format!("resp_{}", aap_turn.strip_prefix("turn_").unwrap());
    let next = create(
        &app,
        &token,
        json!({"model": "echo", "input": "back here", "previous_response_id": aap_response}),
    )
    .await;
    assert_eq!(next.status, StatusCode::OK, "{}", next.text);
    assert_eq!(next.body["previous_response_id"], aap_response.as_str());
    assert_eq!(next.body["output"][0]["content"][0]["text"], "back here");

    // One session holds the three turns, in order, on both faces.
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let users: Vec<&str> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["from openai", "from aap", "back here"]);
    let conv = format!("conv_{}", session.strip_prefix("sess_").unwrap());
    let items = app
        .get(&format!("/v1/conversations/{conv}/items?order=asc"), &token)
        .await;
    assert_eq!(
        items.body["data"].as_array().unwrap().len(),
        6,
        "{}",
        items.text
    );
}
