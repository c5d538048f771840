//! Upgrading a database an earlier release wrote: its data survives each migration,
//! including a fixture the previous release wrote through its own API.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::helpers::{TestDb, spawn_app_on, test_settings};
use agentry::model::{RunId, RunStatus, TenantId, TurnId};
use agentry::store::Store;

/// An ACP run as the previous schema kept it: its turns, the last one stopped as given.
fn acp_run(tenant: &str, turns: &[(&TurnId, &str, Option<&str>)], cancelled: bool) -> Vec<String> {
    let session = format!("sess_{}", uuid::Uuid::now_v7().simple());
    let at = "2026-11-01T10:00:00+00:00";
    let mut sql = vec![format!(
        "INSERT INTO sessions (id, tenant_id, agent, server_tools, options, sealed_options, \
         client_tools, created_at, updated_at) \
         VALUES ('{session}', '{tenant}', 'echo', '[]', '{{}}', '{{}}', '[]', '{at}', '{at}')"
    )];
    for (turn, status, stop) in turns {
        let stop = stop.map_or("NULL".to_owned(), |s| format!("'{s}'"));
        sql.push(format!(
            "INSERT INTO turns (id, tenant_id, session_id, status, stream, stop_reason, usage, \
             created_at) VALUES ('{turn}', '{tenant}', '{session}', '{status}', 'delta', {stop}, \
             '{{}}', '{at}')"
        ));
    }
    let run = turns[0].0;
    let cancelled_at = if cancelled {
        format!("'{at}'")
    } else {
        "NULL".into()
    };
    sql.push(format!(
        "INSERT INTO acp_runs (id, tenant_id, session_id, cancelled_at, created_at) \
         VALUES ('{run}', '{tenant}', '{session}', {cancelled_at}, '{at}')"
    ));
    for (position, (turn, _, _)) in turns.iter().enumerate() {
        sql.push(format!(
            "INSERT INTO acp_run_turns (tenant_id, run_id, position, turn_id) \
             VALUES ('{tenant}', '{run}', {position}, '{turn}')"
        ));
    }
    sql
}

#[tokio::test]
async fn acp_runs_of_the_previous_schema_become_engine_runs_with_their_turns_and_status() {
    let db = TestDb::new().await;
    let store = Store::connect(&test_settings(&db, "").database)
        .await
        .unwrap();
    store.migrate_up_to(6).await.unwrap();
    let tenant = TenantId::generate();
    let at = "2026-11-01T10:00:00+00:00";
    let mut sql = vec![format!(
        "INSERT INTO tenants (id, name, status, created_at, updated_at) \
         VALUES ('{tenant}', 'old', 'active', '{at}', '{at}')"
    )];
    let turns: Vec<TurnId> = (0..5).map(|_| TurnId::generate()).collect();
    // completed after a resume; awaiting; cancelled while it awaited; interrupted.
    let completed = [
        (&turns[0], "completed", Some("tool_use")),
        (&turns[1], "completed", Some("end_turn")),
    ];
    let awaiting = [(&turns[2], "completed", Some("tool_use"))];
    let cancelled = [(&turns[3], "completed", Some("tool_use"))];
    let interrupted = [(&turns[4], "interrupted", Some("error"))];
    sql.extend(acp_run(&tenant.to_string(), &completed, false));
    sql.extend(acp_run(&tenant.to_string(), &awaiting, false));
    sql.extend(acp_run(&tenant.to_string(), &cancelled, true));
    sql.extend(acp_run(&tenant.to_string(), &interrupted, false));
    db.execute(&sql).await;

    let applied = store.migrate().await.unwrap();
    assert!(applied.contains(&7), "{applied:?}");
    let run_of = |turn: &TurnId| RunId::from_uuid(turn.to_uuid());
    let expect = [
        (&turns[0], RunStatus::Completed, vec![turns[0], turns[1]]),
        (&turns[2], RunStatus::Awaiting, vec![turns[2]]),
        (&turns[3], RunStatus::Cancelled, vec![turns[3]]),
        (&turns[4], RunStatus::Interrupted, vec![turns[4]]),
    ];
    for (first, status, run_turns) in expect {
        let run = store.get_run(&tenant, &run_of(first)).await.unwrap();
        assert_eq!(run.status, status, "{run:?}");
        assert_eq!(run.turns, run_turns);
        assert_eq!(run.cancelled_at.is_some(), status == RunStatus::Cancelled);
        assert_eq!(run.cancel_turn, None);
        for turn in &run.turns {
            let turn = store.find_turn(&tenant, turn).await.unwrap().unwrap();
            assert_eq!(turn.run_id.as_ref(), Some(&run.id));
        }
    }
}

/// Rows the previous release wrote (scripts/upgrade_fixture.py): SQL for each backend.
fn previous_release_rows(db: &TestDb) -> Vec<String> {
    let sql = if db.url().starts_with("sqlite:") {
        include_str!("../fixtures/upgrade/v7_sqlite.sql")
    } else {
        include_str!("../fixtures/upgrade/v7_postgres.sql")
    };
    sql.lines().map(str::to_owned).collect()
}

/// Parses JSON texts.
fn parsed(texts: Vec<String>) -> Vec<Value> {
    texts
        .iter()
        .map(|t| serde_json::from_str(t).unwrap())
        .collect()
}

#[tokio::test]
async fn a_database_the_previous_release_wrote_keeps_every_session_turn_event_and_message() {
    let db = Arc::new(TestDb::new().await);
    let store = Store::connect(&test_settings(&db, "").database)
        .await
        .unwrap();
    store.migrate_up_to(7).await.unwrap();
    db.execute(&previous_release_rows(&db)).await;
    // What the previous schema holds: ids and timestamps as text.
    let sessions = db.column("SELECT id FROM sessions ORDER BY id").await;
    let turns = db
        .column(
            "SELECT id || ' ' || session_id || ' ' || status || ' ' || COALESCE(stop_reason, '-') \
             FROM turns ORDER BY id",
        )
        .await;
    let events = db
        .column(
            "SELECT session_id || ' ' || seq || ' ' || kind FROM events ORDER BY session_id, seq",
        )
        .await;
    let event_data = parsed(
        db.column("SELECT CAST(data AS TEXT) FROM events ORDER BY session_id, seq")
            .await,
    );
    let history = db
        .column("SELECT session_id || ' ' || position FROM history ORDER BY session_id, position")
        .await;
    let messages = parsed(
        db.column("SELECT CAST(message AS TEXT) FROM history ORDER BY session_id, position")
            .await,
    );
    let runs = db
        .column("SELECT id || ' ' || status FROM runs ORDER BY id")
        .await;
    let tenant = db
        .column("SELECT id FROM tenants WHERE name = 'upgraded'")
        .await
        .remove(0);
    assert!(sessions.len() >= 5 && events.len() > 50 && history.len() > 10);
    store.close().await;

    let app = spawn_app_on(db.clone(), "").await;
    let token = app.token_for(&tenant).await;
    let listed = app.get("/sessions?limit=200", &token).await;
    let mut listed: Vec<String> = listed.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, sessions);

    let mut turns_after = Vec::new();
    let mut events_after = Vec::new();
    let mut data_after = Vec::new();
    let mut history_after = Vec::new();
    let mut messages_after = Vec::new();
    for session in &sessions {
        let page = app
            .get(&format!("/sessions/{session}/turns?limit=200"), &token)
            .await;
        for turn in page.body["turns"].as_array().unwrap() {
            turns_after.push(format!(
                "{} {session} {} {}",
                turn["turnId"].as_str().unwrap(),
                turn["status"].as_str().unwrap(),
                turn["stopReason"].as_str().unwrap_or("-"),
            ));
        }
        let full = app
            .get(
                &format!("/sessions/{session}/history?type=full&limit=1000"),
                &token,
            )
            .await;
        let stored = app
            .state
            .store()
            .list_history(
                &tenant.parse().unwrap(),
                &session.parse().unwrap(),
                agentry::model::HistoryType::Full,
            )
            .await
            .unwrap();
        let served = full.body["history"]["full"].as_array().unwrap();
        assert_eq!(served.len(), stored.len());
        for (position, message) in stored.iter().enumerate() {
            history_after.push(format!("{session} {position}"));
            messages_after.push(serde_json::to_value(message).unwrap());
        }
        let logged = app
            .state
            .store()
            .list_events(
                &tenant.parse().unwrap(),
                &session.parse().unwrap(),
                None,
                0,
                10_000,
                agentry::store::Deltas::AsStreamed,
            )
            .await
            .unwrap();
        for event in logged {
            events_after.push(format!("{session} {} {}", event.seq, event.data.kind()));
            data_after.push(serde_json::from_str::<Value>(&event.data.to_data()).unwrap());
        }
    }
    turns_after.sort();
    assert_eq!(turns_after, turns);
    assert_eq!(events_after, events);
    assert_eq!(data_after, event_data);
    assert_eq!(history_after, history);
    assert_eq!(messages_after, messages);
    let tenant_id: TenantId = tenant.parse().unwrap();
    for run in &runs {
        let (id, status) = run.split_once(' ').unwrap();
        let stored = app
            .state
            .store()
            .get_run(&tenant_id, &id.parse().unwrap())
            .await
            .unwrap();
        assert_eq!(stored.status.as_str(), status);
    }

    // The migrated sessions go on: a secret option still opens, seqs continue.
    let echo = app
        .state
        .store()
        .list_sessions(
            &tenant_id,
            agentry::store::Page {
                after: None,
                limit: 200,
            },
        )
        .await
        .unwrap()
        .0
        .into_iter()
        .find(|s| s.agent == "echo" && !s.sealed_options.is_empty())
        .expect("the session with a secret option");
    let shown = app.get(&format!("/sessions/{}", echo.id), &token).await;
    assert_eq!(shown.body["agent"]["options"]["api_key"], "***");
    let last_seq = events
        .iter()
        .filter(|e| e.starts_with(&echo.id.to_string()))
        .count();
    let reply = app
        .post(
            &format!("/sessions/{}/turns", echo.id),
            &token,
            json!({"stream": "none", "messages": [{"role": "user", "content": "after the upgrade"}]}),
        )
        .await;
    assert_eq!(reply.status, reqwest::StatusCode::OK, "{}", reply.text);
    let next = app
        .state
        .store()
        .list_events(
            &tenant_id,
            &echo.id,
            None,
            last_seq as i64,
            10,
            agentry::store::Deltas::Merged,
        )
        .await
        .unwrap();
    assert_eq!(next[0].seq, last_seq as i64 + 1);
    assert_eq!(next[0].data.kind(), "turn_start");
    let suspended = db
        .column("SELECT status FROM tenants WHERE name = 'suspended-one'")
        .await;
    assert_eq!(suspended, ["suspended"]);
}
