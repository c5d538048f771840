//! The routes that report a tenant's own things: a turn's stored events (`/log`), its runs
//! (`/runs`), its usage per day (`/usage`) and its quotas with what is left (`/quotas`).

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::acp::acp_user;
use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on, user};
use crate::openapi::{check, document};

async fn echo_turn(app: &TestApp, token: &str, text: &str) -> (String, String) {
    let session = app
        .create_session(token, json!({"agent": {"name": "echo"}}))
        .await;
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            token,
            json!({"messages": [user(text)]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    let turn = reply.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    (session, turn)
}

fn event_ids(events: &Value) -> Vec<i64> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_turns_log_lists_its_stored_events_with_the_ids_its_stream_uses() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let text = "A reply long enough to come in several deltas of the echo.";
    let (session, turn) = echo_turn(&app, &token, text).await;

    let log = app
        .get(&format!("/sessions/{session}/turns/{turn}/log"), &token)
        .await;
    assert_eq!(log.status, StatusCode::OK, "{}", log.text);
    let described = document(&app).await;
    let route = "/sessions/{session_id}/turns/{turn_id}/log";
    check(&described, "get", route, &log);
    assert!(log.body.get("next").is_none(), "one page: {}", log.text);
    let events = log.body["events"].as_array().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"turn_start"));
    assert_eq!(kinds.last(), Some(&"turn_stop"));
    assert!(kinds.contains(&"message_start") && kinds.contains(&"message_stop"));
    let ids = event_ids(&log.body["events"]);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let streamed: String = events
        .iter()
        .filter(|e| e["kind"] == "text_delta")
        .map(|e| e["data"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, text);
    assert!(events.iter().all(|e| e["createdAt"].is_string()));
    assert_eq!(
        events.last().unwrap()["data"]["stopReason"],
        "end_turn",
        "{}",
        log.text
    );

    // The deltas are listed one by one, with the ids a delta stream gives them.
    let frames = app
        .stream(
            &format!("/sessions/{session}/turns/{turn}/events?stream=delta"),
            &token,
            None,
        )
        .await
        .collect()
        .await;
    let stream_ids: Vec<i64> = frames.iter().filter_map(|f| f.id).collect();
    assert!(stream_ids.len() >= 3, "{stream_ids:?}");
    assert!(
        stream_ids.iter().all(|id| ids.contains(id)),
        "{stream_ids:?} in {ids:?}"
    );
    let record = app
        .get(&format!("/sessions/{session}/turns/{turn}"), &token)
        .await;
    assert_eq!(ids.first(), record.body["firstSeq"].as_i64().as_ref());
    assert_eq!(ids.last(), record.body["lastSeq"].as_i64().as_ref());

    // A page of one stored row at a time, after any id: the pages hold every event after
    // it once, and `next` is there while the turn has more.
    let mut after = ids[1];
    let mut paged: Vec<i64> = Vec::new();
    let page = loop {
        let page = app
            .get(
                &format!("/sessions/{session}/turns/{turn}/log?after={after}&limit=1"),
                &token,
            )
            .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        let got = event_ids(&page.body["events"]);
        assert!(!got.is_empty(), "{}", page.text);
        paged.extend(&got);
        let last = *got.last().unwrap();
        let more = last < *ids.last().unwrap();
        assert_eq!(
            page.body["next"].as_i64(),
            more.then_some(last),
            "{}",
            page.text
        );
        if !more {
            break page;
        }
        after = last;
    };
    assert_eq!(paged, ids[2..]);

    for bad in ["after=-1", "limit=0", "limit=1001", "after=x"] {
        let reply = app
            .get(
                &format!("/sessions/{session}/turns/{turn}/log?{bad}"),
                &token,
            )
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            reply.text
        );
        check(&described, "get", route, &reply);
    }
    check(&described, "get", route, &page);
    let (_, other) = app.new_tenant().await;
    let hidden = app
        .get(&format!("/sessions/{session}/turns/{turn}/log"), &other)
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    assert_eq!(hidden.code(), "not_found");
    check(&described, "get", route, &hidden);
}

#[tokio::test]
async fn a_tenant_lists_its_runs_with_their_turns() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let mut acp_ids = Vec::new();
    for text in ["first", "second"] {
        let run = app
            .post(
                "/acp/runs",
                &token,
                json!({"agent_name": "echo", "input": [acp_user(text)], "mode": "sync"}),
            )
            .await;
        assert_eq!(run.status, StatusCode::OK, "{}", run.text);
        acp_ids.push(run.body["run_id"].as_str().unwrap().replace('-', ""));
    }
    let list = app.get("/runs", &token).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.text);
    let described = document(&app).await;
    check(&described, "get", "/runs", &list);
    let runs = list.body["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{}", list.text);
    // Most recently changed first: the second run, then the first.
    for (run, acp_id) in runs.iter().zip(acp_ids.iter().rev()) {
        assert_eq!(run["runId"], format!("run_{acp_id}"), "{}", list.text);
        assert_eq!(run["status"], "completed");
        assert_eq!(run["agent"], "echo");
        let turns = run["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 1);
        let turn = app
            .get(
                &format!(
                    "/sessions/{}/turns/{}",
                    run["sessionId"].as_str().unwrap(),
                    turns[0].as_str().unwrap()
                ),
                &token,
            )
            .await;
        assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
        assert_eq!(turn.body["status"], "completed");
    }

    let page = app.get("/runs?limit=1", &token).await;
    assert_eq!(page.body["runs"][0]["runId"], runs[0]["runId"]);
    let next = page.body["next"].as_str().expect("a next page");
    let rest = app
        .get(&format!("/runs?limit=1&after={next}"), &token)
        .await;
    assert_eq!(
        rest.body["runs"][0]["runId"], runs[1]["runId"],
        "{}",
        rest.text
    );
    assert!(rest.body.get("next").is_none(), "{}", rest.text);

    let failed = app.get("/runs?status=failed", &token).await;
    assert_eq!(failed.body["runs"], json!([]));
    for bad in ["status=done", "limit=0", "limit=101", "after=nonsense"] {
        let reply = app.get(&format!("/runs?{bad}"), &token).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            reply.text
        );
        check(&described, "get", "/runs", &reply);
    }
    let (_, other) = app.new_tenant().await;
    assert_eq!(app.get("/runs", &other).await.body["runs"], json!([]));
    let admin = app.get("/runs", &app.admin_token).await;
    assert_eq!(admin.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_tenant_reads_its_usage_per_day_and_its_quotas() {
    let app = spawn_app_on(Arc::new(TestDb::new().await), "").await;
    let (tenant, token) = app.new_tenant().await;
    echo_turn(&app, &token, "one").await;
    echo_turn(&app, &token, "two, a little longer").await;

    let usage = app.get("/usage", &token).await;
    assert_eq!(usage.status, StatusCode::OK, "{}", usage.text);
    let described = document(&app).await;
    check(&described, "get", "/usage", &usage);
    assert_eq!(usage.body["turns"], 2);
    let days = usage.body["days"].as_array().unwrap();
    assert_eq!(days.len(), 1, "{}", usage.text);
    let today = chrono::Utc::now().date_naive().to_string();
    assert_eq!(days[0]["date"], today);
    assert_eq!(days[0]["turns"], 2);
    for field in ["input_tokens", "output_tokens", "tool_calls", "wall_ms"] {
        assert_eq!(days[0][field], usage.body[field], "{field}");
    }
    let tokens = usage.body["input_tokens"].as_u64().unwrap()
        + usage.body["output_tokens"].as_u64().unwrap();
    // The admin API reports the same.
    let admin = app
        .get(&format!("/admin/tenants/{tenant}/usage"), &app.admin_token)
        .await;
    assert_eq!(admin.body["days"], usage.body["days"]);
    check(
        &described,
        "get",
        "/admin/tenants/{tenant_id}/usage",
        &admin,
    );
    // A window without turns.
    let empty = app
        .get(
            "/usage?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z",
            &token,
        )
        .await;
    assert_eq!(empty.body["turns"], 0);
    assert_eq!(empty.body["days"], json!([]));
    let backwards = app
        .get(
            "/usage?from=2020-01-02T00:00:00Z&to=2020-01-01T00:00:00Z",
            &token,
        )
        .await;
    assert_eq!(backwards.status, StatusCode::BAD_REQUEST);
    check(&described, "get", "/usage", &backwards);

    let quotas = app.get("/quotas", &token).await;
    assert_eq!(quotas.status, StatusCode::OK, "{}", quotas.text);
    check(&described, "get", "/quotas", &quotas);
    assert_eq!(quotas.body["quotas"]["tokens_per_day"], Value::Null);
    assert_eq!(quotas.body["remaining"]["tokens_per_day"], Value::Null);
    assert_eq!(quotas.body["used"]["tokens_per_day"], tokens);
    assert_eq!(quotas.body["used"]["stored_sessions"], 2);

    let set = app
        .patch(
            &format!("/admin/tenants/{tenant}/quotas"),
            &app.admin_token,
            json!({"tokens_per_day": 100_000, "stored_sessions": 5, "requests_per_minute": 600}),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    let quotas = app.get("/quotas", &token).await;
    assert_eq!(quotas.body["quotas"]["tokens_per_day"], 100_000);
    assert_eq!(quotas.body["remaining"]["tokens_per_day"], 100_000 - tokens);
    assert_eq!(quotas.body["remaining"]["stored_sessions"], 3);
    let left = quotas.body["remaining"]["requests_per_minute"]
        .as_u64()
        .unwrap();
    assert!(left > 0 && left <= 600, "{}", quotas.text);
    assert_eq!(quotas.body["remaining"]["concurrent_turns"], Value::Null);
    check(&described, "get", "/quotas", &quotas);

    let forbidden = app.get("/quotas", &app.admin_token).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);
}
