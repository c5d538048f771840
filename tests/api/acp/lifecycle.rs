//! Ends of runs: cancelled while running, and failed when a restart orphaned them.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{acp_user, assert_acp_error, post_raw, reply_of, run, types};
use crate::helpers::spawn_app;
use crate::process::{Deployment, SLOW_AGENT, ServerProcess};

#[tokio::test]
async fn a_running_run_is_cancelled_and_then_cannot_be_cancelled_again() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let started = run(
        &app,
        &token,
        json!({"agent_name": "slow", "input": [acp_user(&"z".repeat(400))], "mode": "async"}),
    )
    .await;
    let run_id = started.body["run_id"].as_str().unwrap().to_owned();
    // Wait until it writes, so the cancel stops a running turn.
    loop {
        let poll = app.get(&format!("/acp/runs/{run_id}"), &token).await;
        if !poll.body["output"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let cancel = reply_of(
        post_raw(
            &app,
            &format!("/acp/runs/{run_id}/cancel"),
            &token,
            &json!({}),
        )
        .await,
    )
    .await;
    assert_eq!(cancel.status, StatusCode::ACCEPTED, "{}", cancel.text);
    assert_eq!(cancel.body["status"], "cancelled");
    assert!(cancel.body["finished_at"].is_string());
    assert_eq!(cancel.body["error"], Value::Null);
    let events = app.get(&format!("/acp/runs/{run_id}/events"), &token).await;
    let events: Vec<Value> = events.body["events"].as_array().unwrap().clone();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds[..3],
        ["run.created", "run.in-progress", "message.created"]
    );
    assert_eq!(
        kinds[kinds.len() - 3..],
        ["message.completed", "generic", "run.cancelled"]
    );
    let again = reply_of(
        post_raw(
            &app,
            &format!("/acp/runs/{run_id}/cancel"),
            &token,
            &json!({}),
        )
        .await,
    )
    .await;
    assert_acp_error(&again, StatusCode::FORBIDDEN, "server_error");
    assert_eq!(
        again.body["message"],
        "Run in terminal status cancelled can't be cancelled"
    );
}

#[tokio::test]
async fn a_run_orphaned_by_a_killed_server_ends_failed_as_interrupted_after_restart() {
    let deployment = Deployment::new(SLOW_AGENT).await;
    let db = &deployment.db;
    let command = || deployment.command();
    let (tenant, token) = deployment.tenant_token("acp");
    let token = token.as_str();
    let client = reqwest::Client::new();
    let server = ServerProcess::start(command());
    let started: Value = client
        .post(server.url("/acp/runs"))
        .bearer_auth(token)
        .body(
            json!({"agent_name": "slow", "input": [acp_user(&"k".repeat(400))], "mode": "async"})
                .to_string(),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    let get = |server: &ServerProcess, path: String| {
        let request = client.get(server.url(&path)).bearer_auth(token);
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    loop {
        let poll = get(&server, format!("/acp/runs/{run_id}")).await;
        if poll["status"] == "in-progress" && !poll["output"].as_array().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    server.kill();

    let server = ServerProcess::start(command());
    db.wait_for_no_unfinished_turns().await;
    let failed = get(&server, format!("/acp/runs/{run_id}")).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    // The engine keeps the run's status in its row: interrupted, which ACP calls failed.
    let store = agentry::store::Store::connect(&crate::helpers::test_settings(db, "").database)
        .await
        .unwrap();
    let run: agentry::model::RunId = format!("run_{}", run_id.replace('-', "")).parse().unwrap();
    let tenant: agentry::model::TenantId = tenant.trim().parse().unwrap();
    assert_eq!(
        store.get_run_status(&tenant, &run).await.unwrap(),
        agentry::model::RunStatus::Interrupted
    );
    assert_eq!(failed["error"]["code"], "server_error");
    assert_eq!(failed["error"]["data"]["code"], "interrupted");
    assert!(failed["finished_at"].is_string());
    assert!(
        !failed["output"][0]["parts"][0]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    let events = get(&server, format!("/acp/runs/{run_id}/events")).await;
    let kinds = types(
        &events["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| super::frames::Frame {
                id: None,
                data: e.clone(),
                text: e.to_string(),
            })
            .collect::<Vec<_>>(),
    );
    assert_eq!(kinds.last().unwrap(), "run.failed");
}
