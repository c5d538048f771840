//! What a turn costs the database in steady state: its admission writes the turn and its
//! input and reads nothing; its model steps read nothing; the rest is the event writer's
//! batches. Counted from the statements sqlx logs, by the span they run in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestDb, captured_logs, spawn_app_on, user};

/// The records logged since `from` (an offset in the captured logs) in a span whose
/// `field` is `value`.
fn records(from: usize, field: &str, value: &str) -> Vec<Value> {
    records_where(from, |span| span[field] == value)
}

/// The records logged since `from` in a span `span` satisfies.
fn records_where(from: usize, span: impl Fn(&Value) -> bool) -> Vec<Value> {
    captured_logs()[from..]
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| span(&record["span"]))
        .collect()
}

/// The statements among them; transaction control (PostgreSQL logs it, some of it as an
/// empty statement) is not a statement of its own here.
fn statements(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|record| record["target"] == "sqlx::query")
        .filter_map(|record| record["fields"]["db.statement"].as_str())
        .map(|statement| statement.trim().to_owned())
        .filter(|statement| {
            !statement.is_empty()
                && !["BEGIN", "COMMIT", "ROLLBACK"]
                    .iter()
                    .any(|c| statement.eq_ignore_ascii_case(c))
        })
        .collect()
}

#[tokio::test]
async fn a_turn_in_steady_state_reads_nothing_and_each_write_is_one_statement() {
    let db = Arc::new(TestDb::new().await);
    let db_is_postgres = !db.url().starts_with("sqlite:");
    // Token states are cached for a minute: this test counts the turn's statements alone.
    let app = spawn_app_on(db, "[auth]\nstate_cache_ttl_ms = 60000\n").await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let path = format!("/sessions/{session}/turns");
    let turn = |text: &str| json!({"stream": "none", "messages": [user(text)]});
    for text in ["one", "two"] {
        let reply = app.post(&path, &token, turn(text)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }

    let from = captured_logs().len();
    let reply = app.post(&path, &token, turn("three")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["messages"][0]["content"][0]["text"], "three");
    let turn_id = reply.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();

    // The turn's task logs in a span of its own, which names the tenant too. Its last line
    // ("turn ended") may follow the response: everything the turn did is logged by then.
    let deadline = Instant::now() + Duration::from_secs(10);
    let of_turn = loop {
        let of_turn = records(from, "turn_id", &turn_id);
        let ended = of_turn
            .iter()
            .any(|r| r["span"]["name"] == "turn" && r["fields"]["message"] == "turn ended");
        if ended {
            break of_turn;
        }
        assert!(
            Instant::now() < deadline,
            "the turn's task logs in its span"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // It reads and writes nothing itself: on PostgreSQL, where other processes may run
    // turns of the same tenant, its tenant's slot over every process was claimed by its
    // admission already.
    let of_turn_statements = statements(&of_turn);
    assert!(of_turn_statements.is_empty(), "{of_turn_statements:#?}");
    // Its request: the turn and its input, as one statement: on SQLite of rows into
    // `writes` (the check of the remembered session, the turn, its input); on PostgreSQL a
    // call of `agentry_admit` (the same, with the claim of the tenant's slot over every
    // process between the turn and its input).
    let of_tenant: Vec<String> = statements(&records(from, "tenant_id", &tenant));
    let expected: Vec<&[&str]> = if db_is_postgres {
        vec![&["SELECT started, last_seq FROM agentry_admit("]]
    } else {
        vec![&["INSERT INTO writes"]]
    };
    assert_eq!(of_tenant.len(), expected.len(), "{of_tenant:#?}");
    for (statement, parts) in of_tenant.iter().zip(&expected) {
        assert!(statement.starts_with(parts[0]), "{of_tenant:#?}");
        assert!(
            parts.iter().all(|part| statement.contains(part)),
            "{of_tenant:#?}"
        );
    }

    // The event writer stored it in batches of one statement each, which write whatever
    // else their batch holds with it: on SQLite of rows into `writes`, on PostgreSQL a
    // call of `agentry_append` (the fence, the events, the history, the turn's start and
    // end with their webhook messages, the notification of the other processes). It read
    // nothing: not even the session's last seq, which on PostgreSQL (where another process
    // may have run the session's previous turn) its admission read for it.
    let batches = statements(&records_where(from, |span| {
        span["name"] == "batch"
            && span["turns"]
                .as_str()
                .is_some_and(|turns| turns.split(' ').any(|turn| turn == turn_id))
    }));
    let batch = if db_is_postgres {
        "SELECT fenced, queued FROM agentry_append("
    } else {
        "INSERT INTO writes"
    };
    assert!(!batches.is_empty(), "the batches are logged in their span");
    assert!(
        batches.iter().all(|statement| statement.starts_with(batch)),
        "{batches:#?}"
    );

    // The history the model was fed is the session's whole history all the same.
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let texts: Vec<&str> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"]
                .as_str()
                .or_else(|| m["content"][0]["text"].as_str())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(texts, ["one", "one", "two", "two", "three", "three"]);
}

/// An echo session created with 300 messages of history.
async fn long_session(app: &crate::helpers::TestApp, token: &str) -> String {
    let seed: Vec<Value> = (0..300)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("message {i} of a long conversation")})
        })
        .collect();
    app.create_session(token, json!({"agent": {"name": "echo"}, "messages": seed}))
        .await
}

/// Turns of the echo (which reads only the end of the history) on a session seeded with a
/// long history, on `app`: each turn's reported input tokens.
async fn long_session_turns(app: &crate::helpers::TestApp, texts: &[&str]) -> Vec<u64> {
    let (_, token) = app.new_tenant().await;
    let session = long_session(app, &token).await;
    let mut reported = Vec::new();
    for text in texts {
        let reply = app
            .post(
                &format!("/sessions/{session}/turns"),
                &token,
                json!({"stream": "none", "messages": [user(text)]}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        assert_eq!(reply.body["messages"][0]["content"][0]["text"], *text);
        let turn = reply.headers["agentry-turn-id"].to_str().unwrap();
        let turn = app
            .get(&format!("/sessions/{session}/turns/{turn}"), &token)
            .await;
        reported.push(turn.body["usage"]["input_tokens"].as_u64().unwrap());
    }
    reported
}

#[tokio::test]
async fn a_long_sessions_turn_reports_its_whole_history_remembered_or_read_again() {
    // Remembered between turns (a budget its whole history would not fit in: only the end
    // is kept), and read again every turn (no budget at all): the same figures.
    let kept = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[engine]\nhistory_cache_kib = 16\n",
    )
    .await;
    let read = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[engine]\nhistory_cache_kib = 0\n",
    )
    .await;
    let texts = ["one", "two", "three"];
    let remembered = long_session_turns(&kept, &texts).await;
    assert_eq!(remembered, long_session_turns(&read, &texts).await);
    // Each turn's request holds the previous turn's two messages and its own longer input.
    assert!(remembered.windows(2).all(|w| w[1] > w[0]), "{remembered:?}");
}

#[tokio::test]
async fn a_long_sessions_turn_in_steady_state_reads_nothing() {
    let db = Arc::new(TestDb::new().await);
    // 300 messages of history are over a quarter of this budget: the session stays in it
    // only because the echo needs no more than its end.
    let app = spawn_app_on(
        db,
        "[auth]\nstate_cache_ttl_ms = 60000\n[engine]\nhistory_cache_kib = 16\n",
    )
    .await;
    let (tenant, token) = app.new_tenant().await;
    let session = long_session(&app, &token).await;
    let path = format!("/sessions/{session}/turns");
    let turn = |text: &str| json!({"stream": "none", "messages": [user(text)]});
    for text in ["one", "two"] {
        let reply = app.post(&path, &token, turn(text)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    }
    let from = captured_logs().len();
    let reply = app.post(&path, &token, turn("three")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let turn_id = reply.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !records(from, "turn_id", &turn_id)
        .iter()
        .any(|r| r["span"]["name"] == "turn" && r["fields"]["message"] == "turn ended")
    {
        assert!(Instant::now() < deadline, "the turn ends");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Neither the admission nor the turn reads the history.
    let read_history: Vec<String> = statements(&records(from, "tenant_id", &tenant))
        .into_iter()
        .filter(|s| s.starts_with("SELECT") && s.contains("history"))
        .collect();
    assert!(read_history.is_empty(), "{read_history:#?}");
    let history = app
        .get(
            &format!("/sessions/{session}/history?type=full&limit=1000"),
            &token,
        )
        .await;
    assert_eq!(
        history.body["history"]["full"].as_array().unwrap().len(),
        306
    );
}
