//! Errors in OpenAI's shape with their statuses, and another tenant's responses and
//! conversations not found.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::wire::create;
use crate::helpers::{Reply, spawn_app};

fn assert_error(reply: &Reply, status: StatusCode, kind: &str, param: Option<&str>) {
    assert_eq!(reply.status, status, "{}", reply.text);
    let error = reply.body["error"].as_object().expect("an error object");
    let mut keys: Vec<&str> = error.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["code", "message", "param", "type"], "{}", reply.text);
    assert_eq!(error["type"], kind, "{}", reply.text);
    assert_eq!(
        error["param"],
        param.map_or(Value::Null, |p| json!(p)),
        "{}",
        reply.text
    );
    assert!(!error["message"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn bad_requests_are_refused_in_openai_shape_naming_the_parameter() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let bad = StatusCode::BAD_REQUEST;
    let invalid = "invalid_request_error";
    let cases = [
        (json!({"input": "x"}), "model"),
        (json!({"model": "echo"}), "input"),
        (json!({"model": "echo", "input": 3}), "input"),
        (json!({"model": "echo@0", "input": "x"}), "model"),
        (
            json!({"model": "echo", "input": "x", "instructions": "Be terse"}),
            "instructions",
        ),
        (
            json!({"model": "echo", "input": "x", "store": false}),
            "store",
        ),
        (
            json!({"model": "echo", "input": "x", "tool_choice": "required"}),
            "tool_choice",
        ),
        (
            json!({"model": "echo", "input": "x", "tools": [{"type": "web_search"}]}),
            "tools[0].type",
        ),
        (
            json!({"model": "echo", "input": "x", "metadata": {"k": 1}}),
            "metadata.k",
        ),
        (
            json!({"model": "echo", "input": [{"type": "item_reference", "id": "msg_1"}]}),
            "input[0].type",
        ),
        (
            json!({"model": "echo", "input": [{"role": "robot", "content": "x"}]}),
            "input[0].role",
        ),
        (
            json!({"model": "echo", "input": [{"role": "assistant", "content": "x"}]}),
            "input",
        ),
        (
            json!({"model": "echo", "input": "x", "stream": "yes"}),
            "stream",
        ),
        (
            json!({"model": "echo", "input": "x", "previous_response_id": "resp_1",
                "conversation": "conv_1"}),
            "conversation",
        ),
    ];
    for (body, param) in cases {
        let reply = create(&app, &token, body.clone()).await;
        assert_error(&reply, bad, invalid, Some(param));
    }
    let unknown = create(
        &app,
        &token,
        json!({"model": "echo", "input": "x", "previous_response_id": "resp_0194f0c2a1b27c3d8e9f0a1b2c3d4e5f"}),
    )
    .await;
    assert_error(&unknown, bad, invalid, Some("previous_response_id"));
    assert_eq!(unknown.body["error"]["code"], "previous_response_not_found");

    let model = create(&app, &token, json!({"model": "nobody", "input": "x"})).await;
    assert_error(&model, StatusCode::NOT_FOUND, invalid, Some("model"));
    assert_eq!(model.body["error"]["code"], "model_not_found");

    let conversation = create(
        &app,
        &token,
        json!({"model": "echo", "input": "x", "conversation": "conv_0194f0c2a1b27c3d8e9f0a1b2c3d4e5f"}),
    )
    .await;
    assert_error(
        &conversation,
        StatusCode::NOT_FOUND,
        invalid,
        Some("conversation"),
    );

    let not_json = app
        .client
        .post(app.url("/v1/responses"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), bad);
    let body: Value = not_json.json().await.unwrap();
    assert_eq!(body["error"]["param"], "body");

    let query = app
        .get(
            "/v1/responses/resp_0194f0c2a1b27c3d8e9f0a1b2c3d4e5f?stream=true&starting_after=-1",
            &token,
        )
        .await;
    assert_error(&query, bad, invalid, Some("starting_after"));
    let missing = app
        .get(
            "/v1/responses/resp_0194f0c2a1b27c3d8e9f0a1b2c3d4e5f",
            &token,
        )
        .await;
    assert_error(&missing, StatusCode::NOT_FOUND, invalid, None);
    let route = app.get("/v1/nothing", &token).await;
    assert_error(&route, StatusCode::NOT_FOUND, invalid, None);
    let method = app
        .request(Method::PUT, "/v1/responses", Some(&token), Some(&json!({})))
        .await;
    assert_error(&method, StatusCode::METHOD_NOT_ALLOWED, invalid, None);
}

#[tokio::test]
async fn the_api_key_is_the_tenants_bearer_token() {
    let app = spawn_app().await;
    let none = app
        .request(
            Method::POST,
            "/v1/responses",
            None,
            Some(&json!({"model": "echo", "input": "x"})),
        )
        .await;
    assert_error(
        &none,
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        None,
    );
    assert_eq!(none.headers["www-authenticate"], "Bearer");
    let wrong = create(&app, "not-a-token", json!({"model": "echo", "input": "x"})).await;
    assert_error(
        &wrong,
        StatusCode::UNAUTHORIZED,
        "authentication_error",
        None,
    );
}

#[tokio::test]
async fn another_tenants_responses_and_conversations_are_not_found() {
    let app = spawn_app().await;
    let (_, owner) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let session = app
        .create_session(&owner, json!({"agent": {"name": "echo"}}))
        .await;
    let reply = create(
        &app,
        &owner,
        json!({"model": "echo", "input": "mine", "conversation": session}),
    )
    .await;
    let id = reply.body["id"].as_str().unwrap().to_owned();
    let conv = reply.body["conversation"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    for path in [
        format!("/v1/responses/{id}"),
        format!("/v1/responses/{id}?stream=true"),
    ] {
        let read = app.get(&path, &other).await;
        assert_error(&read, StatusCode::NOT_FOUND, "invalid_request_error", None);
    }
    let continued = create(
        &app,
        &other,
        json!({"model": "echo", "input": "x", "previous_response_id": id}),
    )
    .await;
    assert_eq!(continued.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        continued.body["error"]["code"],
        "previous_response_not_found"
    );
    for conversation in [json!(conv), json!(session), json!({"id": conv})] {
        let joined = create(
            &app,
            &other,
            json!({"model": "echo", "input": "x", "conversation": conversation}),
        )
        .await;
        assert_error(
            &joined,
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("conversation"),
        );
    }
    // The owner still reads it.
    assert_eq!(
        app.get(&format!("/v1/responses/{id}"), &owner).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn models_are_the_agents_the_tenant_may_use() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let list = app.get("/v1/models", &token).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    assert_eq!(list.body["object"], "list");
    let ids: Vec<&str> = list.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["echo", "tooly", "slow", "thinker"]);
    assert_eq!(
        list.body["data"][0],
        json!({"id": "echo", "object": "model", "created": 0, "owned_by": "agentry"})
    );
    let one = app.get("/v1/models/echo", &token).await;
    assert_eq!(one.body, list.body["data"][0]);
    let missing = app.get("/v1/models/nobody", &token).await;
    assert_error(
        &missing,
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        Some("model"),
    );
    assert_eq!(missing.body["error"]["code"], "model_not_found");
    let anonymous = app.request(Method::GET, "/v1/models", None, None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}
