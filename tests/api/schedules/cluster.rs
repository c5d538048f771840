//! Three processes on one PostgreSQL database: each occurrence of a frequent schedule
//! starts exactly one turn, none is lost.

use std::time::Duration;

use serde_json::{Value, json};

use super::{FAST, time};
use crate::process::Deployment;

#[tokio::test]
async fn three_processes_start_each_occurrence_exactly_once() {
    let deployment = Deployment::new(FAST).await;
    if deployment.db.url().starts_with("sqlite:") {
        // One process serves a SQLite file.
        return;
    }
    let (_, token) = deployment.tenant_token("acme");
    let servers: Vec<_> = (0..3).map(|_| deployment.start(&[])).collect();
    let client = reqwest::Client::new();
    let created: Value = client
        .post(servers[0].url("/schedules"))
        .bearer_auth(&token)
        .json(&json!({"agent": {"name": "echo"}, "cron": "* * * * * *", "input": "tick"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("created").to_owned();
    // A minute of occurrences, every process looking for them: the wait is the subject.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let paused = client
        .patch(servers[1].url(&format!("/schedules/{id}")))
        .bearer_auth(&token)
        .json(&json!({"enabled": false}))
        .send()
        .await
        .unwrap();
    assert!(paused.status().is_success());
    deployment.db.wait_for_no_unfinished_turns().await;

    let runs: Value = servers[2]
        .get_json(&token, &format!("/schedules/{id}/runs?limit=200"))
        .await;
    let mut runs = runs["runs"].as_array().unwrap().clone();
    runs.reverse();
    assert!(runs.len() >= 55, "{runs:#?}");
    for pair in runs.windows(2) {
        let gap = time(&pair[1]["planned_at"]) - time(&pair[0]["planned_at"]);
        assert_eq!(
            gap.num_seconds(),
            1,
            "an occurrence is missing or doubled: {runs:#?}"
        );
    }
    for run in &runs {
        assert!(run["turn_id"].is_string(), "{run}");
    }
    let occurrences = runs.len().to_string();
    let db = &deployment.db;
    assert_eq!(
        db.scalar("SELECT COUNT(*) FROM turns WHERE idempotency_key LIKE 'schedule:%'")
            .await,
        occurrences
    );
    assert_eq!(
        db.scalar("SELECT COUNT(DISTINCT turn_id) FROM schedule_runs")
            .await,
        occurrences
    );
    // Each process took a share: the claims were contended, not left to one.
    let claimers = db
        .scalar("SELECT COUNT(DISTINCT claimed_by) FROM schedule_runs")
        .await;
    assert!(
        claimers.parse::<u32>().unwrap() >= 2,
        "{claimers} process claimed"
    );
    for server in servers {
        server.kill();
    }
}
