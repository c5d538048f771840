//! The event log seen from outside: ids are the per-session seq, replay from any cursor
//! gives exactly the rest, and switching from replay to live loses and repeats nothing.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{spawn_app, user};
use crate::sse::{Frame, coalesced};

fn ids(frames: &[Frame]) -> Vec<i64> {
    frames
        .iter()
        .map(|f| f.id.expect("every frame has an id"))
        .collect()
}

#[tokio::test]
async fn ids_are_the_session_seq_and_replay_from_every_cursor_gives_the_rest() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "thinker"}}))
        .await;
    let mut turns = Vec::new();
    let mut live = Vec::new();
    for text in ["first turn", "second turn"] {
        let stream = app
            .stream_turn(
                &token,
                &session,
                json!({"stream": "delta", "messages": [user(text)]}),
            )
            .await;
        turns.push(
            stream.headers["agentry-turn-id"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
        live.extend(stream.collect().await);
    }

    // Ids increase across turns; the log keeps every event but the deltas, which it holds
    // as one event per run of one kind, at the run's last id.
    let live_ids = ids(&live);
    assert!(live_ids.windows(2).all(|w| w[0] < w[1]), "{live_ids:?}");
    let log = app
        .state
        .store()
        .list_events(
            &tenant.parse().unwrap(),
            &session.parse().unwrap(),
            None,
            0,
            1000,
            agentry::store::Deltas::Merged,
        )
        .await
        .unwrap();
    let seqs: Vec<i64> = log.iter().map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let merged = coalesced(&live);
    assert!(ids(&merged).iter().all(|id| seqs.contains(id)));
    let stored_deltas = log
        .iter()
        .filter(|e| e.data.kind().ends_with("_delta"))
        .count();
    assert_eq!(stored_deltas, 4, "one thinking and one text delta per turn");
    assert!(live.iter().filter(|f| f.event.ends_with("_delta")).count() > 4);

    // Replaying the session from the start gives what was streamed live, deltas merged.
    let mut replay = app
        .stream(&format!("/sessions/{session}/events"), &token, None)
        .await;
    let mut replayed = Vec::new();
    while replayed.len() < merged.len() {
        replayed.push(replay.next().await.unwrap());
    }
    assert_eq!(replayed, merged);

    // A finished turn, from every cursor: exactly the remaining events, then the end.
    let first_turn: Vec<Frame> = live
        .iter()
        .take_while(|f| f.event != "turn_stop")
        .cloned()
        .chain(live.iter().find(|f| f.event == "turn_stop").cloned())
        .collect();
    let last_seq = *ids(&first_turn).last().unwrap();
    for cursor in 0..=last_seq {
        let path = format!("/sessions/{session}/turns/{}/events", turns[0]);
        let rest = if cursor % 2 == 0 {
            app.stream(&path, &token, Some(cursor))
                .await
                .collect()
                .await
        } else {
            app.stream(&format!("{path}?after={cursor}"), &token, None)
                .await
                .collect()
                .await
        };
        let missed: Vec<Frame> = first_turn
            .iter()
            .filter(|f| f.id.unwrap() > cursor)
            .cloned()
            .collect();
        assert_eq!(rest, coalesced(&missed), "cursor {cursor}");

        // In message mode, the messages hold exactly the text after the cursor.
        let messages = app
            .stream(&format!("{path}?stream=message"), &token, Some(cursor))
            .await
            .collect()
            .await;
        assert!(
            ids(&messages).iter().all(|id| *id > cursor),
            "cursor {cursor}"
        );
        assert_eq!(
            messages.last().map(|f| f.event.as_str()),
            missed.last().map(|f| f.event.as_str())
        );
        for (delta, message, field) in [
            ("text_delta", "text", "text"),
            ("thinking_delta", "thinking", "thinking"),
        ] {
            let missed_text: String = missed
                .iter()
                .filter(|f| f.event == delta)
                .map(|f| f.data["delta"].as_str().unwrap())
                .collect();
            let got: String = messages
                .iter()
                .filter(|f| f.event == message)
                .map(|f| f.data[field].as_str().unwrap())
                .collect();
            assert_eq!(got, missed_text, "{message} after cursor {cursor}");
        }
    }

    // Message mode replays aggregate the same way live streams do.
    let messages = app
        .stream(
            &format!(
                "/sessions/{session}/turns/{}/events?stream=message",
                turns[1]
            ),
            &token,
            None,
        )
        .await
        .collect()
        .await;
    let names = crate::sse::names(&messages);
    assert_eq!(names, ["turn_start", "thinking", "text", "turn_stop"]);
    assert_eq!(messages[2].data["text"], "second turn");

    let bad = app
        .client
        .get(app.url(&format!("/sessions/{session}/events")))
        .bearer_auth(&token)
        .header("Last-Event-ID", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_reader_joining_mid_turn_gets_the_prefix_from_the_log_and_the_rest_live() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let mut origin = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user("0123456789abcdef")]}),
        )
        .await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(origin.next().await.unwrap());
    }
    let mut joiner = app
        .stream(&format!("/sessions/{session}/events"), &token, None)
        .await;
    let joined = joiner.until_turn_stop().await;
    seen.extend(origin.until_turn_stop().await);
    assert_eq!(joined, seen, "no gap, no duplicate");
    let text: String = joined
        .iter()
        .filter_map(|f| f.data["delta"].as_str())
        .collect();
    assert_eq!(text, "0123456789abcdef");
    let ids = ids(&joined);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));

    // The session stream stays open for the next turn, live.
    let next = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("ok")]}),
        )
        .await;
    assert_eq!(next.status, StatusCode::OK);
    let more = joiner.until_turn_stop().await;
    assert_eq!(more.first().unwrap().event, "turn_start");
    assert!(more.first().unwrap().id.unwrap() > *ids.last().unwrap());
}

#[tokio::test]
async fn a_client_that_disconnects_mid_turn_does_not_stop_it() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "slow"}}))
        .await;
    let text = "the turn goes on without me";
    let mut stream = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user(text)]}),
        )
        .await;
    let turn = stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut received = vec![stream.next().await.unwrap(), stream.next().await.unwrap()];
    drop(stream);

    // Resume where the connection dropped.
    let last = received.last().unwrap().id.unwrap();
    let resumed = app
        .stream(
            &format!("/sessions/{session}/turns/{turn}/events"),
            &token,
            Some(last),
        )
        .await
        .collect()
        .await;
    received.extend(resumed);
    let streamed: String = received
        .iter()
        .filter_map(|f| f.data["delta"].as_str())
        .collect();
    assert_eq!(streamed, text);
    assert_eq!(
        received.last().unwrap().data,
        json!({"stopReason": "end_turn"})
    );

    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(
        history.body["history"]["full"][1],
        json!({"role": "assistant", "content": [{"type": "text", "text": text}]})
    );
    let record = app
        .get(&format!("/sessions/{session}/turns/{turn}"), &token)
        .await;
    assert_eq!(record.body["status"], "completed");
}

#[tokio::test]
async fn a_subscriber_that_falls_behind_reads_the_log_and_misses_nothing() {
    let db = std::sync::Arc::new(crate::helpers::TestDb::new().await);
    let app = crate::helpers::spawn_app_on(db, "[engine]\nsubscriber_buffer = 2\n").await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    // Subscribed, then not read while a long turn streams past a 2-event buffer.
    let mut lagging = app
        .stream(&format!("/sessions/{session}/events"), &token, None)
        .await;
    let text = "0123456789".repeat(40);
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user(&text)]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let frames = lagging.until_turn_stop().await;
    let ids = ids(&frames);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let streamed: String = frames
        .iter()
        .filter_map(|f| f.data["delta"].as_str())
        .collect();
    assert_eq!(streamed, text);
    assert_eq!(frames.first().unwrap().event, "turn_start");
    let fell_behind = crate::helpers::captured_logs()
        .lines()
        .any(|l| l.contains("subscriber fell behind") && l.contains(&session));
    assert!(
        fell_behind,
        "the subscriber lagged the broadcast and caught up from the log"
    );
}

#[tokio::test]
async fn idle_streams_carry_keep_alive_comments() {
    let db = std::sync::Arc::new(crate::helpers::TestDb::new().await);
    let app = crate::helpers::spawn_app_on(db, "[engine]\nsse_keep_alive_seconds = 1\n").await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let response = app
        .client
        .get(app.url(&format!("/sessions/{session}/events")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let mut body = futures_util::StreamExt::boxed(response.bytes_stream());
    let chunk = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        futures_util::StreamExt::next(&mut body),
    )
    .await
    .expect("a keep-alive within the timeout")
    .unwrap()
    .unwrap();
    assert_eq!(&chunk[..], b": keep-alive\n\n");
}

#[tokio::test]
async fn a_sessions_live_channel_goes_when_its_last_follower_leaves() {
    let app = crate::helpers::spawn_app_on(
        std::sync::Arc::new(crate::helpers::TestDb::new().await),
        "[engine]\nsse_keep_alive_seconds = 1\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let mut followers = Vec::new();
    for _ in 0..50 {
        let session = app
            .create_session(&token, json!({"agent": {"name": "echo"}}))
            .await;
        followers.push(
            app.stream(&format!("/sessions/{session}/events"), &token, None)
                .await,
        );
    }
    assert_eq!(app.state.engine().live_sessions(), 50);
    drop(followers);
    // The server learns that a client left when its next keep-alive cannot be written.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while app.state.engine().live_sessions() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} channels remain",
            app.state.engine().live_sessions()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
