//! The operations the other tests drive in one version or binding, in the others: 0.3's
//! JSON-RPC methods, 0.3's HTTP+JSON under `/v1`, and 1.0's REST stream.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{V1, message, message_03, rest, rest_stream, rpc_ok, rpc_stream, send_immediately};
use std::sync::Arc;

use crate::helpers::{TestDb, spawn_app, spawn_app_on};

#[tokio::test]
async fn the_0_3_methods_and_paths_answer_every_operation_in_0_3_shapes() {
    let config = "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1\"]\n";
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;

    // message/stream: bare events with kinds, the last one final.
    let frames = rpc_stream(
        &app,
        "echo",
        &token,
        None,
        "message/stream",
        json!({"message": message_03("Hello")}),
        None,
    )
    .await
    .collect()
    .await;
    let events: Vec<&Value> = frames.iter().map(|f| &f.data["result"]).collect();
    assert_eq!(events[0]["kind"], "task");
    let id = events[0]["id"].as_str().unwrap().to_owned();
    let last = events.last().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["final"].as_bool()),
        (Some("status-update"), Some(true))
    );
    assert_eq!(last["status"]["state"], "completed");

    // tasks/resubscribe with Last-Event-ID replays the frames after it, in 0.3's shapes.
    let after = frames[1].id.clone().unwrap();
    let replayed = rpc_stream(
        &app,
        "echo",
        &token,
        None,
        "tasks/resubscribe",
        json!({"id": id}),
        Some(&after),
    )
    .await
    .collect()
    .await;
    let ids: Vec<Option<String>> = replayed.iter().map(|f| f.id.clone()).collect();
    let expected: Vec<Option<String>> = frames[2..].iter().map(|f| f.id.clone()).collect();
    assert_eq!(ids, expected);
    assert_eq!(
        replayed.last().unwrap().data["result"]["kind"],
        "status-update"
    );
    // The same over 0.3's HTTP+JSON (ProtoJSON, wrapped).
    let rest_replayed = rest_stream(
        &app,
        Method::POST,
        &format!("/a2a/echo/v1/tasks/{id}:subscribe"),
        &token,
        None,
        None,
        Some(&after),
    )
    .await
    .collect()
    .await;
    assert_eq!(rest_replayed.len(), replayed.len());
    assert_eq!(
        rest_replayed.last().unwrap().data["statusUpdate"]["final"],
        true
    );

    // tasks/cancel of a working task, and of the ended one.
    let slow = rpc_ok(
        &app,
        "slow",
        &token,
        None,
        "message/send",
        json!({"message": message_03(&"s".repeat(200)), "configuration": {"blocking": false}}),
    )
    .await;
    let canceled = rpc_ok(
        &app,
        "slow",
        &token,
        None,
        "tasks/cancel",
        json!({"id": slow["id"]}),
    )
    .await;
    assert_eq!(
        (
            canceled["kind"].as_str(),
            canceled["status"]["state"].as_str()
        ),
        (Some("task"), Some("canceled"))
    );

    // 0.3's list over HTTP+JSON (0.3's JSON-RPC has none).
    let listed = rest(&app, Method::GET, "/a2a/echo/v1/tasks", &token, None, None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    assert_eq!(listed.body["tasks"][0]["id"], id.as_str());
    assert_eq!(
        listed.body["tasks"][0]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // The extended card, both ways.
    let card = rpc_ok(
        &app,
        "echo",
        &token,
        None,
        "agent/getAuthenticatedExtendedCard",
        json!({}),
    )
    .await;
    assert_eq!(card["name"], "echo");
    let rest_card = rest(&app, Method::GET, "/a2a/echo/v1/card", &token, None, None).await;
    assert_eq!(rest_card.body, card);

    // Push configs over 0.3's HTTP+JSON.
    let task = send_immediately(&app, "slow", &token, json!({"message": message("push")})).await;
    let task_id = task["id"].as_str().unwrap();
    let path = format!("/a2a/slow/v1/tasks/{task_id}/pushNotificationConfigs");
    let url = "http://127.0.0.1:9/hook";
    let created = rest(
        &app,
        Method::POST,
        &path,
        &token,
        None,
        Some(json!({"pushNotificationConfig": {"id": "c", "url": url, "token": "t"}})),
    )
    .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text);
    assert_eq!(
        created.body["name"],
        format!("tasks/{task_id}/pushNotificationConfigs/c")
    );
    assert_eq!(
        created.body["pushNotificationConfig"],
        json!({"id": "c", "url": url, "token": "t"})
    );
    let got = rest(&app, Method::GET, &format!("{path}/c"), &token, None, None).await;
    assert_eq!(
        got.body["pushNotificationConfig"],
        json!({"id": "c", "url": url})
    );
    let all = rest(&app, Method::GET, &path, &token, None, None).await;
    assert_eq!(
        all.body["configs"].as_array().unwrap().len(),
        1,
        "{}",
        all.text
    );
    let gone = rest(
        &app,
        Method::DELETE,
        &format!("{path}/c"),
        &token,
        None,
        None,
    )
    .await;
    assert_eq!(gone.status, StatusCode::OK);
    let none = rest(&app, Method::GET, &path, &token, None, None).await;
    assert_eq!(none.body["configs"], json!([]));
}

#[tokio::test]
async fn a_rest_stream_in_1_0_is_bare_stream_responses_with_ids() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let frames = rest_stream(
        &app,
        Method::POST,
        "/a2a/echo/message:stream",
        &token,
        V1,
        Some(json!({"message": message("abc def")})),
        None,
    )
    .await
    .collect()
    .await;
    assert!(frames[0].data["task"].is_object());
    assert!(frames[0].data.get("jsonrpc").is_none());
    assert!(frames[1..].iter().all(|f| f.id.is_some()));
    let events: Vec<Value> = frames.iter().map(|f| f.data.clone()).collect();
    assert_eq!(super::streamed_text(&events), "abc def");
    assert_eq!(
        events.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(
        events.last().unwrap()["statusUpdate"]
            .get("final")
            .is_none(),
        "1.0 has no final"
    );
}
