//! Runs as the engine keeps them: their status one row through every transition, their
//! cancellation visible to every face, their creation atomic with their first turn.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use super::await_resume::{answers, app_with_gpt, awaiting_run, resume, tool_session};
use super::{acp_user, post_raw, reply_of, run};
use crate::helpers::{TestApp, TestDb, spawn_app_on, user};
use crate::process::{ServerProcess, agentry, run_ok};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text};
use agentry::model::{RunId, RunStatus, TenantId};

fn run_id_of(acp_id: &str) -> RunId {
    RunId::from_uuid(uuid::Uuid::parse_str(acp_id).unwrap())
}

async fn status(app: &TestApp, tenant: &str, run: &str) -> RunStatus {
    let tenant: TenantId = tenant.parse().unwrap();
    app.state
        .engine()
        .run_status(&tenant, &run_id_of(run))
        .await
        .unwrap()
}

async fn cancel(app: &TestApp, token: &str, run: &str) -> crate::helpers::Reply {
    reply_of(post_raw(app, &format!("/acp/runs/{run}/cancel"), token, &json!({})).await).await
}

#[tokio::test]
async fn cancelling_an_awaiting_run_answers_its_calls_as_events_an_aap_follower_sees() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (_, token) = app.new_tenant().await;
    let (session, uuid) = tool_session(&app, &token).await;
    let awaiting = awaiting_run(&app, &server, &token, &uuid).await;
    let run_id = awaiting.body["run_id"].as_str().unwrap();
    // An AAP client follows the session's log: what is stored, then live.
    let mut follower = app
        .stream(&format!("/sessions/{session}/events"), &token, None)
        .await;
    let first_stop = follower.until_turn_stop().await;
    assert_eq!(first_stop.last().unwrap().data["stopReason"], "tool_use");

    let cancelled = cancel(&app, &token, run_id).await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED, "{}", cancelled.text);
    assert_eq!(cancelled.body["status"], "cancelled");

    let frames = follower.until_turn_stop().await;
    let names: Vec<&str> = frames.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(
        names,
        ["turn_start", "tool_result", "tool_result", "turn_stop"]
    );
    let answered: Vec<&str> = frames[1..3]
        .iter()
        .map(|f| f.data["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(answered, ["a", "c"]);
    assert_eq!(
        frames[1].data["content"],
        agentry::engine::CANCELLED_CALL,
        "{:?}",
        frames[1]
    );
    assert_eq!(frames[3].data["error"]["code"], "cancelled");

    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let full = history.body["history"]["full"].as_array().unwrap().clone();
    let tools: Vec<(&str, &str)> = full
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["toolCallId"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("a", agentry::engine::CANCELLED_CALL),
            ("c", agentry::engine::CANCELLED_CALL)
        ]
    );
    // The session goes on: a new message is accepted.
    server.push(Reply::Stream(vec![text("fine"), finish("stop")]));
    let next = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("and now?")]}),
        )
        .await;
    assert_eq!(next.status, StatusCode::OK, "{}", next.text);
}

#[tokio::test]
async fn a_runs_status_is_one_row_through_every_transition() {
    let echo = spawn_app_on(std::sync::Arc::new(TestDb::new().await), "").await;
    let (tenant, token) = echo.new_tenant().await;
    let app = &echo;

    // running, then completed
    let slow = run(
        app,
        &token,
        json!({"agent_name": "slow", "input": [acp_user(&"r".repeat(60))], "mode": "async"}),
    )
    .await;
    let slow_id = slow.body["run_id"].as_str().unwrap().to_owned();
    let mut polled = status(app, &tenant, &slow_id).await;
    while polled == RunStatus::Created {
        polled = status(app, &tenant, &slow_id).await;
    }
    assert_eq!(polled, RunStatus::Running);
    let session = agentry::model::SessionId::from_uuid(
        uuid::Uuid::parse_str(slow.body["session_id"].as_str().unwrap()).unwrap(),
    );
    app.stream(&format!("/sessions/{session}/events"), &token, None)
        .await
        .until_turn_stop()
        .await;
    assert_eq!(status(app, &tenant, &slow_id).await, RunStatus::Completed);
    let read = app.get(&format!("/acp/runs/{slow_id}"), &token).await;
    assert_eq!(read.body["status"], "completed");

    // cancelled while running
    let slow = run(
        app,
        &token,
        json!({"agent_name": "slow", "input": [acp_user(&"c".repeat(400))], "mode": "async"}),
    )
    .await;
    let slow_id = slow.body["run_id"].as_str().unwrap().to_owned();
    let cancelled = cancel(app, &token, &slow_id).await;
    assert_eq!(cancelled.body["status"], "cancelled", "{}", cancelled.text);
    assert_eq!(status(app, &tenant, &slow_id).await, RunStatus::Cancelled);

    let server = ScriptedOpenAi::start().await;
    let app = app_with_gpt(&server).await;
    let (tenant, token) = app.new_tenant().await;

    // awaiting, resumed (its turn queued behind another), then completed
    let (_, uuid) = tool_session(&app, &token).await;
    let awaiting = awaiting_run(&app, &server, &token, &uuid).await;
    let awaiting_id = awaiting.body["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        status(&app, &tenant, &awaiting_id).await,
        RunStatus::Awaiting
    );
    server.push(Reply::Stream(vec![text("done"), finish("stop")]));
    let resumed = resume(&app, &token, &awaiting_id, answers("sync")).await;
    assert_eq!(resumed.status, StatusCode::OK, "{}", resumed.text);
    assert_eq!(
        status(&app, &tenant, &awaiting_id).await,
        RunStatus::Completed
    );

    // failed
    let (_, uuid) = tool_session(&app, &token).await;
    server.push(Reply::Status(400, json!({"error": {"message": "broken"}})));
    let failed = run(
        &app,
        &token,
        json!({"agent_name": "gpt", "session_id": uuid, "input": [acp_user("hi")]}),
    )
    .await;
    let failed_id = failed.body["run_id"].as_str().unwrap();
    assert_eq!(failed.body["status"], "failed", "{}", failed.text);
    assert_eq!(status(&app, &tenant, failed_id).await, RunStatus::Failed);
}

#[tokio::test]
async fn a_run_whose_first_turn_waits_for_a_slot_is_created_until_it_starts() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_app_on(db, "[engine]\nmax_concurrent_turns_per_tenant = 1\n").await;
    let (tenant, token) = app.new_tenant().await;
    let holder = run(
        &app,
        &token,
        json!({"agent_name": "slow", "input": [acp_user(&"h".repeat(400))], "mode": "async"}),
    )
    .await;
    let holder_id = holder.body["run_id"].as_str().unwrap().to_owned();
    while status(&app, &tenant, &holder_id).await != RunStatus::Running {}
    let queued = run(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [acp_user("wait")], "mode": "async"}),
    )
    .await;
    let queued_id = queued.body["run_id"].as_str().unwrap().to_owned();
    assert_eq!(queued.body["status"], "created");
    assert_eq!(status(&app, &tenant, &queued_id).await, RunStatus::Created);
    let cancelled = cancel(&app, &token, &queued_id).await;
    assert_eq!(cancelled.body["status"], "cancelled", "{}", cancelled.text);
    assert_eq!(
        status(&app, &tenant, &queued_id).await,
        RunStatus::Cancelled
    );
    cancel(&app, &token, &holder_id).await;
}

#[tokio::test]
async fn a_kill_while_runs_are_created_leaves_every_turn_with_its_run() {
    let db = TestDb::new().await;
    let command = || agentry(db.url());
    let tenant = run_ok(command().args(["admin", "create-tenant", "runs", "--raw"]));
    let token = run_ok(command().args(["admin", "issue-token", tenant.trim(), "--raw"]));
    let token = token.trim().to_owned();
    let server = ServerProcess::start(command());
    let client = reqwest::Client::new();
    let created = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let progress = std::sync::Arc::new(tokio::sync::Notify::new());
    let mut writers = Vec::new();
    for _ in 0..4 {
        let (client, token, created) = (client.clone(), token.clone(), created.clone());
        let progress = progress.clone();
        let url = server.url("/acp/runs");
        writers.push(tokio::spawn(async move {
            loop {
                let body =
                    json!({"agent_name": "echo", "input": [acp_user("go")], "mode": "async"});
                let sent = client
                    .post(&url)
                    .bearer_auth(&token)
                    .body(body.to_string())
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status() == StatusCode::ACCEPTED => {
                        created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        progress.notify_one();
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        }));
    }
    while created.load(std::sync::atomic::Ordering::Relaxed) < 40 {
        tokio::time::timeout(Duration::from_secs(30), progress.notified())
            .await
            .expect("runs are being created");
    }
    server.kill();
    for writer in writers {
        let _ = writer.await;
    }
    assert!(created.load(std::sync::atomic::Ordering::Relaxed) >= 40);
    // A restart recovers what the kill left unfinished.
    let server = ServerProcess::start(command());
    db.wait_for_no_unfinished_turns().await;
    let health = client.get(server.url("/readyz")).send().await.unwrap();
    assert!(health.status().is_success());

    let orphans = count(
        &db,
        "SELECT COUNT(*) FROM turns WHERE run_id IS NULL OR run_id NOT IN (SELECT id FROM runs)",
    )
    .await;
    let empty = count(
        &db,
        "SELECT COUNT(*) FROM runs r WHERE NOT EXISTS \
         (SELECT 1 FROM turns t WHERE t.run_id = r.id)",
    )
    .await;
    let runs = count(&db, "SELECT COUNT(*) FROM runs").await;
    let unfinished = count(
        &db,
        "SELECT COUNT(*) FROM runs WHERE status IN ('created', 'running')",
    )
    .await;
    assert!(runs >= 40, "{runs} runs");
    assert_eq!(orphans, 0, "turns without their run");
    assert_eq!(empty, 0, "runs without their turns");
    assert_eq!(unfinished, 0, "runs left unfinished after recovery");
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.scalar(sql).await.parse().unwrap()
}

#[tokio::test]
async fn suspending_a_tenant_mid_turn_ends_the_turn_within_a_second() {
    let app = spawn_app_on(std::sync::Arc::new(TestDb::new().await), "").await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let mut stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user(&"s".repeat(400))]}),
        )
        .await;
    assert_eq!(stream.next().await.unwrap().event, "turn_start");
    let asked = Instant::now();
    let suspended = app
        .patch(
            &format!("/admin/tenants/{tenant}"),
            &app.admin_token,
            json!({"status": "suspended"}),
        )
        .await;
    assert_eq!(suspended.status, StatusCode::OK, "{}", suspended.text);
    let frames = stream.until_turn_stop().await;
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    let stop = frames.last().unwrap();
    assert_eq!(stop.data["error"]["code"], "cancelled", "{stop:?}");
    let refused = app.get(&format!("/sessions/{session}"), &token).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
}

#[tokio::test]
async fn deleting_a_tenant_mid_turn_ends_its_streams_and_removes_everything() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_app_on(db.clone(), "").await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let mut stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user(&"d".repeat(400))]}),
        )
        .await;
    assert_eq!(stream.next().await.unwrap().event, "turn_start");
    let mut follower = app
        .stream(&format!("/sessions/{session}/events"), &token, None)
        .await;
    assert_eq!(follower.next().await.unwrap().event, "turn_start");

    let deleted = app
        .delete(&format!("/admin/tenants/{tenant}"), &app.admin_token)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    let frames = stream.until_turn_stop().await;
    assert_eq!(frames.last().unwrap().data["error"]["code"], "cancelled");
    // The session's follower sees the end, then its stream ends.
    let mut rest = Vec::new();
    while let Some(frame) = follower.next().await {
        rest.push(frame);
    }
    assert_eq!(rest.last().map(|f| f.event.as_str()), Some("turn_stop"));

    let gone = app
        .get(&format!("/admin/tenants/{tenant}"), &app.admin_token)
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    for table in ["sessions", "turns", "runs"] {
        let sql = format!(
            "SELECT COUNT(*) FROM {table} WHERE tenant_id = {}",
            db.id(&tenant)
        );
        assert_eq!(count(&db, &sql).await, 0, "{table}");
    }
    for table in ["events", "history"] {
        let sql = format!(
            "SELECT COUNT(*) FROM {table} WHERE session_id = {}",
            db.id(&session)
        );
        assert_eq!(count(&db, &sql).await, 0, "{table}");
    }
}
