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

    let replay = SseReader::new(
        reqwest::Client::new()
            .get(server.url(&format!("/sessions/{session}/turns/{turn}/events")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap(),
    )
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
