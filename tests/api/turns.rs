//! AAP turns: the three stream modes, validation, overrides, idempotency, one active turn
//! per session, cancellation, the queue, and isolation.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestDb, captured_logs, spawn_app, spawn_app_on, user};
use crate::sse::{Frame, names};

fn joined(frames: &[Frame], event: &str) -> String {
    frames
        .iter()
        .filter(|f| f.event == event)
        .map(|f| f.data["delta"].as_str().unwrap())
        .collect()
}

const THOUGHT: &str = "The user wrote 11 characters; I repeat them.";

#[tokio::test]
async fn the_three_stream_modes_give_the_exact_aap_sequences() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "thinker"}}))
        .await;

    // delta
    let mut stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user("Hello there")]}),
        )
        .await;
    assert_eq!(stream.headers["content-type"], "text/event-stream");
    assert_eq!(stream.headers["cache-control"], "no-cache");
    assert_eq!(stream.headers["x-accel-buffering"], "no");
    let delta_turn = stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(delta_turn.starts_with("turn_"));
    let frames = stream.until_turn_stop().await;
    assert!(
        stream.next().await.is_none(),
        "the stream closes after turn_stop"
    );
    let thinking = THOUGHT.chars().count().div_ceil(4);
    let mut expected = vec!["turn_start"];
    expected.extend(std::iter::repeat_n("thinking_delta", thinking));
    expected.extend(std::iter::repeat_n("text_delta", 3));
    expected.push("turn_stop");
    assert_eq!(names(&frames), expected);
    assert_eq!(frames[0].data, json!({}));
    assert_eq!(joined(&frames, "thinking_delta"), THOUGHT);
    assert_eq!(joined(&frames, "text_delta"), "Hello there");
    for frame in frames.iter().filter(|f| f.event.ends_with("_delta")) {
        assert_eq!(
            frame.data.as_object().unwrap().len(),
            1,
            "only `delta`: {frame:?}"
        );
    }
    assert_eq!(
        frames.last().unwrap().data,
        json!({"stopReason": "end_turn"})
    );

    // message
    let stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "message", "messages": [user("Hello there")]}),
        )
        .await;
    let frames = stream.collect().await;
    assert_eq!(
        names(&frames),
        ["turn_start", "thinking", "text", "turn_stop"]
    );
    assert_eq!(frames[1].data, json!({"thinking": THOUGHT}));
    assert_eq!(frames[2].data, json!({"text": "Hello there"}));
    assert_eq!(frames[3].data, json!({"stopReason": "end_turn"}));

    // none: the same messages as JSON
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("Hello there")]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert!(
        reply.headers["agentry-turn-id"]
            .to_str()
            .unwrap()
            .starts_with("turn_")
    );
    assert_eq!(
        reply.body,
        json!({
            "stopReason": "end_turn",
            "messages": [{"role": "assistant", "content": [
                {"type": "thinking", "thinking": THOUGHT},
                {"type": "text", "text": "Hello there"}
            ]}]
        })
    );

    // The history holds each turn's user message and exactly the assistant message it
    // streamed; compacted equals full for this agent.
    let full = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let full = full.body["history"]["full"].as_array().unwrap().clone();
    assert_eq!(full.len(), 6);
    for pair in full.chunks(2) {
        assert_eq!(pair[0], user("Hello there"));
        assert_eq!(pair[1], reply.body["messages"][0]);
    }
    let compacted = app
        .get(
            &format!("/sessions/{session}/history?type=compacted"),
            &token,
        )
        .await;
    assert_eq!(compacted.body["history"]["compacted"], json!(full));

    // The turn record.
    let turn = app
        .get(&format!("/sessions/{session}/turns/{delta_turn}"), &token)
        .await;
    assert_eq!(turn.body["status"], "completed");
    assert_eq!(turn.body["stream"], "delta");
    assert_eq!(turn.body["stopReason"], "end_turn");
    assert!(turn.body["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert!(turn.body["firstSeq"].as_i64().unwrap() < turn.body["lastSeq"].as_i64().unwrap());
    let list = app.get(&format!("/sessions/{session}/turns"), &token).await;
    assert_eq!(list.body["turns"].as_array().unwrap().len(), 3);
    assert_eq!(list.body["turns"][2]["turnId"], delta_turn.as_str());
}

#[tokio::test]
async fn overrides_on_a_turn_persist_for_the_session() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let path = format!("/sessions/{session}/turns");
    let loud = app
        .post(&path, &token, json!({"agent": {"options": {"style": "upper", "api_key": "k2"}}, "messages": [user("quiet")]}))
        .await;
    assert_eq!(loud.body["messages"][0]["content"][0]["text"], "QUIET");
    let again = app
        .post(&path, &token, json!({"messages": [user("still")]}))
        .await;
    assert_eq!(again.body["messages"][0]["content"][0]["text"], "STILL");
    let read = app.get(&format!("/sessions/{session}"), &token).await;
    assert_eq!(
        read.body["agent"]["options"],
        json!({"style": "upper", "api_key": "***"})
    );
    let same_name = app
        .post(&path, &token, json!({"agent": {"name": "echo", "options": {"style": "plain"}}, "messages": [user("Back")]}))
        .await;
    assert_eq!(same_name.body["messages"][0]["content"][0]["text"], "Back");
}

#[tokio::test]
async fn bad_turn_requests_name_the_field_and_change_nothing() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "tooly"}}))
        .await;
    let path = format!("/sessions/{session}/turns");
    let cases = [
        (json!({"messages": [user("x")], "stream": "fast"}), "stream"),
        (json!({}), "messages"),
        (json!({"messages": []}), "messages"),
        (json!({"messages": [user("a"), user("b")]}), "messages"),
        (
            json!({"messages": [{"role": "assistant", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"messages": [{"role": "tool", "toolCallId": "nope", "content": "x"}]}),
            "messages[0].toolCallId",
        ),
        (
            json!({"messages": [{"role": "tool_permission", "toolCallId": "nope"}]}),
            "messages[0].granted",
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image", "url": "data:image/png;base64,AA=="}]}]}),
            "messages[0].content[0].url",
        ),
        (
            json!({"agent": {"name": "echo"}, "messages": [user("x")]}),
            "agent.name",
        ),
        (
            json!({"agent": {"options": {"model": "gigantic"}}, "messages": [user("x")]}),
            "agent.options.model",
        ),
        (
            json!({"agent": {"tools": [{"name": "memory"}]}, "messages": [user("x")]}),
            "agent.tools[0].name",
        ),
        (
            json!({"tools": [{"name": "clock", "description": "d", "parameters": {}}], "messages": [user("x")]}),
            "tools[0].name",
        ),
    ];
    for (body, field) in cases {
        let reply = app.post(&path, &token, body.clone()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            reply.text
        );
        assert_eq!(
            reply.body["error"]["field"], field,
            "{body}: {}",
            reply.text
        );
    }
    let turns = app.get(&format!("/sessions/{session}/turns"), &token).await;
    assert_eq!(turns.body["turns"], json!([]));
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(history.body["history"]["full"], json!([]));
    let read = app.get(&format!("/sessions/{session}"), &token).await;
    assert_eq!(read.body["agent"]["options"]["model"], "small");
}

#[tokio::test]
async fn a_second_turn_while_one_runs_is_refused_with_409() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let mut first = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user("abcdefgh")]}),
        )
        .await;
    assert_eq!(first.next().await.unwrap().event, "turn_start");
    let busy = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("again")]}),
        )
        .await;
    assert_eq!(busy.status, StatusCode::CONFLICT);
    assert_eq!(busy.code(), "session_busy");
    assert_eq!(busy.headers["retry-after"], "1");
    let frames = first.until_turn_stop().await;
    assert_eq!(joined(&frames, "text_delta"), "abcdefgh");
    let next = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("now")]}),
        )
        .await;
    assert_eq!(next.status, StatusCode::OK);
    // The refused request left nothing behind.
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let users: Vec<&Value> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(users, [&user("abcdefgh"), &user("now")]);
}

#[tokio::test]
async fn cancel_stops_a_slow_turn_promptly_and_is_idempotent() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let long = "x".repeat(500);
    let mut stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user(&long)]}),
        )
        .await;
    let turn = stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(stream.next().await.unwrap().event, "turn_start");
    assert_eq!(stream.next().await.unwrap().event, "text_delta");

    let cancel = format!("/sessions/{session}/turns/{turn}/cancel");
    let cancelled = app.post(&cancel, &token, json!({})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    assert_eq!(cancelled.body["status"], "cancelled");
    assert_eq!(cancelled.body["stopReason"], "error");
    assert_eq!(cancelled.body["error"]["code"], "cancelled");

    let rest = stream.until_turn_stop().await;
    let stop = rest.last().unwrap();
    assert_eq!(stop.data["stopReason"], "error");
    assert_eq!(stop.data["error"]["code"], "cancelled");
    assert!(
        rest.len() < 100,
        "the turn stopped early ({} more frames)",
        rest.len()
    );

    let again = app.post(&cancel, &token, json!({})).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(again.body, cancelled.body);

    // The partial answer is in the history, and the session takes a new turn.
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let partial = history.body["history"]["full"][1]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(!partial.is_empty() && partial.len() < long.len());
    let next = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("ok")]}),
        )
        .await;
    assert_eq!(next.body["stopReason"], "end_turn");
}

#[tokio::test]
async fn an_idempotent_retry_returns_the_same_turn_without_running_it_again() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let url = app.url(&format!("/sessions/{session}/turns"));
    let body = json!({"messages": [user("only once")]});
    let send = |body: Value, key: &'static str| {
        app.client
            .post(&url)
            .bearer_auth(&token)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
    };
    let first = send(body.clone(), "key-1").await.unwrap();
    let first_turn = first.headers()["agentry-turn-id"].clone();
    let first: Value = first.json().await.unwrap();
    let retry = send(body.clone(), "key-1").await.unwrap();
    assert_eq!(retry.status(), StatusCode::OK);
    assert_eq!(retry.headers()["agentry-turn-id"], first_turn);
    let retry: Value = retry.json().await.unwrap();
    assert_eq!(retry, first);

    let turns = app.get(&format!("/sessions/{session}/turns"), &token).await;
    assert_eq!(turns.body["turns"].as_array().unwrap().len(), 1);
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(history.body["history"]["full"].as_array().unwrap().len(), 2);

    let different = send(json!({"messages": [user("something else")]}), "key-1")
        .await
        .unwrap();
    assert_eq!(different.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error: Value = different.json().await.unwrap();
    assert_eq!(error["error"]["code"], "idempotency_key_reused");

    // A streamed retry replays the same turn's events.
    let streamed = json!({"stream": "delta", "messages": [user("streamed")]});
    let a = crate::sse::SseReader::new(send(streamed.clone(), "key-2").await.unwrap());
    let a_turn = a.headers["agentry-turn-id"].clone();
    let a = a.collect().await;
    let b = crate::sse::SseReader::new(send(streamed, "key-2").await.unwrap());
    assert_eq!(b.headers["agentry-turn-id"], a_turn);
    assert_eq!(b.collect().await, a);
}

#[tokio::test]
async fn turns_beyond_the_limit_wait_and_a_full_queue_answers_429() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_app_on(
        db,
        "[engine]\nmax_concurrent_turns_per_tenant = 1\nmax_queued_turns = 1\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(
            app.create_session(&token, json!({"agent": {"name": "slow"}}))
                .await,
        );
    }
    let mut running = app
        .stream_turn(
            &token,
            &sessions[0],
            json!({"stream": "delta", "messages": [user("abcdef")]}),
        )
        .await;
    assert_eq!(running.next().await.unwrap().event, "turn_start");
    let mut waiting = app
        .stream_turn(
            &token,
            &sessions[1],
            json!({"stream": "delta", "messages": [user("xyz")]}),
        )
        .await;
    let waiting_turn = waiting.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let queued = app
        .get(
            &format!("/sessions/{}/turns/{waiting_turn}", sessions[1]),
            &token,
        )
        .await;
    assert_eq!(queued.body["status"], "queued");
    let full = app
        .post(
            &format!("/sessions/{}/turns", sessions[2]),
            &token,
            json!({"messages": [user("no room")]}),
        )
        .await;
    assert_eq!(full.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(full.code(), "queue_full");
    assert!(full.headers.contains_key("retry-after"));

    running.until_turn_stop().await;
    let frames = waiting.until_turn_stop().await;
    assert_eq!(joined(&frames, "text_delta"), "xyz");
}

#[tokio::test]
async fn another_tenant_cannot_read_replay_or_cancel_a_turn() {
    let app = spawn_app().await;
    let (_, alice) = app.new_tenant().await;
    let (_, bob) = app.new_tenant().await;
    let session = app
        .create_session(&alice, json!({"agent": {"name": "slow"}}))
        .await;
    let mut stream = app
        .stream_turn(
            &alice,
            &session,
            json!({"stream": "delta", "messages": [user("secret plans")]}),
        )
        .await;
    let turn = stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    stream.next().await.unwrap();

    let fake_session = "sess_0123456789abcdef0123456789abcdef";
    let fake_turn = "turn_0123456789abcdef0123456789abcdef";
    let routes = |s: &str, t: &str| {
        vec![
            (Method::GET, format!("/sessions/{s}/turns")),
            (Method::GET, format!("/sessions/{s}/turns/{t}")),
            (Method::GET, format!("/sessions/{s}/turns/{t}/events")),
            (Method::POST, format!("/sessions/{s}/turns/{t}/cancel")),
            (Method::GET, format!("/sessions/{s}/events")),
        ]
    };
    for ((method, path), (_, missing)) in routes(&session, &turn)
        .into_iter()
        .zip(routes(fake_session, fake_turn))
    {
        let reply = app
            .request(method.clone(), &path, Some(&bob), Some(&json!({})))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            reply.text
        );
        let nothing = app
            .request(method.clone(), &missing, Some(&bob), Some(&json!({})))
            .await;
        assert_eq!(reply.body["error"]["code"], nothing.body["error"]["code"]);
    }
    // Alice's turn ran to its end, uncancelled.
    let frames = stream.until_turn_stop().await;
    assert_eq!(frames.last().unwrap().data["stopReason"], "end_turn");
    assert_eq!(joined(&frames, "text_delta"), "secret plans");
}

#[tokio::test]
async fn deleting_a_session_stops_its_turn_first() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let mut stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user(&"y".repeat(300))]}),
        )
        .await;
    stream.next().await.unwrap();
    let deleted = app.delete(&format!("/sessions/{session}"), &token).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let rest = stream.until_turn_stop().await;
    assert_eq!(rest.last().unwrap().data["error"]["code"], "cancelled");
    assert_eq!(
        app.get(&format!("/sessions/{session}"), &token)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_shutting_down_engine_refuses_new_turns_and_finishes_running_ones() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let busy = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let idle = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let mut running = app
        .stream_turn(
            &token,
            &busy,
            json!({"stream": "delta", "messages": [user("finish me")]}),
        )
        .await;
    assert_eq!(running.next().await.unwrap().event, "turn_start");

    let engine = app.state.engine().clone();
    let shutdown = engine.shutdown(std::time::Duration::from_secs(30));
    tokio::pin!(shutdown);
    // Polled once, shutdown has stopped intake and waits for the running turn.
    assert!(futures_util::poll!(&mut shutdown).is_pending());
    assert!(!engine.is_accepting());
    let refused = app
        .post(
            &format!("/sessions/{idle}/turns"),
            &token,
            json!({"messages": [user("late")]}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.code(), "shutting_down");
    assert!(refused.headers.contains_key("retry-after"));
    let (frames, ()) = tokio::join!(running.until_turn_stop(), &mut shutdown);
    assert_eq!(joined(&frames, "text_delta"), "finish me");
    assert_eq!(
        frames.last().unwrap().data,
        json!({"stopReason": "end_turn"})
    );

    // A drain-time refusal is no error of the server's: its request line is logged below
    // ERROR, and nothing of the request is logged at ERROR.
    let request_id = refused.headers["agentry-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let records = loop {
        let records: Vec<Value> = captured_logs()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|record| record["span"]["request_id"] == request_id.as_str())
            .collect();
        if records.iter().any(|r| r["span"]["status"] == 503) {
            break records;
        }
        assert!(std::time::Instant::now() < deadline, "no request line");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert!(records.iter().all(|r| r["level"] != "ERROR"), "{records:?}");
}

#[tokio::test]
async fn the_usage_report_sums_a_tenants_turns_over_a_period() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let (other, other_token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let before = chrono::Utc::now() - chrono::Duration::seconds(1);
    for text in ["one", "two two"] {
        app.post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user(text)]}),
        )
        .await;
    }
    let elsewhere = app
        .create_session(&other_token, json!({"agent": {"name": "echo"}}))
        .await;
    app.post(
        &format!("/sessions/{elsewhere}/turns"),
        &other_token,
        json!({"messages": [user("x")]}),
    )
    .await;

    let turns = app.get(&format!("/sessions/{session}/turns"), &token).await;
    let sum = |field: &str| -> u64 {
        turns.body["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["usage"][field].as_u64().unwrap())
            .sum()
    };
    let report = app
        .get(&format!("/admin/tenants/{tenant}/usage"), &app.admin_token)
        .await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.text);
    assert_eq!(report.body["turns"], 2);
    assert_eq!(report.body["input_tokens"], sum("input_tokens"));
    assert_eq!(report.body["output_tokens"], sum("output_tokens"));
    assert!(report.body["output_tokens"].as_u64().unwrap() > 0);

    let from = urlencode(&before.to_rfc3339());
    let window = app
        .get(
            &format!("/admin/tenants/{tenant}/usage?from={from}"),
            &app.admin_token,
        )
        .await;
    assert_eq!(window.body["turns"], 2);
    let later = urlencode(&(chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339());
    let empty = app
        .get(
            &format!("/admin/tenants/{tenant}/usage?from={later}"),
            &app.admin_token,
        )
        .await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST, "from after to (now)");
    let upto = app
        .get(
            &format!("/admin/tenants/{tenant}/usage?to={from}"),
            &app.admin_token,
        )
        .await;
    assert_eq!(upto.body["turns"], 0);
    let bad = app
        .get(
            &format!("/admin/tenants/{tenant}/usage?from=yesterday"),
            &app.admin_token,
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let other_report = app
        .get(&format!("/admin/tenants/{other}/usage"), &app.admin_token)
        .await;
    assert_eq!(other_report.body["turns"], 1);
}

fn urlencode(text: &str) -> String {
    text.replace('+', "%2B").replace(':', "%3A")
}
