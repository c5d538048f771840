//! The real binary killed and restarted, and shut down with SIGTERM.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::TestDb;
use crate::process::{Deployment, SLOW_AGENT, ServerProcess, agentry, run_ok};
use crate::sse::SseReader;

#[tokio::test]
async fn a_killed_server_interrupts_the_turn_on_restart_and_loses_nothing_sent() {
    let setup = Deployment::new(SLOW_AGENT).await;
    let (_, token) = setup.tenant_token("lifecycle");
    let server = setup.start(&[]);
    let session = server.create_session(&token, "slow").await;
    let text = "k".repeat(200);
    let mut stream = server.stream_turn(&token, &session, &text).await;
    let turn = stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut received = Vec::new();
    for _ in 0..6 {
        received.push(stream.next().await.unwrap());
    }
    server.kill();
    drop(stream);

    let server = setup.start(&[]);
    setup.db.wait_for_no_unfinished_turns().await;
    let record = server
        .get_json(&token, &format!("/sessions/{session}/turns/{turn}"))
        .await;
    assert_eq!(record["status"], "interrupted");
    assert_eq!(record["error"]["code"], "interrupted");

    let replay = server
        .follow_turn(&token, &session, &turn, None)
        .await
        .collect()
        .await;
    assert_eq!(
        replay[..received.len()],
        received[..],
        "everything a client saw survives"
    );
    let stop = replay.last().unwrap();
    assert_eq!(stop.event, "turn_stop");
    assert_eq!(stop.data["stopReason"], "error");
    assert_eq!(stop.data["error"]["code"], "interrupted");

    // History and events agree on what the turn produced.
    let streamed: String = replay
        .iter()
        .filter_map(|f| f.data["delta"].as_str())
        .collect();
    assert!(!streamed.is_empty() && streamed.len() < text.len());
    let history = server
        .get_json(&token, &format!("/sessions/{session}/history?type=full"))
        .await;
    assert_eq!(
        history["history"]["full"][1],
        json!({"role": "assistant", "content": [{"type": "text", "text": streamed}]})
    );

    // The session takes a new turn.
    let next: Value = reqwest::Client::new()
        .post(server.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(&token)
        .json(&json!({"messages": [{"role": "user", "content": "again"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(next["stopReason"], "end_turn");
}

#[tokio::test]
async fn sigterm_lets_short_turns_finish_and_interrupts_the_rest_after_the_grace_period() {
    let setup = Deployment::new(SLOW_AGENT).await;
    let (_, token) = setup.tenant_token("lifecycle");
    let server = setup.start(&[("AGENTRY__ENGINE__SHUTDOWN_GRACE_SECONDS", "1")]);
    let short_session = server.create_session(&token, "slow").await;
    let long_session = server.create_session(&token, "slow").await;
    let mut short = server.stream_turn(&token, &short_session, "abc").await;
    let mut long = server
        .stream_turn(&token, &long_session, &"z".repeat(400))
        .await;
    assert_eq!(short.next().await.unwrap().event, "turn_start");
    assert_eq!(long.next().await.unwrap().event, "turn_start");

    let watcher = SseReader::new(
        reqwest::Client::new()
            .get(server.url(&format!("/sessions/{short_session}/events")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    );

    let signalled = Instant::now();
    server.terminate();
    let short = short.until_turn_stop().await;
    assert_eq!(
        short.last().unwrap().data,
        json!({"stopReason": "end_turn"})
    );
    let text: String = short
        .iter()
        .filter_map(|f| f.data["delta"].as_str())
        .collect();
    assert_eq!(text, "abc");
    let long = long.until_turn_stop().await;
    assert_eq!(long.last().unwrap().data["error"]["code"], "interrupted");
    let waited = signalled.elapsed();
    assert!(
        waited < Duration::from_secs(8),
        "interrupted after {waited:?}"
    );

    // A live session stream is closed cleanly, after the turn's end.
    let watched = watcher.collect().await;
    assert_eq!(watched.last().unwrap().event, "turn_stop");

    let status = server.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "exit status {status:?}");

    // Nothing was left for recovery: the restarted server finds both turns ended.
    let server = setup.start(&[]);
    let turns = server
        .get_json(&token, &format!("/sessions/{long_session}/turns"))
        .await;
    assert_eq!(turns["turns"][0]["status"], "interrupted");
    let turns = server
        .get_json(&token, &format!("/sessions/{short_session}/turns"))
        .await;
    assert_eq!(turns["turns"][0]["status"], "completed");
    let logs = server.logs.lock().unwrap().join("\n");
    assert!(!logs.contains("recovered a turn"), "{logs}");
}

#[tokio::test]
async fn a_server_tool_whose_result_was_durable_is_not_run_again_after_a_crash() {
    use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

    let model = ScriptedOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentry.toml");
    std::fs::write(
        &config,
        format!(
            "[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
             timeout_seconds = 60\nmax_retries = 0\n[[agents.tools]]\nname = \"memory\"\nexpose = false\n",
            model.url
        ),
    )
    .unwrap();
    let db = TestDb::new().await;
    let command = || {
        let mut command = agentry(db.url());
        command.arg("--config").arg(&config);
        command
    };
    let tenant = run_ok(command().args(["admin", "create-tenant", "crash", "--raw"]));
    let token = run_ok(command().args(["admin", "issue-token", tenant.trim(), "--raw"]));
    let token = token.trim();

    let server = ServerProcess::start(command());
    let session = server.create_session(token, "gpt").await;

    // The model saves a note, then never answers the next call: the server dies there.
    model.push(Reply::Stream(vec![
        tool_fragment(
            0,
            Some("save_1"),
            Some("memory"),
            r#"{"action": "save", "text": "only once"}"#,
        ),
        finish("tool_calls"),
    ]));
    model.push(Reply::Hang);
    let mut stream = server.stream_turn(token, &session, "remember").await;
    let turn = stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    loop {
        let frame = stream.next().await.unwrap();
        if frame.event == "tool_result" {
            assert!(frame.data["content"].as_str().unwrap().contains("saved"));
            break;
        }
    }
    model.wait_for_requests(2).await;
    server.kill();
    drop(stream);

    let server = ServerProcess::start(command());
    db.wait_for_no_unfinished_turns().await;
    let record = server
        .get_json(token, &format!("/sessions/{session}/turns/{turn}"))
        .await;
    assert_eq!(record["status"], "interrupted");
    let history = server
        .get_json(token, &format!("/sessions/{session}/history?type=full"))
        .await;
    let results: Vec<&Value> = history["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1, "the tool's result is in the history once");

    // The note exists exactly once, and the restart called the model no more.
    assert_eq!(model.requests().len(), 2);
    model.push(Reply::Stream(vec![
        tool_fragment(
            0,
            Some("find_1"),
            Some("memory"),
            r#"{"action": "search", "query": "only once"}"#,
        ),
        finish("tool_calls"),
    ]));
    model.push(Reply::Stream(vec![text("Found it."), finish("stop")]));
    let reply: Value = reqwest::Client::new()
        .post(server.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(token)
        .json(&json!({"messages": [{"role": "user", "content": "what did I say?"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let found = reply["messages"][1]["content"].as_str().unwrap();
    assert_eq!(found.matches("only once").count(), 1, "{found}");
}

/// A server killed while many sessions' turns are being admitted and their events written
/// together (several sessions' history messages and stops share a commit; on SQLite,
/// admissions and batches queued together share one statement) loses none of the turns it
/// acknowledged: each is completed, with its reply in its session's history
/// and its events ending in its stop. The turns it had not answered end, none is left
/// running.
#[tokio::test]
async fn a_server_killed_under_load_loses_no_acknowledged_turn() {
    use std::sync::{Arc, Mutex};

    const CLIENTS: usize = 8;
    const SESSIONS_EACH: usize = 2;
    const ACKNOWLEDGED_BEFORE_KILL: usize = 150;

    let setup = Deployment::new("").await;
    let (_, token) = setup.tenant_token("load");
    let server = setup.start(&[]);
    let mut sessions = Vec::new();
    for _ in 0..CLIENTS * SESSIONS_EACH {
        sessions.push(server.create_session(&token, "echo").await);
    }

    // (session, turn, text) of every turn the server answered, in each session's order.
    let acknowledged: Arc<Mutex<Vec<(String, String, String)>>> = Arc::default();
    let (enough_tx, mut enough) = tokio::sync::watch::channel(0usize);
    let mut clients = Vec::new();
    for (client, own) in sessions.chunks(SESSIONS_EACH).enumerate() {
        let own = own.to_vec();
        let url = server.url("");
        let token = token.clone();
        let acknowledged = acknowledged.clone();
        let enough_tx = enough_tx.clone();
        clients.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            for n in 0.. {
                let session = &own[n % own.len()];
                let text = format!("client {client} turn {n}");
                let sent = http
                    .post(format!("{url}/sessions/{session}/turns"))
                    .bearer_auth(&token)
                    .json(
                        &json!({"stream": "none", "messages": [{"role": "user", "content": text}]}),
                    )
                    .send()
                    .await;
                // The server is gone: no answer, no acknowledgement.
                let Ok(reply) = sent else { return };
                if reply.status() != reqwest::StatusCode::OK {
                    return;
                }
                let turn = reply.headers()["agentry-turn-id"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                let Ok(body) = reply.json::<Value>().await else {
                    return;
                };
                assert_eq!(body["messages"][0]["content"][0]["text"], text.as_str());
                let count = {
                    let mut acknowledged = acknowledged.lock().unwrap();
                    acknowledged.push((session.clone(), turn, text));
                    acknowledged.len()
                };
                enough_tx.send_replace(count);
            }
        }));
    }
    enough
        .wait_for(|count| *count >= ACKNOWLEDGED_BEFORE_KILL)
        .await
        .unwrap();
    // On SQLite the writes queued together went out as shared statements: fewer statements
    // than writes.
    if matches!(setup.db, TestDb::Sqlite { .. }) {
        let scrape = reqwest::get(server.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let total = |name: &str| -> f64 {
            scrape
                .lines()
                .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name} in {scrape}"))
        };
        let writes = total("agentry_db_writes_total ");
        let statements = total("agentry_db_write_statements_total ");
        assert!(
            statements < writes,
            "{statements} statements, {writes} writes"
        );
    }
    // The clients are still posting: the kill lands among admissions and batches.
    server.kill();
    for client in clients {
        client.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= ACKNOWLEDGED_BEFORE_KILL);

    let server = setup.start(&[]);
    setup.db.wait_for_no_unfinished_turns().await;
    for session in &sessions {
        let ours: Vec<&(String, String, String)> = acknowledged
            .iter()
            .filter(|(s, _, _)| s == session)
            .collect();
        // The session's history holds every acknowledged turn's input and reply, in order.
        let history = server
            .get_json(&token, &format!("/sessions/{session}/history?type=full"))
            .await;
        let texts: Vec<(String, String)> = history["history"]["full"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let text = m["content"]
                    .as_str()
                    .or_else(|| m["content"][0]["text"].as_str())
                    .unwrap_or_default();
                (m["role"].as_str().unwrap().to_owned(), text.to_owned())
            })
            .collect();
        for (_, turn, text) in &ours {
            let at = texts
                .iter()
                .position(|(role, t)| role == "user" && t == text)
                .unwrap_or_else(|| panic!("turn {turn}'s input is lost: {texts:?}"));
            assert_eq!(
                texts.get(at + 1),
                Some(&("assistant".to_owned(), text.clone())),
                "turn {turn}'s reply is lost: {texts:?}"
            );
            let record = server
                .get_json(&token, &format!("/sessions/{session}/turns/{turn}"))
                .await;
            assert_eq!(record["status"], "completed", "{record}");
            let replay = server
                .follow_turn(&token, session, turn, None)
                .await
                .collect()
                .await;
            let last = replay.last().expect("the turn's events");
            assert_eq!(last.event, "turn_stop");
            assert_eq!(last.data["stopReason"], "end_turn");
        }
        // The turns the server had not answered ended too: the session takes a new one.
        let next = reqwest::Client::new()
            .post(server.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(&token)
            .json(&json!({"stream": "none", "messages": [{"role": "user", "content": "after"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(next.status(), reqwest::StatusCode::OK);
    }
}
