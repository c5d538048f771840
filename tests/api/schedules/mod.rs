//! Schedules: occurrences fired on time and once each (also over several processes and a
//! restart), their policies, bad input, and isolation between tenants.

mod cluster;
mod firing;
mod input;
mod policies;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp, TestDb, spawn_app_on};

/// Schedules may fire every second, and an occurrence more than a second and a half late
/// counts as missed.
pub const FAST: &str = "[schedules]\nmin_interval_seconds = 1\nmisfire_tolerance_ms = 1500\n\
     poll_interval_ms = 200\n";

pub async fn fast_app() -> TestApp {
    spawn_app_on(std::sync::Arc::new(TestDb::new().await), FAST).await
}

pub async fn create(app: &TestApp, token: &str, body: Value) -> Value {
    let reply = app.post("/schedules", token, body).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body
}

/// A schedule of the echo agent every `seconds` seconds, with `extra` fields.
pub fn every(seconds: u32, extra: Value) -> Value {
    let mut body = json!({
        "agent": {"name": "echo"},
        "cron": format!("*/{seconds} * * * * *"),
        "time_zone": "Europe/Paris",
        "input": "tick",
    });
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    body
}

/// The schedule's occurrences, oldest first.
pub async fn runs(app: &TestApp, token: &str, schedule: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut after = String::new();
    loop {
        let reply: Reply = app
            .get(
                &format!("/schedules/{schedule}/runs?limit=200&after={after}"),
                token,
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        all.extend(reply.body["runs"].as_array().unwrap().iter().cloned());
        match reply.body["next"].as_str() {
            Some(next) => after = next.to_owned(),
            None => break,
        }
    }
    all.reverse();
    all
}

/// Waits (up to `limit`) until the schedule's run history satisfies `done`, and returns it.
pub async fn wait_for_runs(
    app: &TestApp,
    token: &str,
    schedule: &str,
    limit: Duration,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let runs = runs(app, token, schedule).await;
        if done(&runs) {
            return runs;
        }
        assert!(
            Instant::now() < deadline,
            "the run history did not get there: {runs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn finished(runs: &[Value]) -> usize {
    runs.iter().filter(|r| r["status"] == "finished").count()
}

pub fn time(value: &Value) -> chrono::DateTime<chrono::Utc> {
    value.as_str().unwrap().parse().unwrap()
}
