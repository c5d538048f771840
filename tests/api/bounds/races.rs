//! Quotas exact under concurrency: parallel turns against a token budget, parallel endpoint
//! and push-config creations against their limits, parallel turns against the queue.

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::a2a::{V1, rpc, send};
use crate::acp::acp_user;
use crate::hardening::app_with;
use crate::helpers::{TestApp, user};

const LOOPBACK: &str = "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1\"]\n";

async fn set_quotas(app: &TestApp, tenant: &str, quotas: Value) {
    let reply = app
        .patch(
            &format!("/admin/tenants/{tenant}/quotas"),
            &app.admin_token,
            quotas,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
}

/// 30 turns at once against a budget that fits two: a turn's tokens are reserved as it is
/// admitted, so at most the turns the budget allows run (tolerance: the last admitted turn
/// may end past the budget, as one turn always could), never all 30.
#[tokio::test]
async fn parallel_turns_admit_no_more_than_the_token_budget_allows() {
    let app = app_with("").await;
    let (tenant, token) = app.new_tenant().await;
    let mut sessions = Vec::new();
    for _ in 0..30 {
        sessions.push(
            app.create_session(&token, json!({"agent": {"name": "echo"}}))
                .await,
        );
    }
    // One turn of this text costs the echo agent about 14 tokens.
    let probe = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let reply = app
        .post(
            &format!("/sessions/{probe}/turns"),
            &token,
            json!({"messages": [user("twelve tokens of text, more or less")]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let usage = app.get("/usage", &token).await;
    let one_turn = usage.body["input_tokens"].as_u64().unwrap()
        + usage.body["output_tokens"].as_u64().unwrap();
    assert!(one_turn > 5, "{}", usage.text);
    set_quotas(&app, &tenant, json!({"tokens_per_day": one_turn * 3})).await;

    let paths: Vec<String> = sessions
        .iter()
        .map(|session| format!("/sessions/{session}/turns"))
        .collect();
    let replies = join_all(paths.iter().map(|path| {
        app.post(
            path,
            &token,
            json!({"messages": [user("twelve tokens of text, more or less")]}),
        )
    }))
    .await;
    let admitted = replies
        .iter()
        .filter(|r| r.status == StatusCode::OK)
        .count();
    for refused in replies.iter().filter(|r| r.status != StatusCode::OK) {
        assert_eq!(
            refused.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{}",
            refused.text
        );
        assert_eq!(
            refused.body["error"]["quota"], "tokens_per_day",
            "{}",
            refused.text
        );
    }
    let usage = app.get("/usage", &token).await;
    let used = usage.body["input_tokens"].as_u64().unwrap()
        + usage.body["output_tokens"].as_u64().unwrap();
    eprintln!(
        "{admitted} of 30 turns admitted, {used} tokens used of a budget of {}",
        one_turn * 3
    );
    assert!(admitted >= 1, "some turn fits the budget");
    assert!(
        used <= one_turn * 3 + one_turn,
        "{admitted} turns admitted used {used} tokens of a budget of {}",
        one_turn * 3
    );
}

#[tokio::test]
async fn parallel_endpoint_creations_stop_at_the_limit_exactly() {
    let app = app_with(&format!("{LOOPBACK}max_endpoints_per_tenant = 20\n")).await;
    let (_, token) = app.new_tenant().await;
    let replies = join_all((0..30).map(|i| {
        app.post(
            "/webhooks",
            &token,
            json!({"url": format!("http://127.0.0.1:9/hook/{i}")}),
        )
    }))
    .await;
    let created = replies
        .iter()
        .filter(|r| r.status == StatusCode::CREATED)
        .count();
    assert_eq!(created, 20);
    for refused in replies.iter().filter(|r| r.status != StatusCode::CREATED) {
        assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    }
    let listed = app.get("/webhooks?limit=100", &token).await;
    assert_eq!(
        listed.body["endpoints"].as_array().map(Vec::len),
        Some(20),
        "{}",
        listed.text
    );
}

/// Push configs count per task (10) and per tenant (`webhooks.max_run_endpoints_per_tenant`),
/// both exactly under parallel creations.
#[tokio::test]
async fn parallel_push_config_creations_stop_at_the_task_and_tenant_limits_exactly() {
    let app = app_with(&format!("{LOOPBACK}max_run_endpoints_per_tenant = 12\n")).await;
    let (_, token) = app.new_tenant().await;
    let mut created = Vec::new();
    for _ in 0..2 {
        let task = send(&app, "echo", &token, "hi").await;
        let id = task["id"].as_str().unwrap().to_owned();
        let replies = join_all((0..30).map(|i| {
            rpc(
                &app,
                "echo",
                &token,
                V1,
                "CreateTaskPushNotificationConfig",
                json!({"taskId": id, "id": format!("cfg-{i}"),
                       "url": format!("http://127.0.0.1:9/push/{i}")}),
            )
        }))
        .await;
        created.push(
            replies
                .iter()
                .filter(|r| r.body.get("result").is_some())
                .count(),
        );
        for refused in replies.iter().filter(|r| r.body.get("result").is_none()) {
            assert!(refused.body["error"]["code"].is_i64(), "{}", refused.text);
        }
    }
    assert_eq!(created, [10, 2]);
}

/// A tenant that may run one turn and queue two: of 30 turns sent at once, at most three
/// are taken (the queue counted in the transaction that adds each turn).
#[tokio::test]
async fn parallel_turns_stop_at_the_queued_turns_quota() {
    let app = app_with("").await;
    let (tenant, token) = app.new_tenant().await;
    set_quotas(
        &app,
        &tenant,
        json!({"concurrent_turns": 1, "queued_turns": 2}),
    )
    .await;
    let long = "x".repeat(400);
    let replies = join_all((0..30).map(|_| {
        app.post(
            "/acp/runs",
            &token,
            json!({"agent_name": "slow", "input": [acp_user(&long)], "mode": "async"}),
        )
    }))
    .await;
    let taken = replies.iter().filter(|r| r.status.is_success()).count();
    eprintln!("{taken} of 30 runs taken with 1 running and 2 queued allowed");
    assert!((1..=3).contains(&taken), "{taken} runs taken");
    for refused in replies.iter().filter(|r| !r.status.is_success()) {
        assert_eq!(
            refused.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{}",
            refused.text
        );
    }
}
