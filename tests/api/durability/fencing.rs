//! A process paused past its lease (SIGSTOP), or cut off from PostgreSQL for longer than
//! its lease, writes nothing for the turns another process ended meanwhile: each turn ends
//! with exactly one terminal event, the session's next turn completes on either process,
//! and the history holds exactly the messages of the turns that own them.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use super::{assert_one_terminal_event_last, hex, history_roles, rounds, signal, turn_id};
use crate::helpers::TestDb;
use crate::own_postgres::OwnPostgres;
use crate::process::{Deployment, SLOW_AGENT, ServerProcess};
use crate::sse::SseReader;

/// Sessions with a running turn each in a round.
const TURNS_PER_ROUND: usize = 2;

/// Waits (up to 60 s) until `server` logged a line holding every needle.
async fn logged_all(server: &ServerProcess, needles: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if server
            .logs
            .lock()
            .unwrap()
            .iter()
            .any(|line| needles.iter().all(|n| line.contains(n)))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never logged {needles:?}: {:?}",
            server.logs.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (up to 30 s) until `server` is ready again.
async fn ready(server: &ServerProcess) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = reqwest::Client::new()
            .get(server.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status();
        if status == StatusCode::OK {
            return;
        }
        assert!(Instant::now() < deadline, "/readyz stayed {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A wait that must end within a minute (keep-alive comments keep an SSE read alive).
async fn within<T>(what: &str, wait: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within a minute"))
}

/// How many times `server` logged that it cannot prove its lease.
fn lease_losses(server: &ServerProcess) -> usize {
    server
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.contains("cannot prove its lease"))
        .count()
}

/// The text of a stored message's content (a string or text blocks).
fn message_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .concat(),
        _ => String::new(),
    }
}

/// A finished turn as the log replays it: its frames and the text it streamed.
async fn replayed(
    server: &ServerProcess,
    token: &str,
    session: &str,
    turn: &str,
) -> (Value, String) {
    let mut replay = server.follow_turn(token, session, turn, None).await;
    let frames = within("a replay", replay.until_turn_stop()).await;
    let text = frames
        .iter()
        .filter(|f| f.event == "text_delta")
        .filter_map(|f| f.data["delta"].as_str())
        .collect::<Vec<_>>()
        .concat();
    (frames.last().unwrap().data.clone(), text)
}

/// Runs a turn to its end through `server` and returns its stop.
async fn run_turn(
    server: &ServerProcess,
    token: &str,
    session: &str,
    text: &str,
) -> (String, Value) {
    let mut stream = server.stream_turn(token, session, text).await;
    let turn = turn_id(&stream);
    let frames = within("the next turn's end", stream.until_turn_stop()).await;
    (turn, frames.last().unwrap().data.clone())
}

/// After the fault: every interrupted turn ended once and last, with `interrupted`; the
/// next turn of each session completes (on `next[i % 2]`); each session's history holds
/// the interrupted turn's user message and the assistant message clients saw, then the
/// next turn's two.
async fn check_sessions(
    db: &TestDb,
    token: &str,
    next: [&ServerProcess; 2],
    turns: &[(String, String)],
) {
    for (i, (session, turn)) in turns.iter().enumerate() {
        assert_one_terminal_event_last(db, turn).await;
        let (stop, text) = replayed(next[0], token, session, turn).await;
        // Ended by the process that took it over or, once its lease is proven again, by its
        // owner: interrupted, or failed for its events could not be stored.
        let code = stop["error"]["code"].as_str().unwrap_or_default();
        assert!(
            code == "interrupted" || code == "database_unavailable",
            "{stop}"
        );
        assert!(!text.is_empty());

        let (next_turn, next_stop) = run_turn(next[i % 2], token, session, "next").await;
        assert_eq!(next_stop["stopReason"], "end_turn", "{next_stop}");
        assert_one_terminal_event_last(db, &next_turn).await;

        let roles = history_roles(db, session).await;
        let expected: Vec<(String, String)> = [
            ("user", turn),
            ("assistant", turn),
            ("user", &next_turn),
            ("assistant", &next_turn),
        ]
        .iter()
        .map(|(role, turn)| (role.to_string(), hex(turn)))
        .collect();
        assert_eq!(roles, expected, "session {session}");
        let stored: Value = serde_json::from_str(
            &db.scalar(&format!(
                "SELECT CAST(message AS TEXT) FROM history WHERE turn_id = {} ORDER BY position DESC LIMIT 1",
                db.id(turn)
            ))
            .await,
        )
        .unwrap();
        assert_eq!(
            message_text(&stored),
            text,
            "the interrupted turn's assistant message is what its events streamed"
        );
    }
}

/// Starts a long turn in each of `count` new sessions on `server`, followed through
/// `follower` until events flow; returns `(session, turn)` pairs and the followers.
async fn start_turns(
    server: &ServerProcess,
    follower: &ServerProcess,
    token: &str,
    count: usize,
) -> (Vec<(String, String)>, Vec<SseReader>, Vec<SseReader>) {
    let mut turns = Vec::new();
    let mut streams = Vec::new();
    let mut followers = Vec::new();
    for _ in 0..count {
        let session = server.create_session(token, "slow").await;
        // 400 characters at 50 ms each: still running when the fault comes.
        let stream = server.stream_turn(token, &session, &"k".repeat(400)).await;
        let turn = turn_id(&stream);
        let mut on_follower = follower.follow_turn(token, &session, &turn, None).await;
        for _ in 0..3 {
            on_follower.next().await.unwrap();
        }
        turns.push((session, turn));
        streams.push(stream);
        followers.push(on_follower);
    }
    (turns, streams, followers)
}

#[tokio::test]
async fn a_paused_owner_writes_nothing_for_turns_another_process_ended_meanwhile() {
    let db = TestDb::new().await;
    if db.url().starts_with("sqlite:") {
        eprintln!("several processes need PostgreSQL: set TEST_POSTGRES_URL");
        return;
    }
    let deployment = Deployment::on(db, SLOW_AGENT);
    let (_, token) = deployment.tenant_token("acme");
    // engine.lease_ms = 1000, lease_sweep_ms = 200 (see `process::agentry`).
    let a = deployment.start(&[]);
    let b = deployment.start(&[]);
    // A race: run it several times.
    for round in 0..rounds(5) {
        let (turns, _streams, mut followers) = start_turns(&a, &b, &token, TURNS_PER_ROUND).await;
        signal(&a, "STOP");
        let mut resumed = false;
        for follower in &mut followers {
            // B ends A's turns once A's lease expired. (Had A been paused inside a commit,
            // the turn's row stays locked until A goes on: resume it then.)
            let stop = match tokio::time::timeout(
                Duration::from_secs(8),
                follower.until_turn_stop(),
            )
            .await
            {
                Ok(frames) => frames,
                Err(_) => {
                    assert!(!resumed);
                    signal(&a, "CONT");
                    resumed = true;
                    within(
                        "the end of a paused owner's turn",
                        follower.until_turn_stop(),
                    )
                    .await
                }
            };
            let code = stop.last().unwrap().data["error"]["code"].clone();
            assert!(
                code == "interrupted" || code == "database_unavailable",
                "round {round}: {code}"
            );
        }
        if !resumed {
            signal(&a, "CONT");
        }
        // A wakes, finds its turns were taken, and its turns' tasks end.
        for (_, turn) in &turns {
            logged_all(&a, &["turn ended", turn]).await;
        }
        check_sessions(&deployment.db, &token, [&b, &a], &turns).await;
    }
    logged_all(&a, &["cannot prove its lease"]).await;
}

#[tokio::test]
async fn after_a_database_outage_longer_than_the_lease_every_turn_ends_once_and_sessions_go_on() {
    if std::env::var("TEST_POSTGRES_URL").is_err() {
        eprintln!("several processes need PostgreSQL: set TEST_POSTGRES_URL");
        return;
    }
    let Some(mut cluster) = OwnPostgres::start() else {
        return;
    };
    let deployment = Deployment::on(cluster.test_db().await, SLOW_AGENT);
    let (_, token) = deployment.tenant_token("acme");
    let a = deployment.start(&[]);
    let b = deployment.start(&[]);
    for round in 0..rounds(3) {
        let (mut turns, _on_a, _follow_a) = start_turns(&a, &b, &token, 1).await;
        let (on_b, _streams_b, _follow_b) = start_turns(&b, &a, &token, 1).await;
        turns.extend(on_b);
        let before = [lease_losses(&a), lease_losses(&b)];
        cluster.down();
        // Both processes stop their turns once they cannot prove their leases...
        for (server, before) in [(&a, before[0]), (&b, before[1])] {
            let deadline = Instant::now() + Duration::from_secs(30);
            while lease_losses(server) <= before {
                assert!(
                    Instant::now() < deadline,
                    "round {round}: the lease loss was not noticed"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        // ...and the outage lasts until both leases expired in the database too.
        tokio::time::sleep(Duration::from_millis(600)).await;
        cluster.up();
        // (Each process ends its own turns, or the other ends them, once writes succeed.)
        deployment.db.wait_for_no_unfinished_turns().await;
        for server in [&a, &b] {
            ready(server).await;
        }
        check_sessions(&deployment.db, &token, [&a, &b], &turns).await;
    }
}
