//! Several real `agentry serve` processes on one PostgreSQL database: any process serves
//! any session live, commands reach the process that runs the turn, a dead process's turns
//! are ended by a living one, and a rolling restart loses nothing. SQLite is one process's
//! database (see `processes.rs`), so these run on PostgreSQL only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestDb, user};
use crate::process::{DEPLOYMENT_ADMIN_SECRET, Deployment, SLOW_AGENT, ServerProcess};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};
use crate::sse::{Frame, SseReader};

struct Cluster {
    deployment: Deployment,
    token: String,
    tenant: String,
}

impl Cluster {
    /// `None` on SQLite.
    async fn new(extra_agents: &str) -> Option<Cluster> {
        let db = TestDb::new().await;
        if db.url().starts_with("sqlite:") {
            eprintln!("several processes need PostgreSQL: set TEST_POSTGRES_URL");
            return None;
        }
        let deployment = Deployment::on(db, &format!("{SLOW_AGENT}{extra_agents}"));
        let (tenant, token) = deployment.tenant_token("acme");
        Some(Cluster {
            deployment,
            token,
            tenant,
        })
    }

    fn db(&self) -> &TestDb {
        &self.deployment.db
    }

    fn start(&self, env: &[(&str, &str)]) -> ServerProcess {
        self.deployment.start(env)
    }
}

fn turn_id(stream: &SseReader) -> String {
    stream.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// Cancels a turn through `server` and returns the turn as the cancel answered it.
async fn cancel(server: &ServerProcess, token: &str, session: &str, turn: &str) -> Value {
    let reply = reqwest::Client::new()
        .post(server.url(&format!("/sessions/{session}/turns/{turn}/cancel")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::OK);
    reply.json().await.unwrap()
}

/// Ids strictly increasing: nothing twice. (AAP's delta mode sends no frame for some
/// events, so ids may skip; `replay` proves nothing is missing.)
fn assert_increasing(frames: &[Frame]) {
    for pair in frames.windows(2) {
        assert!(
            pair[1].id.unwrap() > pair[0].id.unwrap(),
            "{:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// The turn's whole log as `server` replays it once the turn ended.
async fn replay(server: &ServerProcess, token: &str, session: &str, turn: &str) -> Vec<Frame> {
    server
        .follow_turn(token, session, turn, None)
        .await
        .until_turn_stop()
        .await
}

#[tokio::test]
async fn a_turn_on_one_process_is_followed_live_from_the_start_and_mid_turn_on_two_others() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    let a = cluster.start(&[]);
    let b = cluster.start(&[]);
    let c = cluster.start(&[]);
    let session = a.create_session(token, "slow").await;

    let mut on_a = a.stream_turn(token, &session, &"k".repeat(60)).await;
    let turn = turn_id(&on_a);
    // B follows from the turn's first event while the turn runs on A.
    let mut on_b = b.follow_turn(token, &session, &turn, None).await;
    let mut seen_a = Vec::new();
    for _ in 0..12 {
        seen_a.push(on_a.next().await.unwrap());
    }
    // C joins mid-turn with the last id it saw.
    let cursor = seen_a.last().unwrap().id.unwrap();
    let on_c = c.follow_turn(token, &session, &turn, Some(cursor));
    let mut on_c = on_c.await;
    let first_on_b = on_b.next().await.unwrap();
    let first_on_c = on_c.next().await.unwrap();
    let record = c
        .get_json(token, &format!("/sessions/{session}/turns/{turn}"))
        .await;
    assert_eq!(
        record["status"], "running",
        "B and C receive while A still runs the turn"
    );

    seen_a.extend(on_a.until_turn_stop().await);
    let stopped_on_a = Instant::now();
    let mut seen_b = vec![first_on_b];
    seen_b.extend(on_b.until_turn_stop().await);
    let mut seen_c = vec![first_on_c];
    seen_c.extend(on_c.until_turn_stop().await);
    assert!(
        stopped_on_a.elapsed() < Duration::from_secs(2),
        "the other processes see the end live, not after a timeout"
    );

    assert_eq!(seen_a.first().unwrap().event, "turn_start");
    assert_eq!(seen_a.last().unwrap().data["stopReason"], "end_turn");
    assert_increasing(&seen_a);
    assert_eq!(
        crate::sse::coalesced(&seen_a),
        replay(&b, token, &session, &turn).await,
        "A streamed the whole log"
    );
    assert_eq!(seen_b, seen_a, "B saw exactly what A streamed");
    let missed: Vec<Frame> = seen_a
        .iter()
        .filter(|f| f.id.unwrap() > cursor)
        .cloned()
        .collect();
    assert_eq!(seen_c, missed, "C got exactly what followed its cursor");
}

#[tokio::test]
async fn a_cancel_sent_to_another_process_stops_the_turn_where_it_runs() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    let a = cluster.start(&[]);
    let b = cluster.start(&[]);
    let session = a.create_session(token, "slow").await;
    let mut on_a = a.stream_turn(token, &session, &"k".repeat(400)).await;
    let turn = turn_id(&on_a);
    for _ in 0..3 {
        on_a.next().await.unwrap();
    }

    let asked = Instant::now();
    let cancelled = cancel(&b, token, &session, &turn).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert!(asked.elapsed() < Duration::from_secs(5));

    let rest = on_a.until_turn_stop().await;
    let stop = rest.last().unwrap();
    assert_eq!(stop.data["error"]["code"], "cancelled");
    assert!(
        rest.iter().filter(|f| f.event == "text_delta").count() < 300,
        "the turn stopped early"
    );
}

#[tokio::test]
async fn a_tenant_suspended_through_another_process_ends_its_turns_there() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    let a = cluster.start(&[]);
    let b = cluster.start(&[]);
    let session = a.create_session(token, "slow").await;
    let mut on_a = a.stream_turn(token, &session, &"k".repeat(400)).await;
    on_a.next().await.unwrap();

    let suspended = reqwest::Client::new()
        .patch(b.url(&format!("/admin/tenants/{}", cluster.tenant)))
        .bearer_auth(admin_token(&b).await)
        .json(&json!({"status": "suspended"}))
        .send()
        .await
        .unwrap();
    assert_eq!(suspended.status(), StatusCode::OK);
    // The suspension answers once the turn on A has ended.
    let stop = cluster
        .db()
        .scalar("SELECT status FROM turns ORDER BY created_at DESC LIMIT 1")
        .await;
    assert_ne!(stop, "running");
    assert_ne!(stop, "queued");

    let rest = on_a.until_turn_stop().await;
    assert_eq!(rest.last().unwrap().data["stopReason"], "error");
}

async fn admin_token(server: &ServerProcess) -> String {
    let reply: Value = reqwest::Client::new()
        .post(server.url("/auth/token"))
        .json(&json!({"client_id": "admin", "client_secret": DEPLOYMENT_ADMIN_SECRET}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    reply["access_token"]
        .as_str()
        .expect("an admin token")
        .to_owned()
}

#[tokio::test]
async fn two_processes_racing_for_one_session_admit_one_turn_and_a_retry_elsewhere_gets_it() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    let a = cluster.start(&[]);
    let b = cluster.start(&[]);
    let client = reqwest::Client::new();
    for round in 0..5 {
        let session = a.create_session(token, "slow").await;
        let post = |server: &ServerProcess| {
            client
                .post(server.url(&format!("/sessions/{session}/turns")))
                .bearer_auth(token)
                .json(&json!({"stream": "delta", "messages": [user(&"r".repeat(20))]}))
                .send()
        };
        let (on_a, on_b) = tokio::join!(post(&a), post(&b));
        let mut statuses = [on_a.unwrap(), on_b.unwrap()]
            .into_iter()
            .map(|r| r.status())
            .collect::<Vec<_>>();
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::OK, StatusCode::CONFLICT],
            "round {round}: one turn per session"
        );
    }

    // An idempotent retry sent to another process returns the same turn.
    let session = a.create_session(token, "slow").await;
    let send = |server: &ServerProcess| {
        client
            .post(server.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(token)
            .header("Idempotency-Key", "once")
            .json(&json!({"messages": [user("abc")]}))
            .send()
    };
    let first = send(&a).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let first_turn = first.headers()["agentry-turn-id"].clone();
    let retry = send(&b).await.unwrap();
    assert_eq!(retry.status(), StatusCode::OK);
    assert_eq!(retry.headers()["agentry-turn-id"], first_turn);
    let turns = b
        .get_json(token, &format!("/sessions/{session}/turns"))
        .await;
    assert_eq!(turns["turns"].as_array().unwrap().len(), 1, "{turns}");
}

#[tokio::test]
async fn a_killed_processs_turn_is_ended_once_by_another_and_its_replacement_leaves_running_turns_alone()
 {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    let a = cluster.start(&[]);
    let b = cluster.start(&[]);
    let session = a.create_session(token, "slow").await;
    let on_a = a.stream_turn(token, &session, &"k".repeat(400)).await;
    let turn = turn_id(&on_a);
    let mut on_b = b.follow_turn(token, &session, &turn, None).await;
    for _ in 0..5 {
        on_b.next().await.unwrap();
    }
    a.kill();
    let killed = Instant::now();
    drop(on_a);

    let rest = on_b.until_turn_stop().await;
    let waited = killed.elapsed();
    let stop = rest.last().unwrap();
    assert_eq!(stop.data["error"]["code"], "interrupted");
    // engine.lease_ms = 1000 and lease_sweep_ms = 200 in these tests.
    assert!(waited < Duration::from_secs(5), "ended after {waited:?}");
    crate::durability::assert_one_terminal_event_last(cluster.db(), &turn).await;

    // B runs a turn; A's replacement starts meanwhile and must not touch it.
    let other = b.create_session(token, "slow").await;
    let mut on_b = b.stream_turn(token, &other, &"k".repeat(40)).await;
    on_b.next().await.unwrap();
    let replacement = cluster.start(&[]);
    let frames = on_b.until_turn_stop().await;
    assert_eq!(frames.last().unwrap().data["stopReason"], "end_turn");
    drop(replacement);
}

#[tokio::test]
async fn a_rolling_restart_ends_every_turn_once_and_followers_on_the_new_process_see_the_end() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    // The old process may finish turns for 2 s after SIGTERM.
    let old = cluster.start(&[("AGENTRY__ENGINE__SHUTDOWN_GRACE_SECONDS", "2")]);
    let mut turns = Vec::new();
    for length in [20, 20, 400] {
        let session = old.create_session(token, "slow").await;
        let mut stream = old.stream_turn(token, &session, &"k".repeat(length)).await;
        stream.next().await.unwrap();
        turns.push((session, turn_id(&stream), length));
    }
    let new = cluster.start(&[]);
    let mut followers = Vec::new();
    for (session, turn, _) in &turns {
        followers.push(new.follow_turn(token, session, turn, None).await);
    }
    old.terminate();
    // Draining: no new turns, and readiness says so.
    let ready = reqwest::Client::new()
        .get(old.url("/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);

    for ((session, turn, length), mut follower) in turns.iter().zip(followers) {
        let frames = follower.until_turn_stop().await;
        assert_increasing(&frames);
        assert_eq!(
            crate::sse::coalesced(&frames),
            replay(&new, token, session, turn).await
        );
        let stop = frames.last().unwrap();
        if *length == 20 {
            assert_eq!(stop.data["stopReason"], "end_turn", "{turn} finished");
        } else {
            assert_eq!(stop.data["error"]["code"], "interrupted", "{turn}");
        }
        crate::durability::assert_one_terminal_event_last(cluster.db(), turn).await;
    }
    assert!(old.wait_exit(Duration::from_secs(30)).success());
    cluster.db().wait_for_no_unfinished_turns().await;
    // The new process serves on.
    let session = new.create_session(token, "slow").await;
    let frames = new
        .stream_turn(token, &session, "ok")
        .await
        .until_turn_stop()
        .await;
    assert_eq!(frames.last().unwrap().data["stopReason"], "end_turn");
}

#[tokio::test]
async fn sequence_numbers_stay_gap_free_when_turns_of_many_sessions_move_between_processes() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let cluster = Arc::new(cluster);
    let servers = Arc::new([
        cluster.start(&[("AGENTRY__ENGINE__MAX_BATCH_EVENTS", "4")]),
        cluster.start(&[]),
        cluster.start(&[]),
    ]);
    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(servers[0].create_session(&cluster.token, "slow").await);
    }
    let mut tasks = Vec::new();
    for (i, session) in sessions.iter().enumerate() {
        let (servers, cluster, session) = (servers.clone(), cluster.clone(), session.clone());
        tasks.push(tokio::spawn(async move {
            let mut turns = Vec::new();
            for round in 0..6 {
                let server = &servers[(i + round) % 3];
                let mut stream = server.stream_turn(&cluster.token, &session, "abcdef").await;
                turns.push((turn_id(&stream), stream.until_turn_stop().await));
            }
            (session, turns)
        }));
    }
    for task in tasks {
        let (session, turns) = task.await.unwrap();
        let mut last = 0;
        for (turn, streamed) in turns {
            // A turn's first event follows the previous turn's last.
            assert_eq!(streamed.first().unwrap().id.unwrap(), last + 1, "{turn}");
            assert_increasing(&streamed);
            last = streamed.last().unwrap().id.unwrap();
            // Read back through any process, the log holds what was streamed.
            assert_eq!(
                crate::sse::coalesced(&streamed),
                replay(&servers[2], &cluster.token, &session, &turn).await,
                "{session} {turn}"
            );
        }
    }
}

/// An OpenAI-compatible agent whose `clock` tool waits for the client's permission.
fn gpt_agent(model: &ScriptedOpenAi) -> String {
    format!(
        "[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\n\
         model = \"tiny\"\napi_key = \"k\"\n\n[[agents.tools]]\nname = \"clock\"\n",
        model.url
    )
}

#[tokio::test]
async fn a_permission_answered_on_another_process_resumes_the_turn_that_stopped_for_it() {
    let model = ScriptedOpenAi::start().await;
    let Some(cluster) = Cluster::new(&gpt_agent(&model)).await else {
        return;
    };
    let token = &cluster.token;
    let a = cluster.start(&[]);
    let c = cluster.start(&[]);
    let client = reqwest::Client::new();
    let created: Value = client
        .post(a.url("/sessions"))
        .bearer_auth(token)
        .json(&json!({"agent": {"name": "gpt", "tools": [{"name": "clock"}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = created["sessionId"].as_str().unwrap().to_owned();
    let path = format!("/sessions/{session}/turns");

    model.push(Reply::Stream(vec![
        tool_fragment(0, Some("c1"), Some("clock"), "{}"),
        finish("tool_calls"),
    ]));
    let asked: Value = client
        .post(a.url(&path))
        .bearer_auth(token)
        .json(&json!({"messages": [user("What time is it?")]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(asked["stopReason"], "tool_use", "{asked}");

    model.push(Reply::Stream(vec![text("Noon-ish."), finish("stop")]));
    let granted = client
        .post(c.url(&path))
        .bearer_auth(token)
        .json(&json!({"messages": [{"role": "tool_permission", "toolCallId": "c1", "granted": true}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(granted.status(), StatusCode::OK);
    let granted: Value = granted.json().await.unwrap();
    assert_eq!(granted["stopReason"], "end_turn", "{granted}");
    let time = granted["messages"][0]["content"].as_str().unwrap();
    assert!(time.contains('T'), "the clock ran on C: {time}");

    // Back on A, which remembered the session before C changed it.
    model.push(Reply::Stream(vec![text("Bye."), finish("stop")]));
    let reply = client
        .post(a.url(&path))
        .bearer_auth(token)
        .json(&json!({"messages": [user("thanks")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::OK);
    let sent = &model.requests()[2].body["messages"];
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "user"],
        "{sent}"
    );
}

#[tokio::test]
async fn a_tenants_limit_of_concurrent_turns_holds_over_every_process() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    let one = [("AGENTRY__ENGINE__MAX_CONCURRENT_TURNS_PER_TENANT", "1")];
    let a = cluster.start(&one);
    let b = cluster.start(&one);
    let first = a.create_session(token, "slow").await;
    let second = b.create_session(token, "slow").await;
    let mut on_a = a.stream_turn(token, &first, &"k".repeat(30)).await;
    on_a.next().await.unwrap();
    // B has a free slot of its own, but the tenant's one turn runs on A: B's waits.
    let mut on_b = b.stream_turn(token, &second, "short").await;
    let waiting = turn_id(&on_b);
    let status = a
        .get_json(token, &format!("/sessions/{second}/turns/{waiting}"))
        .await;
    assert_eq!(status["status"], "queued", "{status}");

    let running = turn_id(&on_a);
    assert_eq!(
        on_a.until_turn_stop().await.last().unwrap().data["stopReason"],
        "end_turn"
    );
    assert_eq!(
        on_b.until_turn_stop().await.last().unwrap().data["stopReason"],
        "end_turn"
    );
    let ordered = cluster
        .db()
        .scalar(&format!(
            "SELECT (SELECT started_at FROM turns WHERE id = {}) >= \
             (SELECT finished_at FROM turns WHERE id = {})",
            cluster.db().id(&waiting),
            cluster.db().id(&running)
        ))
        .await;
    assert_eq!(
        ordered, "true",
        "the second turn started after the first ended"
    );
}

#[tokio::test]
async fn a_turn_that_finds_no_free_slot_starts_on_another_process_with_one() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    let one = [("AGENTRY__ENGINE__MAX_CONCURRENT_TURNS", "1")];
    let a = cluster.start(&one);
    let b = cluster.start(&one);
    let busy = a.create_session(token, "slow").await;
    let waiting = a.create_session(token, "slow").await;
    let mut long = a.stream_turn(token, &busy, &"k".repeat(60)).await;
    long.next().await.unwrap();

    // A's one slot is taken: the turn posted to A runs on B, and A streams it.
    let mut moved = a.stream_turn(token, &waiting, "short").await;
    let frames = moved.until_turn_stop().await;
    assert_eq!(frames.last().unwrap().data["stopReason"], "end_turn");
    let first = a
        .get_json(token, &format!("/sessions/{busy}/turns/{}", turn_id(&long)))
        .await;
    assert_eq!(first["status"], "running", "it did not wait for A's slot");
    assert_eq!(
        a.get_json(token, &format!("/sessions/{waiting}/history?type=full"))
            .await["history"]["full"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // With both slots taken, a turn waits for either; cancelled through B, it ends.
    let third = b.create_session(token, "slow").await;
    let mut blocker = b.stream_turn(token, &third, &"k".repeat(60)).await;
    blocker.next().await.unwrap();
    let queued = a.stream_turn(token, &waiting, "later").await;
    let queued_turn = turn_id(&queued);
    let record = a
        .get_json(token, &format!("/sessions/{waiting}/turns/{queued_turn}"))
        .await;
    assert_eq!(record["status"], "queued", "{record}");
    let cancelled = cancel(&b, token, &waiting, &queued_turn).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let frames = queued.collect().await;
    assert_eq!(frames.last().unwrap().data["error"]["code"], "cancelled");
}

#[tokio::test]
async fn a_stop_asked_in_the_database_reaches_the_owner_without_its_notification() {
    let Some(cluster) = Cluster::new("").await else {
        return;
    };
    let token = &cluster.token;
    let a = cluster.start(&[]);
    let session = a.create_session(token, "slow").await;
    let mut on_a = a.stream_turn(token, &session, &"k".repeat(400)).await;
    let turn = turn_id(&on_a);
    on_a.next().await.unwrap();
    // As a cancel through another process records it, with no notification sent.
    cluster
        .db()
        .execute(&[format!(
            "UPDATE turns SET stop_requested = '{{\"code\": \"cancelled\", \"message\": \"asked elsewhere\"}}' \
             WHERE id = {}",
            cluster.db().id(&turn)
        )])
        .await;
    let asked = Instant::now();
    let rest = on_a.until_turn_stop().await;
    let stop = rest.last().unwrap();
    assert_eq!(stop.data["error"]["code"], "cancelled", "{stop:?}");
    assert_eq!(stop.data["error"]["message"], "asked elsewhere");
    // engine.lease_ms = 1000: renewed (and asked) every 200 ms.
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
}
