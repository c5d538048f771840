//! Overlap, quotas, catch-up after downtime, the fixed session, webhooks, and what stops
//! a schedule.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{FAST, create, every, fast_app, finished, runs, time, wait_for_runs};
use crate::helpers::{TestApp, TestDb, spawn_app_on};

/// A paused schedule of the slow agent (about two seconds a turn).
fn slow(overlap: &str) -> Value {
    json!({
        "agent": {"name": "slow"},
        "cron": "0 0 1 1 *",
        "input": "a long enough input for the slow agent to take its time",
        "overlap": overlap,
        "enabled": false,
    })
}

async fn run_now(app: &TestApp, token: &str, id: &str) -> Value {
    let reply = app
        .post(&format!("/schedules/{id}/run"), token, json!({}))
        .await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    reply.body
}

#[tokio::test]
async fn overlap_skip_drops_an_occurrence_while_the_previous_runs() {
    let app = fast_app().await;
    let (_, token) = app.new_tenant().await;
    let schedule = create(&app, &token, slow("skip")).await;
    let id = schedule["id"].as_str().unwrap();
    let first = run_now(&app, &token, id).await;
    assert_eq!(first["status"], "started", "{first}");
    assert_eq!(first["kind"], "manual");
    let second = run_now(&app, &token, id).await;
    assert_eq!(second["status"], "not_started", "{second}");
    assert_eq!(second["reason"], "skipped");
    assert_eq!(second["turn_id"], Value::Null);
    let done = wait_for_runs(&app, &token, id, Duration::from_secs(20), |runs| {
        finished(runs) == 1
    })
    .await;
    assert_eq!(done.len(), 2);
    // Once it ended, the next one starts.
    let third = run_now(&app, &token, id).await;
    assert_eq!(third["status"], "started", "{third}");
}

#[tokio::test]
async fn overlap_queue_starts_an_occurrence_once_the_previous_ended() {
    let app = fast_app().await;
    let (_, token) = app.new_tenant().await;
    let schedule = create(&app, &token, slow("queue")).await;
    let id = schedule["id"].as_str().unwrap();
    let first = run_now(&app, &token, id).await;
    assert_eq!(first["status"], "started", "{first}");
    let second = run_now(&app, &token, id).await;
    assert_eq!(second["status"], "waiting", "{second}");
    let done = wait_for_runs(&app, &token, id, Duration::from_secs(30), |runs| {
        finished(runs) == 2
    })
    .await;
    let (a, b) = (&done[0], &done[1]);
    assert_eq!(a["id"], first["id"]);
    assert_ne!(a["turn_id"], b["turn_id"]);
    assert!(
        time(&b["started_at"]) >= time(&a["finished_at"]) - chrono::Duration::milliseconds(5),
        "the queued occurrence started before the previous one ended: {done:#?}"
    );
    for run in &done {
        assert_eq!(run["turn_status"], "completed");
    }
}

#[tokio::test]
async fn a_quota_refusal_is_recorded_and_not_retried() {
    let app = fast_app().await;
    let (tenant, token) = app.new_tenant().await;
    let set = app
        .patch(
            &format!("/admin/tenants/{tenant}/quotas"),
            &app.admin_token,
            json!({"turns_per_minute": 1}),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text);
    let body = json!({"agent": {"name": "echo"}, "cron": "0 0 1 1 *", "input": "hi",
        "overlap": "queue", "enabled": false});
    let schedule = create(&app, &token, body).await;
    let id = schedule["id"].as_str().unwrap();
    let first = run_now(&app, &token, id).await;
    assert_eq!(first["status"], "started", "{first}");
    wait_for_runs(&app, &token, id, Duration::from_secs(10), |r| {
        finished(r) == 1
    })
    .await;
    let refused = run_now(&app, &token, id).await;
    assert_eq!(refused["status"], "not_started", "{refused}");
    assert_eq!(refused["reason"], "quota");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("turns_per_minute"),
        "{refused}"
    );
    // It stays refused: nothing retries it.
    let all = runs(&app, &token, id).await;
    assert_eq!(all.len(), 2);
    assert_eq!(all[1]["status"], "not_started");
}

/// Stopped over several occurrences and started again, each schedule follows its
/// catch-up policy: the missed occurrences are in its history, and only those the policy
/// names started.
#[tokio::test]
async fn a_restarted_process_follows_each_schedules_catch_up_policy() {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_app_on(db.clone(), FAST).await;
    let (_, token) = app.new_tenant().await;
    let mut ids = Vec::new();
    for policy in [
        json!({"catch_up": "none"}),
        json!({"catch_up": "latest"}),
        // Caught-up occurrences follow the overlap policy too: queued, both start.
        json!({"catch_up": "up_to", "catch_up_limit": 2, "overlap": "queue"}),
    ] {
        let schedule = create(&app, &token, every(2, policy)).await;
        ids.push(schedule["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        wait_for_runs(&app, &token, id, Duration::from_secs(10), |r| {
            finished(r) >= 1
        })
        .await;
    }
    let db = app.stop().await;
    let stopped_at = chrono::Utc::now();
    // Down over three or four occurrences of each.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let app = spawn_app_on(db, FAST).await;
    let expected_started = [0, 1, 2];
    for (id, catch_up) in ids.iter().zip(expected_started) {
        let history = wait_for_runs(&app, &token, id, Duration::from_secs(10), |runs| {
            runs.iter().any(|r| {
                time(&r["planned_at"]) > stopped_at
                    && r["kind"] == "scheduled"
                    && r["reason"] != "missed"
            }) && runs
                .iter()
                .all(|r| r["kind"] != "catch_up" || r["turn_id"].is_string())
        })
        .await;
        // After the stop: first the occurrences found late (missed, or caught up), then
        // the ones started on time.
        let after: Vec<&Value> = history
            .iter()
            .filter(|r| time(&r["planned_at"]) > stopped_at)
            .collect();
        let late = after
            .iter()
            .take_while(|r| r["kind"] == "catch_up" || r["reason"] == "missed")
            .count();
        assert!(late >= 2, "{history:#?}");
        assert!(
            after[late..]
                .iter()
                .all(|r| r["kind"] == "scheduled" && r["reason"] != "missed"),
            "{history:#?}"
        );
        let caught: Vec<_> = after[..late]
            .iter()
            .filter(|r| r["kind"] == "catch_up")
            .collect();
        assert_eq!(caught.len(), catch_up, "{history:#?}");
        // The caught-up ones are the latest missed, and each started its turn.
        assert!(
            after[late - catch_up..late]
                .iter()
                .all(|r| r["kind"] == "catch_up")
        );
        for run in &caught {
            assert!(run["turn_id"].is_string(), "{run}");
        }
        // Each planned time once.
        let mut planned: Vec<_> = history.iter().map(|r| r["planned_at"].clone()).collect();
        planned.dedup();
        assert_eq!(planned.len(), history.len());
    }
}

#[tokio::test]
async fn a_fixed_session_is_continued_by_every_occurrence() {
    let app = fast_app().await;
    let (_, token) = app.new_tenant().await;
    let schedule = create(
        &app,
        &token,
        every(2, json!({"session_policy": "fixed", "overlap": "queue"})),
    )
    .await;
    let id = schedule["id"].as_str().unwrap();
    let session = schedule["session_id"].as_str().unwrap().to_owned();
    let history = wait_for_runs(&app, &token, id, Duration::from_secs(20), |r| {
        finished(r) >= 2
    })
    .await;
    app.patch(
        &format!("/schedules/{id}"),
        &token,
        json!({"enabled": false}),
    )
    .await;
    for run in history.iter().filter(|r| r["status"] == "finished") {
        assert_eq!(run["session_id"], session.as_str());
    }
    let messages = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert!(
        messages.text.matches("tick").count() >= 4,
        "{}",
        messages.text
    );
}

#[tokio::test]
async fn occurrences_are_told_to_webhooks_and_a_deleted_tenant_stops_its_schedules() {
    let extra = format!(
        "{FAST}[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1:9\"]\n\
         retry_initial_delay_ms = 60000\n"
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &extra).await;
    let (tenant, token) = app.new_tenant().await;
    let endpoint = app
        .post(
            "/webhooks",
            &token,
            json!({"url": "http://127.0.0.1:9/hooks",
                   "event_types": ["schedule.run.started", "schedule.run.finished",
                                   "schedule.run.failed"]}),
        )
        .await;
    assert_eq!(endpoint.status, 201, "{}", endpoint.text);
    let schedule = create(&app, &token, every(2, json!({}))).await;
    let id = schedule["id"].as_str().unwrap().to_owned();
    let history = wait_for_runs(&app, &token, &id, Duration::from_secs(20), |r| {
        finished(r) >= 1
    })
    .await;
    let run = history.iter().find(|r| r["status"] == "finished").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let events = loop {
        let deliveries = app
            .db
            .column("SELECT event_type || '|' || data FROM webhook_deliveries")
            .await;
        let events: Vec<(String, Value)> = deliveries
            .iter()
            .map(|row| {
                let (event, data) = row.split_once('|').unwrap();
                (event.to_owned(), serde_json::from_str(data).unwrap())
            })
            .filter(|(_, data): &(String, Value)| data["occurrence_id"] == run["id"])
            .collect();
        if events.len() >= 2 || std::time::Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert!(types.contains(&"schedule.run.started"), "{events:?}");
    assert!(types.contains(&"schedule.run.finished"), "{events:?}");
    for (_, data) in &events {
        assert_eq!(data["schedule_id"], id.as_str());
        assert_eq!(data["turn_id"], run["turn_id"]);
    }

    // Deleting the tenant deletes its schedules: nothing of it is due any more.
    let deleted = app
        .delete(&format!("/admin/tenants/{tenant}"), &app.admin_token)
        .await;
    assert!(deleted.status.is_success(), "{}", deleted.text);
    let left = app.db.scalar("SELECT COUNT(*) FROM schedules").await;
    assert_eq!(left, "0");
}

#[tokio::test]
async fn a_schedule_pins_a_tenant_agents_version_and_stops_when_the_agent_is_deleted() {
    let extra = format!("{FAST}[[connections]]\nname = \"local\"\nprovider = \"echo\"\n");
    let app = spawn_app_on(Arc::new(TestDb::new().await), &extra).await;
    let (_, token) = app.new_tenant().await;
    let created = app
        .post(
            "/agents",
            &token,
            json!({"name": "mine", "connection": "local"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let published = app
        .post("/agents/mine/publish", &token, json!({"version": 1}))
        .await;
    assert_eq!(published.status, 200, "{}", published.text);

    let missing = app
        .post(
            "/schedules",
            &token,
            json!({"agent": {"name": "mine", "version": 5}, "cron": "0 9 * * *", "input": "hi"}),
        )
        .await;
    assert_eq!(missing.status, 400, "{}", missing.text);
    assert_eq!(missing.body["error"]["field"], "agent.version");

    let schedule = create(
        &app,
        &token,
        json!({"agent": {"name": "mine", "version": 1}, "cron": "0 9 * * *", "input": "hi"}),
    )
    .await;
    assert_eq!(schedule["agent"]["version"], 1);
    let id = schedule["id"].as_str().unwrap();
    // The run as recorded once its turn started: the echo agent may have finished already.
    let run = run_now(&app, &token, id).await;
    assert!(
        run["status"] == "started" || run["status"] == "finished",
        "{run}"
    );
    assert!(run["turn_id"].is_string(), "{run}");

    let deleted = app.delete("/agents/mine", &token).await;
    assert!(deleted.status.is_success(), "{}", deleted.text);
    let stopped = app.get(&format!("/schedules/{id}"), &token).await;
    assert_eq!(stopped.body["enabled"], false, "{}", stopped.text);
    assert_eq!(stopped.body["paused_reason"], "agent_missing");
    assert_eq!(stopped.body["next_at"], Value::Null);
    let resumed = app
        .patch(
            &format!("/schedules/{id}"),
            &token,
            json!({"enabled": true}),
        )
        .await;
    assert_eq!(resumed.status, 400, "{}", resumed.text);
    assert_eq!(resumed.body["error"]["field"], "enabled");
    // Run now records why nothing started.
    let refused = run_now(&app, &token, id).await;
    assert_eq!(refused["status"], "not_started", "{refused}");
    assert_eq!(refused["reason"], "agent_missing");
}
