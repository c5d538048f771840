//! Admission under load: each tenant's share of the queue, and one turn for two identical
//! requests that race with one idempotency key.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;

use crate::acp::{acp_user, run};
use crate::helpers::{TestDb, captured_logs, spawn_app_on, user};

#[tokio::test]
async fn a_tenant_over_its_share_of_the_queue_is_refused_while_others_still_queue() {
    let config = "[engine]\nmax_concurrent_turns = 1\nmax_concurrent_turns_per_tenant = 1\n\
                  max_queued_turns = 3\nmax_queued_turns_per_tenant = 2\n";
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, greedy) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let slow =
        |text: &str| json!({"agent_name": "slow", "input": [acp_user(text)], "mode": "async"});
    let holder = run(&app, &greedy, slow(&"h".repeat(400))).await;
    assert_eq!(holder.status, StatusCode::ACCEPTED, "{}", holder.text);
    let holder_id = holder.body["run_id"].as_str().unwrap().to_owned();
    // The holder takes the only slot once it starts; wait for that.
    loop {
        let polled = app.get(&format!("/acp/runs/{holder_id}"), &greedy).await;
        if polled.body["status"] == "in-progress" {
            break;
        }
    }
    for _ in 0..2 {
        let queued = run(&app, &greedy, slow("q")).await;
        assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);
    }
    let refused = run(&app, &greedy, slow("one too many")).await;
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.text
    );
    // The tenant's share of the queue is its queued-turn quota.
    assert_eq!(
        refused.body["data"]["code"], "quota_exceeded",
        "{}",
        refused.text
    );
    assert_eq!(refused.body["data"]["quota"], "queued_turns");
    // Another tenant still queues: the greedy one holds only its share.
    let queued = run(&app, &other, slow("mine")).await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);
    assert_eq!(queued.body["status"], "created");
    let aap = app
        .create_session(&other, json!({"agent": {"name": "echo"}}))
        .await;
    let busy = app
        .post(
            &format!("/sessions/{aap}/turns"),
            &other,
            json!({"stream": "delta", "messages": [user("over the global bound")]}),
        )
        .await;
    assert_eq!(busy.status, StatusCode::TOO_MANY_REQUESTS, "{}", busy.text);
    assert_eq!(busy.code(), "queue_full");
}

#[tokio::test]
async fn two_identical_requests_racing_with_one_key_get_the_same_turn() {
    let app = spawn_app_on(Arc::new(TestDb::new().await), "").await;
    let (_, token) = app.new_tenant().await;
    for round in 0..15 {
        let session = app
            .create_session(&token, json!({"agent": {"name": "echo"}}))
            .await;
        let send = || {
            app.client
                .post(app.url(&format!("/sessions/{session}/turns")))
                .bearer_auth(&token)
                .header("Idempotency-Key", format!("key-{round}"))
                .json(&json!({"messages": [user("once")]}))
                .send()
        };
        let (first, second) = tokio::join!(send(), send());
        let (first, second) = (first.unwrap(), second.unwrap());
        assert_eq!(first.status(), StatusCode::OK, "round {round}");
        assert_eq!(second.status(), StatusCode::OK, "round {round}");
        let turn = |r: &reqwest::Response| {
            r.headers()
                .get("agentry-turn-id")
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert!(turn(&first).is_some());
        assert_eq!(turn(&first), turn(&second), "round {round}");
    }
}

/// A turn admitted while its tenant has a free slot is started by its admission: on
/// PostgreSQL the claim of the tenant's slot over every process (its lock and the update
/// to `running`) runs in the admission's own transaction, and the turn's task claims
/// nothing more. On SQLite (one process) nothing is claimed at all.
#[tokio::test]
async fn a_turn_with_a_free_slot_is_started_by_its_admission_in_one_transaction() {
    let db = Arc::new(TestDb::new().await);
    let postgres = matches!(*db, TestDb::Postgres { .. });
    let app = spawn_app_on(db, "").await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let request_id = format!("admit-{}", uuid::Uuid::new_v4().simple());
    let response = app
        .client
        .post(app.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(&token)
        .header("X-Request-Id", &request_id)
        .json(&json!({"stream": "none", "messages": [user("start me")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["stopReason"], "end_turn", "{body}");
    // The request's statements, and whether each ran in the turn's own task.
    let statements: Vec<(bool, String)> = captured_logs()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["target"] == "sqlx::query")
        .filter_map(|event| {
            let spans = event["spans"].as_array()?;
            spans
                .iter()
                .any(|span| span["client_request_id"] == request_id.as_str())
                .then(|| {
                    let in_turn = spans.iter().any(|span| span["name"] == "turn");
                    let fields = &event["fields"];
                    // A short statement is its summary; a longer one is in `db.statement`.
                    let sql = format!(
                        "{} {}",
                        fields["summary"].as_str().unwrap_or_default(),
                        fields["db.statement"].as_str().unwrap_or_default()
                    );
                    (in_turn, sql)
                })
        })
        .collect();
    assert!(
        statements
            .iter()
            // The turn is a row of the one statement that admits it (SQLite), or recorded
            // by the one call that admits it (PostgreSQL).
            .any(|(_, sql)| sql.contains("INSERT INTO writes") || sql.contains("agentry_admit(")),
        "the request's statements were captured: {statements:?}"
    );
    let claims = |in_turn: bool| {
        statements
            .iter()
            .filter(|(turn, sql)| {
                *turn == in_turn
                    && (sql.contains("hashtextextended($1::text, 7)")
                        || sql.contains("SET status = 'running' WHERE tenant_id"))
            })
            .count()
    };
    assert_eq!(
        claims(true),
        0,
        "the turn's task claimed a slot: {statements:?}"
    );
    // On PostgreSQL the slot is claimed by the admission's call (`agentry_admit` with its
    // `start_within`), in its statement: the turn's task, which claims the slot of a turn
    // not started yet, claimed none. SQLite has one process and no slot to claim.
    assert_eq!(claims(false), 0, "{statements:?}");
    let admissions = statements
        .iter()
        .filter(|(turn, sql)| !*turn && sql.contains("agentry_admit("))
        .count();
    assert_eq!(admissions, if postgres { 1 } else { 0 }, "{statements:?}");
}
