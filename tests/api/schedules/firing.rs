//! A frequent schedule fires each occurrence once, on time, each with its turn.

use std::time::Duration;

use serde_json::json;

use super::{create, every, fast_app, finished, runs, time, wait_for_runs};

#[tokio::test]
async fn a_frequent_schedule_fires_each_occurrence_once_with_its_turn() {
    let app = fast_app().await;
    let (_, token) = app.new_tenant().await;
    let schedule = create(&app, &token, every(2, json!({}))).await;
    let id = schedule["id"].as_str().unwrap();
    assert!(schedule["next_at"].is_string(), "{schedule}");

    let runs_seen = wait_for_runs(&app, &token, id, Duration::from_secs(20), |runs| {
        finished(runs) >= 3
    })
    .await;
    // Paused: nothing more starts, and what ran stays as it was.
    let paused = app
        .patch(
            &format!("/schedules/{id}"),
            &token,
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    assert_eq!(paused.body["next_at"], serde_json::Value::Null);
    let all = runs(&app, &token, id).await;
    assert!(all.len() >= runs_seen.len());

    let started: Vec<_> = all.iter().filter(|r| r["turn_id"].is_string()).collect();
    assert!(started.len() >= 3, "{all:#?}");
    let mut planned: Vec<_> = all.iter().map(|r| time(&r["planned_at"])).collect();
    planned.dedup();
    assert_eq!(planned.len(), all.len(), "an occurrence was recorded twice");
    for pair in planned.windows(2) {
        assert_eq!((pair[1] - pair[0]).num_seconds(), 2, "{all:#?}");
    }
    let mut turns: Vec<_> = started
        .iter()
        .map(|r| r["turn_id"].as_str().unwrap())
        .collect();
    turns.sort();
    turns.dedup();
    assert_eq!(turns.len(), started.len(), "two occurrences share a turn");
    for run in &started {
        assert_eq!(run["kind"], "scheduled");
        let lag = time(&run["started_at"]) - time(&run["planned_at"]);
        assert!(
            lag >= chrono::Duration::zero() && lag < chrono::Duration::seconds(1),
            "fired {lag} late: {run}"
        );
        // Each occurrence's turn ran in a session of its own, and answered the input.
        let session = run["session_id"].as_str().unwrap();
        let history = app
            .get(&format!("/sessions/{session}/history?type=full"), &token)
            .await;
        assert_eq!(history.status, 200, "{}", history.text);
        assert!(history.text.contains("tick"), "{}", history.text);
        if run["status"] == "finished" {
            assert_eq!(run["turn_status"], "completed", "{run}");
        }
    }
    // Exactly one turn per started occurrence, in the database too.
    let db = &app.db;
    let turns_in_db = db
        .scalar("SELECT COUNT(*) FROM turns WHERE idempotency_key LIKE 'schedule:%'")
        .await;
    assert_eq!(turns_in_db, started.len().to_string());
}
