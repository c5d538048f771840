//! A2A streams: a streaming send, SubscribeToTask (snapshot first, or exactly the frames
//! after `Last-Event-ID`), returning at once, cancelling, and a task whose server died.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{
    V1, artifact_text, message, message_03, rest, rest_stream, results, rpc_error, rpc_ok,
    rpc_stream, send, send_immediately, streamed_text, wait_for_end,
};
use crate::helpers::spawn_app;
use crate::process::{Deployment, SLOW_AGENT};

#[tokio::test]
async fn a_streaming_send_sends_the_task_then_chunks_then_its_end_with_frame_ids() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let frames = rpc_stream(
        &app,
        "echo",
        &token,
        V1,
        "SendStreamingMessage",
        json!({"message": message("Hello there, friend")}),
        None,
    )
    .await
    .collect()
    .await;
    let events = results(&frames);
    let task = &events[0]["task"];
    assert!(task["id"].as_str().unwrap().starts_with("run_"), "{task}");
    assert_eq!(
        task["history"][0]["parts"],
        json!([{"text": "Hello there, friend"}])
    );
    assert_eq!(
        events[1]["statusUpdate"]["status"]["state"], "TASK_STATE_WORKING",
        "{events:?}"
    );
    assert_eq!(streamed_text(&events), "Hello there, friend");
    let chunks: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.get("artifactUpdate"))
        .collect();
    assert!(chunks.len() >= 3, "the echo streams in chunks: {chunks:?}");
    assert!(
        chunks[0].get("append").is_none(),
        "the first chunk starts the artifact"
    );
    assert!(chunks[1..].iter().all(|c| c["append"] == true));
    assert_eq!(chunks.last().unwrap()["lastChunk"], true);
    let last = events.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Every event after the task has an id, in order.
    let ids: Vec<String> = frames[1..]
        .iter()
        .map(|f| f.id.clone().expect("an id"))
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_by_key(|id| {
        let (seq, k) = id.split_once('.').unwrap_or((id, "0"));
        (seq.parse::<i64>().unwrap(), k.parse::<u32>().unwrap())
    });
    sorted.dedup();
    assert_eq!(ids, sorted, "ids are unique and increasing");

    // The task read afterwards holds what the stream sent.
    let id = task["id"].as_str().unwrap();
    let got = rpc_ok(&app, "echo", &token, V1, "GetTask", json!({"id": id})).await;
    assert_eq!(artifact_text(&got), "Hello there, friend");

    // 0.3 over REST: 0.3's ProtoJSON, the last status `final`.
    let frames = rest_stream(
        &app,
        Method::POST,
        "/a2a/echo/v1/message:stream",
        &token,
        None,
        Some(json!({"message": message_03("Hi")})),
        None,
    )
    .await
    .collect()
    .await;
    assert!(frames[0].data.get("task").is_some(), "{:?}", frames[0]);
    let end = &frames.last().unwrap().data["statusUpdate"];
    assert_eq!(end["final"], true);
    assert_eq!(end["status"]["state"], "TASK_STATE_COMPLETED");
    let text: String = frames
        .iter()
        .filter_map(|f| f.data.get("artifactUpdate"))
        .map(|u| {
            u["artifact"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Hi");
}

#[tokio::test]
async fn a_subscriber_that_reconnects_with_last_event_id_gets_exactly_what_it_missed() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let text = "abcdefghijklmnopqrstuvwxyz";
    let mut stream = rpc_stream(
        &app,
        "slow",
        &token,
        V1,
        "SendStreamingMessage",
        json!({"message": message(text)}),
        None,
    )
    .await;
    let task = stream.next().await.unwrap().data["result"]["task"].clone();
    let id = task["id"].as_str().unwrap();
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(stream.next().await.unwrap());
    }
    drop(stream);
    let last = seen.last().unwrap().id.clone().unwrap();

    // Over REST, with Last-Event-ID: no snapshot, the frames after it, to the end.
    let rest_missed = rest_stream(
        &app,
        Method::GET,
        &format!("/a2a/slow/tasks/{id}:subscribe"),
        &token,
        V1,
        None,
        Some(&last),
    )
    .await
    .collect()
    .await;
    assert!(
        rest_missed[0].data.get("task").is_none(),
        "no snapshot after Last-Event-ID"
    );
    let missed = rpc_stream(
        &app,
        "slow",
        &token,
        V1,
        "SubscribeToTask",
        json!({"id": id}),
        Some(&last),
    )
    .await
    .collect()
    .await;
    // The whole log replayed, for comparison (the task has ended: Last-Event-ID still works).
    let everything = rpc_stream(
        &app,
        "slow",
        &token,
        V1,
        "SubscribeToTask",
        json!({"id": id}),
        Some("0"),
    )
    .await
    .collect()
    .await;
    let joined: Vec<(Option<String>, Value)> = seen
        .iter()
        .chain(missed.iter())
        .map(|f| (f.id.clone(), f.data["result"].clone()))
        .collect();
    let all: Vec<(Option<String>, Value)> = everything
        .iter()
        .map(|f| (f.id.clone(), f.data["result"].clone()))
        .collect();
    assert_eq!(
        joined, all,
        "seen + missed is the whole stream: no gap, no duplicate"
    );
    let rest_events: Vec<(Option<String>, Value)> = rest_missed
        .iter()
        .map(|f| (f.id.clone(), f.data.clone()))
        .collect();
    let rpc_events: Vec<(Option<String>, Value)> = missed
        .iter()
        .map(|f| (f.id.clone(), f.data["result"].clone()))
        .collect();
    assert_eq!(
        rest_events, rpc_events,
        "both bindings replay the same frames"
    );
    assert_eq!(
        streamed_text(&all.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>()),
        text
    );
    assert_eq!(
        all.last().unwrap().1["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    let bad = rpc(&app, "slow", &token, id, Some("x.y")).await;
    assert_eq!(bad["code"], -32602, "{bad}");
}

async fn rpc(
    app: &crate::helpers::TestApp,
    agent: &str,
    token: &str,
    id: &str,
    last: Option<&str>,
) -> Value {
    let response = app
        .client
        .post(app.url(&format!("/a2a/{agent}")))
        .bearer_auth(token)
        .header("A2A-Version", "1.0")
        .header("Last-Event-ID", last.unwrap_or(""))
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": id}}),
        )
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    body["error"].clone()
}

#[tokio::test]
async fn a_plain_subscriber_gets_the_task_first_then_live_events_and_an_ended_task_is_refused() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let task = send_immediately(
        &app,
        "slow",
        &token,
        json!({"message": message("a slow reply")}),
    )
    .await;
    let id = task["id"].as_str().unwrap().to_owned();
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
            .contains(&task["status"]["state"].as_str().unwrap()),
        "returnImmediately answers before the task ends: {task}"
    );
    let frames = rpc_stream(
        &app,
        "slow",
        &token,
        V1,
        "SubscribeToTask",
        json!({"id": id}),
        None,
    )
    .await
    .collect()
    .await;
    let events = results(&frames);
    let snapshot = &events[0]["task"];
    assert_eq!(
        snapshot["id"],
        id.as_str(),
        "the first event is the task as it is"
    );
    let snapshot_text = artifact_text(snapshot);
    assert_eq!(
        format!("{snapshot_text}{}", streamed_text(&events[1..])),
        "a slow reply",
        "the snapshot and the events after it make the whole reply"
    );
    assert_eq!(
        events.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    let ended = rpc_error(
        &app,
        "slow",
        &token,
        V1,
        "SubscribeToTask",
        json!({"id": id}),
    )
    .await;
    assert_eq!(ended["code"], -32004, "{ended}");
    assert_eq!(ended["data"][0]["reason"], "UNSUPPORTED_OPERATION");
    let ended_rest = rest(
        &app,
        Method::POST,
        &format!("/a2a/slow/tasks/{id}:subscribe"),
        &token,
        V1,
        None,
    )
    .await;
    assert_eq!(ended_rest.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        ended_rest.body["error"]["status"], "FAILED_PRECONDITION",
        "{}",
        ended_rest.text
    );
    // A blocking 0.3 send (`blocking: false`) returns at once too.
    let old = rpc_ok(
        &app,
        "slow",
        &token,
        None,
        "message/send",
        json!({"message": message_03("later"), "configuration": {"blocking": false}}),
    )
    .await;
    assert_ne!(old["status"]["state"], "completed", "{old}");
    wait_for_end(&app, "slow", &token, old["id"].as_str().unwrap()).await;
    let done = rpc_ok(
        &app,
        "slow",
        &token,
        None,
        "tasks/get",
        json!({"id": old["id"]}),
    )
    .await;
    assert_eq!(done["status"]["state"], "completed");
}

#[tokio::test]
async fn cancel_stops_a_working_task_and_an_ended_one_is_not_cancelable() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let task = send_immediately(
        &app,
        "slow",
        &token,
        json!({"message": message(&"z".repeat(200))}),
    )
    .await;
    let id = task["id"].as_str().unwrap();
    let canceled = rpc_ok(&app, "slow", &token, V1, "CancelTask", json!({"id": id})).await;
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    assert!(artifact_text(&canceled).len() < 200);
    let again = rpc_error(&app, "slow", &token, V1, "CancelTask", json!({"id": id})).await;
    assert_eq!(again["code"], -32002);
    assert_eq!(again["data"][0]["reason"], "TASK_NOT_CANCELABLE");

    // Over REST in 0.3: the task once canceled, and 400 for an ended one.
    let other = send_immediately(
        &app,
        "slow",
        &token,
        json!({"message": message(&"y".repeat(200))}),
    )
    .await;
    let other_id = other["id"].as_str().unwrap();
    let rest_cancel = rest(
        &app,
        Method::POST,
        &format!("/a2a/slow/v1/tasks/{other_id}:cancel"),
        &token,
        None,
        None,
    )
    .await;
    assert_eq!(rest_cancel.status, StatusCode::OK, "{}", rest_cancel.text);
    assert_eq!(rest_cancel.body["status"]["state"], "TASK_STATE_CANCELED");
    let done = send(&app, "echo", &token, "fin").await;
    let refused = rest(
        &app,
        Method::POST,
        &format!("/a2a/echo/tasks/{}:cancel", done["id"].as_str().unwrap()),
        &token,
        V1,
        None,
    )
    .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        refused.body["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE",
        "{}",
        refused.text
    );
}

#[tokio::test]
async fn a_task_whose_server_was_killed_is_failed_with_a_reason_after_restart() {
    let deployment = Deployment::new(SLOW_AGENT).await;
    let (_, token) = deployment.tenant_token("acme");
    let server = deployment.start(&[]);
    let client = reqwest::Client::new();
    let long = "k".repeat(100);
    let started: Value = client
        .post(server.url("/a2a/slow"))
        .bearer_auth(&token)
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": message(&long), "configuration": {"returnImmediately": true}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = started["result"]["task"]["id"].as_str().unwrap().to_owned();
    // Killed once the reply has begun.
    let response = client
        .get(server.url(&format!("/a2a/slow/tasks/{id}:subscribe")))
        .bearer_auth(&token)
        .header("A2A-Version", "1.0")
        .send()
        .await
        .unwrap();
    let mut live = crate::acp::frames::SseReader::new(response);
    while let Some(frame) = live.next().await {
        if frame.data.get("artifactUpdate").is_some() {
            break;
        }
    }
    server.kill();

    let server = deployment.start(&[]);
    let get = |server: &crate::process::ServerProcess| {
        client
            .post(server.url("/a2a/slow"))
            .bearer_auth(&token)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}}))
            .send()
    };
    // The killed process's turn is ended by recovery (at start-up on SQLite, once its lease
    // lapsed on PostgreSQL): a replaying subscriber sees the stream end.
    let response = client
        .get(server.url(&format!("/a2a/slow/tasks/{id}:subscribe")))
        .bearer_auth(&token)
        .header("A2A-Version", "1.0")
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    let replayed = crate::acp::frames::SseReader::new(response).collect().await;
    assert_eq!(
        replayed.last().unwrap().data["statusUpdate"]["status"]["state"],
        "TASK_STATE_FAILED"
    );
    let task: Value = get(&server).await.unwrap().json().await.unwrap();
    let task = &task["result"];
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    let reason = &task["status"]["message"]["parts"];
    assert!(
        reason[0]["text"].as_str().unwrap().len() > 10,
        "a reason a person can read: {reason}"
    );
    assert_eq!(reason[1]["data"]["code"], "interrupted", "{reason}");
    assert!(artifact_text(task).len() < long.len());
}
