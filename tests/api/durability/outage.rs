//! PostgreSQL stopped under a running process: `/readyz` says 503 within a second, a new
//! turn is refused with 503 `database_unavailable` and `Retry-After` within
//! `database.timeout_ms`, `/healthz` stays 200, and both recover when it is back.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::user;
use crate::own_postgres::OwnPostgres;
use crate::process::Deployment;

/// `database.timeout_ms` of the test's process.
const TIMEOUT: Duration = Duration::from_millis(2000);

#[tokio::test]
async fn a_database_outage_is_answered_at_once_and_the_process_recovers_by_itself() {
    if std::env::var("TEST_POSTGRES_URL").is_err() {
        eprintln!("a database outage is a PostgreSQL fault: set TEST_POSTGRES_URL");
        return;
    }
    let Some(mut cluster) = OwnPostgres::start() else {
        return;
    };
    let deployment = Deployment::on(cluster.test_db().await, "");
    let (_, token) = deployment.tenant_token("acme");
    let server = deployment.start(&[(
        "AGENTRY__DATABASE__TIMEOUT_MS",
        &TIMEOUT.as_millis().to_string(),
    )]);
    let client = reqwest::Client::new();
    let session = server.create_session(&token, "echo").await;
    let turn = |text: &str| {
        client
            .post(server.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(&token)
            .json(&json!({"messages": [user(text)]}))
            .send()
    };
    assert_eq!(turn("before").await.unwrap().status(), StatusCode::OK);
    let ready = client.get(server.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);

    for _ in 0..super::rounds(2) {
        cluster.down();

        let asked = Instant::now();
        let ready = client.get(server.url("/readyz")).send().await.unwrap();
        let waited = asked.elapsed();
        assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            waited < Duration::from_millis(1500),
            "/readyz took {waited:?}"
        );
        let body: Value = ready.json().await.unwrap();
        assert_eq!(body["error"]["code"], "database_unavailable", "{body}");

        let health = client.get(server.url("/healthz")).send().await.unwrap();
        assert_eq!(health.status(), StatusCode::OK, "the process is alive");

        let asked = Instant::now();
        let refused = turn("during").await.unwrap();
        let waited = asked.elapsed();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refused.headers().contains_key("retry-after"),
            "{:?}",
            refused.headers()
        );
        assert!(
            waited < TIMEOUT + Duration::from_secs(1),
            "the turn was refused after {waited:?}"
        );
        let body: Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "database_unavailable", "{body}");

        cluster.up();
        // Both recover by themselves: no restart.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = client.get(server.url("/readyz")).send().await.unwrap();
            if ready.status() == StatusCode::OK {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "/readyz stayed {}",
                ready.status()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let after = turn("after").await.unwrap();
        assert_eq!(after.status(), StatusCode::OK);
        let body: Value = after.json().await.unwrap();
        assert_eq!(body["stopReason"], "end_turn", "{body}");
    }
}
