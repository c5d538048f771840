//! Upgrading a database an earlier release wrote: its data survives each migration.

use crate::helpers::{TestDb, test_settings};
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
