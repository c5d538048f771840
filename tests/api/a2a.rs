//! The A2A face: cards, both bindings (JSON-RPC at `/a2a/{agent}`, HTTP+JSON under it) in
//! both versions (1.0 with `A2A-Version: 1.0`, 0.3 without, or under `/v1`).

mod conformance;
mod input;
mod isolation;
mod push;
mod statements;
mod streams;
mod versions;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::acp::frames::{Frame, SseReader};
use crate::helpers::{Reply, TestApp, spawn_app};

pub const V1: Option<&str> = Some("1.0");

/// A fresh message id.
pub fn message_id() -> String {
    format!("m-{}", uuid::Uuid::new_v4().simple())
}

/// A 1.0 user message.
pub fn message(text: &str) -> Value {
    json!({"messageId": message_id(), "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// A 0.3 user message.
pub fn message_03(text: &str) -> Value {
    json!({"kind": "message", "messageId": message_id(), "role": "user",
           "parts": [{"kind": "text", "text": text}]})
}

fn request(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    version: Option<&str>,
    body: Option<&Value>,
    last_event_id: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut request = app.client.request(method, app.url(path)).bearer_auth(token);
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    if let Some(id) = last_event_id {
        request = request.header("Last-Event-ID", id);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    request
}

async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    Reply {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    }
}

/// A JSON-RPC call to `agent`'s endpoint.
pub async fn rpc(
    app: &TestApp,
    agent: &str,
    token: &str,
    version: Option<&str>,
    method: &str,
    params: Value,
) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": "r1", "method": method, "params": params});
    let path = format!("/a2a/{agent}");
    reply(
        request(app, Method::POST, &path, token, version, Some(&body), None)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// A JSON-RPC call's result (it must have one).
pub async fn rpc_ok(
    app: &TestApp,
    agent: &str,
    token: &str,
    version: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let reply = rpc(app, agent, token, version, method, params).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["id"], "r1", "{}", reply.text);
    assert!(
        reply.body.get("error").is_none(),
        "{method}: {}",
        reply.text
    );
    reply.body["result"].clone()
}

/// A JSON-RPC call's error object (it must have one), HTTP 200.
pub async fn rpc_error(
    app: &TestApp,
    agent: &str,
    token: &str,
    version: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let reply = rpc(app, agent, token, version, method, params).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert!(
        reply.body.get("result").is_none(),
        "{method}: {}",
        reply.text
    );
    reply.body["error"].clone()
}

/// A REST call.
pub async fn rest(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    version: Option<&str>,
    body: Option<Value>,
) -> Reply {
    reply(
        request(app, method, path, token, version, body.as_ref(), None)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// A streaming JSON-RPC call.
pub async fn rpc_stream(
    app: &TestApp,
    agent: &str,
    token: &str,
    version: Option<&str>,
    method: &str,
    params: Value,
    last_event_id: Option<&str>,
) -> SseReader {
    let body = json!({"jsonrpc": "2.0", "id": "s1", "method": method, "params": params});
    let path = format!("/a2a/{agent}");
    let response = request(
        app,
        Method::POST,
        &path,
        token,
        version,
        Some(&body),
        last_event_id,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "{:?}",
        response.headers()
    );
    SseReader::new(response)
}

/// A streaming REST call.
pub async fn rest_stream(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    version: Option<&str>,
    body: Option<Value>,
    last_event_id: Option<&str>,
) -> SseReader {
    let response = request(
        app,
        method,
        path,
        token,
        version,
        body.as_ref(),
        last_event_id,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    SseReader::new(response)
}

/// The JSON-RPC results of stream frames.
pub fn results(frames: &[Frame]) -> Vec<Value> {
    frames
        .iter()
        .map(|f| {
            assert_eq!(f.data["jsonrpc"], "2.0", "{}", f.text);
            assert_eq!(f.data["id"], "s1", "{}", f.text);
            f.data["result"].clone()
        })
        .collect()
}

/// The text of a 1.0 stream's artifact chunks, in order.
pub fn streamed_text(events: &[Value]) -> String {
    events
        .iter()
        .filter_map(|e| e.get("artifactUpdate"))
        .flat_map(|u| u["artifact"]["parts"].as_array().unwrap().clone())
        .map(|p| p["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The text of a task's artifacts.
pub fn artifact_text(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .map(|a| {
            a.iter()
                .flat_map(|a| a["parts"].as_array().unwrap().clone())
                .map(|p| p["text"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Sends `text` to `agent` over JSON-RPC 1.0 (blocking); the task.
pub async fn send(app: &TestApp, agent: &str, token: &str, text: &str) -> Value {
    let result = rpc_ok(
        app,
        agent,
        token,
        V1,
        "SendMessage",
        json!({"message": message(text)}),
    )
    .await;
    result["task"].clone()
}

/// Sends `text` to `agent` and returns at once: the task.
pub async fn send_immediately(app: &TestApp, agent: &str, token: &str, params: Value) -> Value {
    let mut params = params;
    params["configuration"] = json!({"returnImmediately": true});
    rpc_ok(app, agent, token, V1, "SendMessage", params).await["task"].clone()
}

/// Reads a task's stream to its end (it is subscribed with `Last-Event-ID: 0`, replaying all).
pub async fn wait_for_end(app: &TestApp, agent: &str, token: &str, task: &str) {
    rpc_stream(
        app,
        agent,
        token,
        V1,
        "SubscribeToTask",
        json!({"id": task}),
        Some("0"),
    )
    .await
    .collect()
    .await;
}

#[tokio::test]
async fn every_agent_has_a_card_with_its_interfaces_cached_by_etag() {
    let app = spawn_app().await;
    let reply = app
        .request(
            Method::GET,
            "/a2a/echo/.well-known/agent-card.json",
            None,
            None,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let card = &reply.body;
    assert_eq!(card["name"], "echo");
    assert!(card["version"].is_string() && card["description"].is_string());
    let url = app.url("/a2a/echo");
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
        ])
    );
    // 0.3's own card fields, merged in as the official SDK's server does.
    assert_eq!(card["url"], url);
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(card["protocolVersion"], "0.3");
    assert_eq!(
        card["additionalInterfaces"],
        json!([{"url": url, "transport": "HTTP+JSON"}])
    );
    assert_eq!(card["security"], json!([{"bearer": []}]));
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true);
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    assert_eq!(
        card["securitySchemes"]["bearer"],
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"},
               "type": "http", "scheme": "Bearer", "bearerFormat": "JWT"})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"bearer": {}}}])
    );
    assert_eq!(card["defaultOutputModes"], json!(["text/plain"]));
    assert_eq!(
        card["skills"],
        json!([{"id": "echo", "name": "echo", "description": card["description"], "tags": ["chat"]}])
    );
    let tooly = app
        .request(
            Method::GET,
            "/a2a/tooly/.well-known/agent-card.json",
            None,
            None,
        )
        .await;
    assert_eq!(tooly.body["name"], "Tooly");
    assert_eq!(tooly.body["version"], "2.1.0");
    assert_eq!(
        tooly.body["description"],
        "An agent with options and tools."
    );
    let skills: Vec<&str> = tooly.body["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills[0], "tooly");
    assert!(skills.contains(&"tool:clock"), "{skills:?}");
    assert!(
        !skills.contains(&"tool:memory"),
        "internal tools stay hidden: {skills:?}"
    );

    let etag = reply.headers["etag"].to_str().unwrap().to_owned();
    assert!(
        reply.headers["cache-control"]
            .to_str()
            .unwrap()
            .starts_with("max-age=")
    );
    let cached = app
        .client
        .get(app.url("/a2a/echo/.well-known/agent-card.json"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);

    // The first agent is the default; an unknown agent has no card.
    let default = app
        .request(Method::GET, "/.well-known/agent-card.json", None, None)
        .await;
    assert_eq!(default.body, reply.body);
    let missing = app
        .request(
            Method::GET,
            "/a2a/nobody/.well-known/agent-card.json",
            None,
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(
        missing.body["error"]["status"], "NOT_FOUND",
        "{}",
        missing.text
    );

    // The extended card takes a token, over both bindings.
    let (_, token) = app.new_tenant().await;
    let extended = rpc_ok(&app, "echo", &token, V1, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(extended["name"], "echo");
    let rest_card = rest(
        &app,
        Method::GET,
        "/a2a/echo/extendedAgentCard",
        &token,
        V1,
        None,
    )
    .await;
    assert_eq!(rest_card.body, extended);
    let anonymous = app
        .request(Method::GET, "/a2a/echo/extendedAgentCard", None, None)
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        anonymous.body["error"]["status"], "UNAUTHENTICATED",
        "{}",
        anonymous.text
    );
}

#[tokio::test]
async fn a_blocking_send_answers_the_completed_task_in_each_versions_shape() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;

    // 1.0 over JSON-RPC: a wrapped task in ProtoJSON.
    let sent = message("Hello there");
    let task = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        json!({"message": sent}),
    )
    .await["task"]
        .clone();
    assert!(task["id"].as_str().unwrap().starts_with("run_"), "{task}");
    assert!(
        task["contextId"].as_str().unwrap().starts_with("sess_"),
        "{task}"
    );
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(task["status"]["timestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(artifact_text(&task), "Hello there");
    assert_eq!(task["history"].as_array().unwrap().len(), 1, "{task}");
    let user = &task["history"][0];
    assert_eq!(user["role"], "ROLE_USER");
    assert_eq!(user["parts"], json!([{"text": "Hello there"}]));
    assert_eq!(user["taskId"], task["id"]);
    assert_eq!(
        user["messageId"], sent["messageId"],
        "the client's id comes back"
    );
    // The same message sent again is the same task, not a second one.
    let again = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        json!({"message": {
        "messageId": sent["messageId"], "role": "ROLE_USER", "contextId": task["contextId"],
        "parts": [{"text": "Hello there"}]}}),
    )
    .await;
    assert_eq!(again["task"]["id"], task["id"]);
    let reused = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "SendMessage",
        json!({"message": {
        "messageId": sent["messageId"], "role": "ROLE_USER", "contextId": task["contextId"],
        "parts": [{"text": "Something else"}]}}),
    )
    .await;
    assert_eq!(
        reused["data"][0]["metadata"]["field"], "message.messageId",
        "{reused}"
    );

    // 0.3 over JSON-RPC: the bare task, with kinds and kebab states.
    let old = rpc_ok(
        &app,
        "echo",
        &token,
        None,
        "message/send",
        json!({"message": message_03("Hi")}),
    )
    .await;
    assert_eq!(old["kind"], "task");
    assert_eq!(old["status"]["state"], "completed");
    assert_eq!(
        old["artifacts"][0]["parts"][0],
        json!({"kind": "text", "text": "Hi"})
    );
    assert_eq!(old["history"][0]["role"], "user");
    assert_eq!(old["history"][0]["kind"], "message");

    // 1.0 over REST, and 0.3 over REST under /v1.
    let rest_1 = rest(
        &app,
        Method::POST,
        "/a2a/echo/message:send",
        &token,
        V1,
        Some(json!({"message": message("Yo")})),
    )
    .await;
    assert_eq!(rest_1.status, StatusCode::OK, "{}", rest_1.text);
    // `application/a2a+json` only to a request that used it.
    assert_eq!(rest_1.headers["content-type"], "application/json");
    assert_eq!(
        rest_1.body["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(artifact_text(&rest_1.body["task"]), "Yo");
    // 0.3 over REST (`/v1`): the ProtoJSON of 0.3's proto, as its SDKs send it.
    let proto_03 = json!({"request": {"message_id": message_id(), "role": "ROLE_USER",
        "content": [{"text": "Hey"}, {"data": {"data": {"k": 1}}}]}});
    let rest_03 = rest(
        &app,
        Method::POST,
        "/a2a/echo/v1/message:send",
        &token,
        None,
        Some(proto_03),
    )
    .await;
    assert_eq!(rest_03.status, StatusCode::OK, "{}", rest_03.text);
    assert_eq!(rest_03.headers["content-type"], "application/json");
    let task_03 = &rest_03.body["task"];
    assert_eq!(task_03["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        task_03["history"][0]["content"],
        json!([{"text": "Hey"}, {"data": {"data": {"k": 1}}}])
    );
    assert!(task_03.get("kind").is_none(), "{task_03}");

    // A JSON-RPC endpoint with a trailing slash is the same endpoint.
    let slash = app
        .client
        .post(app.url("/a2a/echo/"))
        .bearer_auth(&token)
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": task["id"]}}),
        )
        .send()
        .await
        .unwrap();
    let slash: Value = slash.json().await.unwrap();
    assert_eq!(slash["id"], 7);
    assert_eq!(slash["result"]["id"], task["id"]);
}

#[tokio::test]
async fn get_task_reads_a_task_with_history_length_over_both_bindings() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let task = send(&app, "echo", &token, "remember me").await;
    let id = task["id"].as_str().unwrap();

    let got = rpc_ok(&app, "echo", &token, V1, "GetTask", json!({"id": id})).await;
    assert_eq!(got, task, "GetTask shows what the send answered");
    let none = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "GetTask",
        json!({"id": id, "historyLength": 0}),
    )
    .await;
    assert!(none.get("history").is_none(), "{none}");
    assert_eq!(artifact_text(&none), "remember me");

    let rest_got = rest(
        &app,
        Method::GET,
        &format!("/a2a/echo/tasks/{id}?historyLength=1"),
        &token,
        V1,
        None,
    )
    .await;
    assert_eq!(rest_got.status, StatusCode::OK, "{}", rest_got.text);
    assert_eq!(rest_got.body, task);
    let old = rpc_ok(&app, "echo", &token, None, "tasks/get", json!({"id": id})).await;
    assert_eq!(old["status"]["state"], "completed");
    let old_rest = rest(
        &app,
        Method::GET,
        &format!("/a2a/echo/v1/tasks/{id}"),
        &token,
        None,
        None,
    )
    .await;
    assert_eq!(old_rest.body["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        old_rest.body["history"][0]["content"],
        json!([{"text": "remember me"}])
    );
}

#[tokio::test]
async fn list_tasks_filters_by_context_and_state_and_pages_newest_first() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let first = send(&app, "echo", &token, "one").await;
    let context = first["contextId"].as_str().unwrap();
    let mut params = json!({"message": message("two")});
    params["message"]["contextId"] = json!(context);
    let second = rpc_ok(&app, "echo", &token, V1, "SendMessage", params).await["task"].clone();
    assert_eq!(second["contextId"], context, "a known context is continued");
    let other = send(&app, "echo", &token, "three").await;
    assert_ne!(other["contextId"], context);

    let all = rpc_ok(&app, "echo", &token, V1, "ListTasks", json!({})).await;
    let ids: Vec<&Value> = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(
        ids,
        [&other["id"], &second["id"], &first["id"]],
        "newest first"
    );
    assert_eq!(all["totalSize"], 3);
    assert_eq!(all["pageSize"], 50);
    assert_eq!(all["nextPageToken"], "");
    assert!(
        all["tasks"][0].get("artifacts").is_none(),
        "artifacts only when asked for"
    );

    let in_context = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"contextId": context, "includeArtifacts": true}),
    )
    .await;
    let ids: Vec<&Value> = in_context["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, [&second["id"], &first["id"]]);
    assert_eq!(artifact_text(&in_context["tasks"][0]), "two");

    // Pages of one over REST, with the token given back.
    let page = rest(
        &app,
        Method::GET,
        "/a2a/echo/tasks?pageSize=2",
        &token,
        V1,
        None,
    )
    .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert_eq!(page.body["tasks"].as_array().unwrap().len(), 2);
    let next = page.body["nextPageToken"].as_str().unwrap();
    assert!(!next.is_empty());
    let rest_page = rest(
        &app,
        Method::GET,
        &format!("/a2a/echo/tasks?pageSize=2&pageToken={next}"),
        &token,
        V1,
        None,
    )
    .await;
    assert_eq!(rest_page.body["tasks"][0]["id"], first["id"]);
    assert_eq!(rest_page.body["nextPageToken"], "");
    assert_eq!(rest_page.body["totalSize"], 3);

    let completed = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED"}),
    )
    .await;
    assert_eq!(completed["totalSize"], 3);
    let working = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"status": "TASK_STATE_WORKING"}),
    )
    .await;
    assert_eq!(working["tasks"], json!([]));
    let later = rpc_ok(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(later["totalSize"], 0);
    // Another agent's tasks are not this agent's.
    let slow = rpc_ok(&app, "slow", &token, V1, "ListTasks", json!({})).await;
    assert_eq!(slow["totalSize"], 0);

    let bad = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"pageSize": 0}),
    )
    .await;
    assert_eq!(bad["code"], -32602);
    let bad_rest = rest(
        &app,
        Method::GET,
        "/a2a/echo/tasks?pageSize=101",
        &token,
        V1,
        None,
    )
    .await;
    assert_eq!(bad_rest.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        bad_rest.body["error"]["status"], "INVALID_ARGUMENT",
        "{}",
        bad_rest.text
    );
    let stranger = rpc_error(
        &app,
        "echo",
        &token,
        V1,
        "ListTasks",
        json!({"pageToken": "nope"}),
    )
    .await;
    assert_eq!(stranger["code"], -32602);
}
