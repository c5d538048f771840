//! Per-tenant quotas: each one refuses with 429 `quota_exceeded` naming it, `Retry-After`
//! and the RateLimit headers; admin changes apply at once; other tenants are untouched; the
//! per-minute quotas give units back at their pace; and the limits hold over two processes on
//! one PostgreSQL database.

use std::time::Instant;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::acp::acp_user;
use crate::helpers::{Reply, TestApp, TestDb, spawn_app, user};
use crate::process::{Deployment, ServerProcess, run_ok};

async fn set_quotas(app: &TestApp, tenant: &str, quotas: Value) -> Reply {
    app.patch(
        &format!("/admin/tenants/{tenant}/quotas"),
        &app.admin_token,
        quotas,
    )
    .await
}

/// The refusal of `quota`: 429, the code and the quota named, `Retry-After` within the
/// window, the RateLimit headers naming the quota with nothing left.
fn assert_refused(reply: &Reply, quota: &str, limit: u64) {
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.text
    );
    assert_eq!(reply.code(), "quota_exceeded", "{}", reply.text);
    assert_eq!(reply.body["error"]["quota"], quota, "{}", reply.text);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(quota)
    );
    let retry: u64 = reply.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry), "{retry}");
    let policy = reply.headers["ratelimit-policy"].to_str().unwrap();
    assert!(
        policy.starts_with(&format!("\"{quota}\";q={limit}")),
        "{policy}"
    );
    assert_eq!(
        reply.headers["ratelimit"].to_str().unwrap(),
        format!("\"{quota}\";r=0;t={retry}")
    );
}

/// `r=` of the quota in a response's `RateLimit` header.
fn remaining(reply: &Reply, quota: &str) -> u64 {
    let header = reply.headers["ratelimit"].to_str().unwrap();
    let item = header
        .split(", ")
        .find(|item| item.starts_with(&format!("\"{quota}\"")))
        .unwrap_or_else(|| panic!("{quota} in {header}"));
    item.split(';')
        .find_map(|p| p.strip_prefix("r="))
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn requests_over_the_per_minute_quota_are_refused_and_a_raised_quota_applies_at_once() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let (_, neighbour) = app.new_tenant().await;
    let reply = set_quotas(&app, &tenant, json!({"requests_per_minute": 3})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["quotas"]["requests_per_minute"], 3);
    assert_eq!(reply.body["own"]["requests_per_minute"], 3);
    assert_eq!(reply.body["own"]["turns_per_minute"], Value::Null);

    for left in [2, 1, 0] {
        let reply = app.get("/sessions", &token).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        assert_eq!(
            reply.headers["ratelimit-policy"],
            "\"requests_per_minute\";q=3;w=60"
        );
        assert_eq!(remaining(&reply, "requests_per_minute"), left);
    }
    let refused = app.get("/sessions", &token).await;
    assert_refused(&refused, "requests_per_minute", 3);
    // Paced: one request's unit drains every 20 s, and a retry fits once it has.
    let retry: u64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((18..=20).contains(&retry), "{retry}");
    // Every face: the same quota refuses ACP requests, in ACP's error body.
    let acp = app.get("/acp/agents", &token).await;
    assert_eq!(acp.status, StatusCode::TOO_MANY_REQUESTS, "{}", acp.text);
    assert_eq!(acp.body["data"]["code"], "quota_exceeded");
    assert_eq!(acp.body["data"]["quota"], "requests_per_minute");
    let header = acp.headers["ratelimit"].to_str().unwrap();
    assert!(
        header.starts_with("\"requests_per_minute\";r=0;t="),
        "{header}"
    );

    // The other tenant has no quota of its own: no headers, no refusal.
    let other = app.get("/sessions", &neighbour).await;
    assert_eq!(other.status, StatusCode::OK);
    assert!(other.headers.get("ratelimit").is_none());

    let reply = set_quotas(&app, &tenant, json!({"requests_per_minute": 10})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let again = app.get("/sessions", &token).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    // Back to the default (unlimited): no RateLimit headers at all.
    set_quotas(&app, &tenant, json!({"requests_per_minute": null})).await;
    let unlimited = app.get("/sessions", &token).await;
    assert_eq!(unlimited.status, StatusCode::OK);
    assert!(
        unlimited.headers.get("ratelimit-policy").is_none(),
        "{:?}",
        unlimited.headers
    );
}

#[tokio::test]
async fn turns_over_the_per_minute_quota_are_refused_on_every_face() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    set_quotas(&app, &tenant, json!({"turns_per_minute": 2})).await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let path = format!("/sessions/{session}/turns");
    for _ in 0..2 {
        let reply = app
            .post(&path, &token, json!({"messages": [user("hi")]}))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let refused = app
        .post(&path, &token, json!({"messages": [user("hi")]}))
        .await;
    assert_refused(&refused, "turns_per_minute", 2);
    // No turn was recorded for the refusal.
    let turns = app.get(&path, &token).await;
    assert_eq!(turns.body["turns"].as_array().unwrap().len(), 2);

    let acp = app
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "echo", "input": [acp_user("hi")], "mode": "sync"}),
        )
        .await;
    assert_eq!(acp.status, StatusCode::TOO_MANY_REQUESTS, "{}", acp.text);
    assert_eq!(acp.body["data"]["code"], "quota_exceeded");
    assert_eq!(acp.body["data"]["quota"], "turns_per_minute");
    assert!(acp.headers.contains_key("retry-after"));
    assert!(acp.headers.contains_key("ratelimit"));

    // A streamed AgentScope request is refused by status, not by an event on a 200 stream.
    let agentscope = app
        .post(
            "/agentscope/process",
            &token,
            json!({"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                   "stream": true, "model": "echo"}),
        )
        .await;
    assert_refused(&agentscope, "turns_per_minute", 2);
}

#[tokio::test]
async fn concurrent_and_queued_turns_over_their_quotas_are_refused() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    set_quotas(
        &app,
        &tenant,
        json!({"concurrent_turns": 1, "queued_turns": 0}),
    )
    .await;
    let long = "a long answer, one character at a time, for long enough";
    let first = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let second = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let mut running = app
        .stream_turn(
            &token,
            &first,
            json!({"stream": "delta", "messages": [user(long)]}),
        )
        .await;
    running.next().await.expect("the turn started");
    let refused = app
        .post(
            &format!("/sessions/{second}/turns"),
            &token,
            json!({"messages": [user("hi")]}),
        )
        .await;
    assert_refused(&refused, "concurrent_turns", 1);

    // One may wait: the next waits, the one after is refused naming the queue.
    set_quotas(&app, &tenant, json!({"queued_turns": 1})).await;
    let third = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let queued = app
        .stream_turn(
            &token,
            &second,
            json!({"stream": "delta", "messages": [user("hi")]}),
        )
        .await;
    let refused = app
        .post(
            &format!("/sessions/{third}/turns"),
            &token,
            json!({"messages": [user("hi")]}),
        )
        .await;
    assert_refused(&refused, "queued_turns", 1);
    // Both admitted turns run to their ends, one after the other.
    for mut stream in [running, queued] {
        let frames = stream.until_turn_stop().await;
        let last = frames.last().unwrap();
        assert_eq!(last.event, "turn_stop", "{frames:?}");
        assert_eq!(last.data["stopReason"], "end_turn", "{frames:?}");
    }
}

#[tokio::test]
async fn stored_sessions_and_tokens_per_day_are_refused_once_used_up() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    set_quotas(&app, &tenant, json!({"stored_sessions": 2})).await;
    let kept = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    app.create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let refused = app
        .post("/sessions", &token, json!({"agent": {"name": "echo"}}))
        .await;
    assert_refused(&refused, "stored_sessions", 2);
    // Sessions made implicitly by another face count too.
    let acp = app
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "echo", "input": [acp_user("hi")], "mode": "sync"}),
        )
        .await;
    assert_eq!(acp.status, StatusCode::TOO_MANY_REQUESTS, "{}", acp.text);
    assert_eq!(acp.body["data"]["quota"], "stored_sessions");
    let deleted = app.delete(&format!("/sessions/{kept}"), &token).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;

    // The echo agent reports a few tokens per turn: the first turn uses the day's quota.
    set_quotas(&app, &tenant, json!({"tokens_per_day": 1})).await;
    let path = format!("/sessions/{session}/turns");
    let first = app
        .post(&path, &token, json!({"messages": [user("hello there")]}))
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let refused = app
        .post(&path, &token, json!({"messages": [user("again")]}))
        .await;
    assert_refused(&refused, "tokens_per_day", 1);
    let usage = app
        .get(&format!("/admin/tenants/{tenant}/usage"), &app.admin_token)
        .await;
    let used = usage.body["input_tokens"].as_u64().unwrap()
        + usage.body["output_tokens"].as_u64().unwrap();
    assert!(used >= 1, "{}", usage.text);
    assert_eq!(remaining(&refused, "tokens_per_day"), 0);
}

#[tokio::test]
async fn quota_changes_are_validated_and_shown_with_the_defaults() {
    let app = spawn_app().await;
    let (tenant, _) = app.new_tenant().await;
    let shown = app
        .get(&format!("/admin/tenants/{tenant}/quotas"), &app.admin_token)
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.text);
    // The configured defaults: concurrency and queue from [engine], the rest unlimited.
    assert_eq!(shown.body["quotas"]["concurrent_turns"], 16);
    assert_eq!(shown.body["quotas"]["queued_turns"], 100);
    assert_eq!(shown.body["quotas"]["requests_per_minute"], Value::Null);
    for (body, field) in [
        (json!({"requests": 5}), "requests"),
        (json!({"turns_per_minute": -1}), "turns_per_minute"),
        (json!({"concurrent_turns": 0}), "concurrent_turns"),
        (json!([1]), "body"),
    ] {
        let reply = set_quotas(&app, &tenant, body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
        assert_eq!(reply.body["error"]["field"], field, "{}", reply.text);
    }
    let missing = set_quotas(
        &app,
        "ten_0193c6a2-0000-7000-8000-000000000000",
        json!({"turns_per_minute": 1}),
    )
    .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    // Nothing of the refused changes was stored.
    let after = app
        .get(&format!("/admin/tenants/{tenant}/quotas"), &app.admin_token)
        .await;
    assert_eq!(after.body, shown.body);
}

#[tokio::test]
async fn the_cli_sets_quotas_that_a_serving_process_applies() {
    let deployment = Deployment::new("").await;
    let (tenant, token) = deployment.tenant_token("acme");
    let shown = run_ok(deployment.command().args([
        "admin",
        "quotas",
        &tenant,
        "--set",
        "requests_per_minute=2",
        "--set",
        "stored_sessions=default",
    ]));
    let shown: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["quotas"]["requests_per_minute"], 2);
    let bad = deployment
        .command()
        .args(["admin", "quotas", &tenant, "--set", "requests=2"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("requests"));

    let server = deployment.start(&[]);
    let statuses = get_sessions(&server, &token, 3).await;
    assert_eq!(statuses, [200, 200, 429]);
}

/// The statuses of `n` `GET /sessions` through `server`.
async fn get_sessions(server: &ServerProcess, token: &str, n: usize) -> Vec<u16> {
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..n {
        let response = client
            .get(server.url("/sessions"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    statuses
}

#[tokio::test]
async fn rate_quotas_hold_over_two_processes_on_one_postgresql() {
    let db = TestDb::new().await;
    if db.url().starts_with("sqlite:") {
        eprintln!("several processes need PostgreSQL: set TEST_POSTGRES_URL");
        return;
    }
    // The whole quota may be used at once (a burst of 40 requests, 5 turns).
    let deployment = Deployment::on(db, "[quotas]\nburst_seconds = 60\n");
    let (chatty, chatty_token) = deployment.tenant_token("chatty");
    let (busy, busy_token) = deployment.tenant_token("busy");
    let set = |tenant: &str, quota: &str| {
        run_ok(
            deployment
                .command()
                .args(["admin", "quotas", tenant, "--set", quota]),
        );
    };
    set(&chatty, "requests_per_minute=40");
    set(&busy, "turns_per_minute=5");
    let a = deployment.start(&[]);
    let b = deployment.start(&[]);
    // 45 requests on each process at once (either one alone could use the whole burst):
    // the burst passes, plus at most the units that drained meanwhile (one per 1.5 s).
    let started = Instant::now();
    let (on_a, on_b) = tokio::join!(
        get_sessions(&a, &chatty_token, 45),
        get_sessions(&b, &chatty_token, 45)
    );
    let drained = (started.elapsed().as_secs_f64() / 1.5).ceil() as usize;
    let passed = on_a.iter().chain(&on_b).filter(|s| **s == 200).count();
    let refused = on_a.iter().chain(&on_b).filter(|s| **s == 429).count();
    assert_eq!(passed + refused, 90, "{on_a:?} {on_b:?}");
    assert!(
        (40..=40 + drained).contains(&passed),
        "{passed} passed in {:?}: {on_a:?} {on_b:?}",
        started.elapsed()
    );

    // Turns admitted by either process: five in all.
    let client = reqwest::Client::new();
    let mut admitted = 0;
    let started = Instant::now();
    for (i, server) in [&a, &b].into_iter().cycle().take(8).enumerate() {
        let session = server.create_session(&busy_token, "echo").await;
        let response = client
            .post(server.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(&busy_token)
            .json(&json!({"messages": [user(&format!("turn {i}"))]}))
            .send()
            .await
            .unwrap();
        match response.status() {
            StatusCode::OK => admitted += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                let body: Value = response.json().await.unwrap();
                assert_eq!(body["error"]["quota"], "turns_per_minute");
            }
            other => panic!("{other}"),
        }
    }
    // One turn drains every 12 s.
    let drained = (started.elapsed().as_secs_f64() / 12.0).ceil() as usize;
    assert!((5..=5 + drained).contains(&admitted), "{admitted}");
}

#[tokio::test]
async fn a_bucket_gives_units_back_at_the_quotas_pace() {
    let app = spawn_app().await;
    let (tenant, _) = app.new_tenant().await;
    let (other, _) = app.new_tenant().await;
    let tenant = tenant.parse().unwrap();
    let other = other.parse().unwrap();
    let store = app.state.store();
    // 60 a minute: one unit drains per second, from a bucket of 10.
    let drain = 1e-6;
    let t0: i64 = 1_800_000_000_000_000;
    let take = |tenant, at: i64, want: u64| async move {
        store
            .take_from_bucket(&tenant, "requests_per_minute", at, want, drain, 10)
            .await
            .unwrap()
    };
    let close = |(granted, level): (u64, f64), expected: (u64, f64)| {
        assert_eq!(granted, expected.0, "{level}");
        assert!(
            (level - expected.1).abs() < 1e-6,
            "{level} != {}",
            expected.1
        );
    };
    close(take(tenant, t0, 4).await, (4, 4.0));
    // A take that does not fit whole gets what is left.
    close(take(tenant, t0, 8).await, (6, 10.0));
    // Full: nothing fits until a whole unit drained.
    close(take(tenant, t0 + 999_000, 1).await, (0, 9.001));
    close(take(tenant, t0 + 1_000_000, 1).await, (1, 10.0));
    // 2.5 s later, two whole units fit.
    close(take(tenant, t0 + 3_500_000, 5).await, (2, 9.5));
    // A process whose clock is behind the last take drains nothing.
    close(take(tenant, t0, 1).await, (0, 9.5));
    // Another tenant, and another quota of the same tenant, have buckets of their own.
    close(take(other, t0 + 3_500_000, 3).await, (3, 3.0));
    let turns = store
        .take_from_bucket(&tenant, "turns_per_minute", t0 + 3_500_000, 1, drain, 10)
        .await
        .unwrap();
    close(turns, (1, 1.0));
    // A bucket left alone drains empty.
    close(take(tenant, t0 + 60_000_000, 10).await, (10, 10.0));
    // Lowered to a burst of 2, the full bucket counts as full, not as five buckets: one unit
    // fits as soon as one drained.
    let lowered = |at: i64| async move {
        store
            .take_from_bucket(&tenant, "requests_per_minute", at, 1, drain, 2)
            .await
            .unwrap()
    };
    close(lowered(t0 + 60_000_000).await, (0, 2.0));
    close(lowered(t0 + 61_000_000).await, (1, 2.0));
}
