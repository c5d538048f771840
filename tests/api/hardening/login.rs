//! `POST /auth/token`: a few verifications at a time, failures counted per client id and
//! per address, and an unknown client id as costly as a wrong secret.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::app_with;
use crate::helpers::{Reply, TestApp};

/// A well-formed client id no credential has.
fn unknown_client_id() -> String {
    format!("cred_{}", uuid::Uuid::new_v4().simple())
}

async fn login(app: &TestApp, client_id: &str, secret: &str, forwarded_for: Option<&str>) -> Reply {
    let mut request = app
        .client
        .post(app.url("/auth/token"))
        .json(&json!({"client_id": client_id, "client_secret": secret}));
    if let Some(address) = forwarded_for {
        request = request.header("X-Forwarded-For", address);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
        text,
    }
}

/// A credential of a fresh tenant: (client_id, client_secret).
async fn credential(app: &TestApp) -> (String, String) {
    let (tenant, _) = app.new_tenant().await;
    let reply = app
        .post(
            &format!("/admin/tenants/{tenant}/credentials"),
            &app.admin_token,
            json!({}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    (
        reply.body["client_id"].as_str().unwrap().to_owned(),
        reply.body["client_secret"].as_str().unwrap().to_owned(),
    )
}

fn assert_throttled(reply: &Reply) {
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.text
    );
    assert_eq!(reply.code(), "too_many_requests", "{}", reply.text);
    assert!(reply.body["error"]["message"].is_string(), "{}", reply.text);
    let retry_after: u64 = reply.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1, "{retry_after}");
}

const GENEROUS_FAILURE_LIMITS: &str = "login_max_failures_per_client = 1000\n\
     login_max_failures_per_address = 1000\n";

#[tokio::test]
async fn a_login_flood_runs_a_bounded_number_of_verifications_and_the_rest_get_429() {
    let app = app_with(&format!(
        "[auth]\nlogin_max_concurrent_checks = 1\nlogin_queue_timeout_ms = 100\n\
         {GENEROUS_FAILURE_LIMITS}"
    ))
    .await;
    let attempts = (0..32).map(|_| {
        let app = &app;
        async move { login(app, &unknown_client_id(), "wrong", None).await }
    });
    let flood = futures_util::future::join_all(attempts);
    let health = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let started = Instant::now();
        let reply = app
            .client
            .get(app.url("/healthz"))
            .send()
            .await
            .expect("healthz answers during the flood");
        (reply.status(), started.elapsed())
    };
    let (replies, (health_status, health_latency)) = tokio::join!(flood, health);
    assert_eq!(health_status, StatusCode::OK);
    assert!(
        health_latency < Duration::from_secs(1),
        "{health_latency:?}"
    );
    let refused = replies
        .iter()
        .filter(|r| r.status == StatusCode::UNAUTHORIZED)
        .count();
    let throttled: Vec<&Reply> = replies
        .iter()
        .filter(|r| r.status == StatusCode::TOO_MANY_REQUESTS)
        .collect();
    assert_eq!(refused + throttled.len(), replies.len(), "{replies:?}");
    assert!(refused >= 1, "some attempts are checked");
    assert!(!throttled.is_empty(), "32 attempts at once exceed one slot");
    throttled.iter().for_each(|r| assert_throttled(r));
    // Once the flood is over, logins work again.
    let admin = login(&app, "admin", crate::helpers::ADMIN_SECRET, None).await;
    assert_eq!(admin.status, StatusCode::OK, "{}", admin.text);
}

#[tokio::test]
async fn a_client_id_that_failed_too_often_is_refused_while_others_still_get_401() {
    let app = app_with("[auth]\nlogin_max_failures_per_client = 3\n").await;
    let (client, secret) = credential(&app).await;
    let (other, other_secret) = credential(&app).await;
    for _ in 0..3 {
        let reply = login(&app, &client, "wrong", None).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    }
    assert_throttled(&login(&app, &client, "wrong", None).await);
    // Even the right secret waits for the window to end.
    assert_throttled(&login(&app, &client, &secret, None).await);
    let reply = login(&app, &other, "wrong", None).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    assert_eq!(reply.code(), "invalid_credentials");
    let reply = login(&app, &other, &other_secret, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    // An unknown client id is counted like a known one: its lock-out says nothing.
    let unknown = unknown_client_id();
    for _ in 0..3 {
        login(&app, &unknown, "wrong", None).await;
    }
    assert_throttled(&login(&app, &unknown, "wrong", None).await);
}

#[tokio::test]
async fn an_address_that_failed_too_often_is_refused_and_forwarded_for_counts_only_from_a_proxy() {
    // 127.0.0.1 is not a trusted proxy: X-Forwarded-For is ignored, the peer is counted.
    let app = app_with(
        "[auth]\nlogin_max_failures_per_address = 3\n\
         [server]\ntrusted_proxies = [\"10.1.2.3\"]\n",
    )
    .await;
    for i in 0..3 {
        let forged = format!("198.51.100.{i}");
        let reply = login(&app, &unknown_client_id(), "wrong", Some(&forged)).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    }
    assert_throttled(&login(&app, &unknown_client_id(), "wrong", Some("198.51.100.9")).await);
    // Malformed client ids are refused without a verification, and counted too.
    let app = app_with("[auth]\nlogin_max_failures_per_address = 3\n").await;
    for _ in 0..3 {
        let reply = login(&app, "not-a-client", "wrong", None).await;
        assert_eq!(reply.code(), "invalid_credentials", "{}", reply.text);
    }
    assert_throttled(&login(&app, &unknown_client_id(), "wrong", None).await);

    // Behind a trusted proxy, the client is the address the proxy forwards.
    let app = app_with(
        "[auth]\nlogin_max_failures_per_address = 3\n\
         [server]\ntrusted_proxies = [\"127.0.0.1\"]\n",
    )
    .await;
    for _ in 0..3 {
        // The far end of the chain is whatever the client wrote; the proxy appended the rest.
        let chain = format!("192.0.2.{}, 203.0.113.7", rand_octet());
        let reply = login(&app, &unknown_client_id(), "wrong", Some(&chain)).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    }
    assert_throttled(&login(&app, &unknown_client_id(), "wrong", Some("203.0.113.7")).await);
    let reply = login(&app, &unknown_client_id(), "wrong", Some("203.0.113.8")).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
}

fn rand_octet() -> u8 {
    uuid::Uuid::new_v4().as_bytes()[0]
}

/// The median duration of `n` logins.
async fn median_login(app: &TestApp, client_id: &str, n: usize) -> Duration {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let reply = login(app, client_id, "wrong-secret", None).await;
        times.push(started.elapsed());
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.text);
    }
    times.sort();
    times[n / 2]
}

#[tokio::test]
async fn an_unknown_client_id_costs_what_a_wrong_secret_costs() {
    let app = app_with(&format!("[auth]\n{GENEROUS_FAILURE_LIMITS}")).await;
    let (known, _) = credential(&app).await;
    let unknown = unknown_client_id();
    // Warm both paths, then alternate so that load on the machine hits both alike.
    median_login(&app, &known, 1).await;
    median_login(&app, &unknown, 1).await;
    let mut known_times = Vec::new();
    let mut unknown_times = Vec::new();
    for _ in 0..5 {
        known_times.push(median_login(&app, &known, 3).await);
        unknown_times.push(median_login(&app, &unknown, 3).await);
    }
    known_times.sort();
    unknown_times.sort();
    let (known, unknown) = (known_times[2], unknown_times[2]);
    let ratio = unknown.as_secs_f64() / known.as_secs_f64();
    assert!(
        (0.5..=2.0).contains(&ratio),
        "unknown id {unknown:?} vs wrong secret {known:?}"
    );
}

#[tokio::test]
async fn concurrent_attempts_cannot_overtake_the_failure_limit() {
    // The three attempts let through are all verified, however slow the machine: the
    // queue for a verification slot must not refuse one of them.
    let app = app_with(
        "[auth]\nlogin_max_failures_per_client = 3\nlogin_max_failures_per_address = 1000\n\
         login_queue_timeout_ms = 600000\n",
    )
    .await;
    let (client, _) = credential(&app).await;
    let replies =
        futures_util::future::join_all((0..12).map(|_| login(&app, &client, "wrong", None))).await;
    let checked = replies
        .iter()
        .filter(|r| r.status == StatusCode::UNAUTHORIZED)
        .count();
    assert_eq!(checked, 3, "{replies:?}");
    replies
        .iter()
        .filter(|r| r.status != StatusCode::UNAUTHORIZED)
        .for_each(assert_throttled);
}
