//! AAP sessions: creation with defaults, reads, history, deletion and pagination.

use std::collections::HashSet;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_session_stores_its_configuration_and_seed_history() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let seed = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image", "url": "https://example.com/cat.png"}
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Looks like a cat."},
            {"type": "tool_use", "toolCallId": "call_1", "name": "clock", "input": {"zone": "UTC"}}
        ]},
        {"role": "tool", "toolCallId": "call_1", "content": "12:00"},
        {"role": "assistant", "content": "A cat, at noon."}
    ]);
    let session = app
        .create_session(
            &token,
            json!({
                "agent": {
                    "name": "tooly",
                    "tools": [{"name": "clock", "trust": true}, {"name": "calculator"}],
                    "options": {"language": "French"}
                },
                "messages": seed
            }),
        )
        .await;
    assert!(session.starts_with("sess_"));

    let read = app.get(&format!("/sessions/{session}"), &token).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(
        read.body["agent"],
        json!({
            "name": "tooly",
            "tools": [{"name": "clock", "trust": true}, {"name": "calculator", "trust": false}],
            "options": {"api_key": "***", "language": "French", "model": "small"}
        })
    );
    assert!(
        read.body.get("tools").is_none(),
        "no client tools were declared"
    );

    let full = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(full.status, StatusCode::OK, "{}", full.text);
    assert_eq!(full.body, json!({"history": {"full": seed}}));

    // echo declares both history types; a fresh session's histories are equal and empty.
    let echo = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    for kind in ["full", "compacted"] {
        let reply = app
            .get(&format!("/sessions/{echo}/history?type={kind}"), &token)
            .await;
        assert_eq!(reply.body, json!({"history": {kind: []}}));
    }

    let deleted = app.delete(&format!("/sessions/{session}"), &token).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    for path in [
        format!("/sessions/{session}"),
        format!("/sessions/{session}/history?type=full"),
    ] {
        let reply = app.get(&path, &token).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(reply.code(), "not_found");
    }
    assert_eq!(
        app.delete(&format!("/sessions/{session}"), &token)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn twenty_five_sessions_page_by_ten_exactly_once_in_order() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let mut created = Vec::new();
    for _ in 0..25 {
        created.push(
            app.create_session(&token, json!({"agent": {"name": "echo"}}))
                .await,
        );
    }
    created.reverse(); // newest first

    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(cursor) => format!("/sessions?limit=10&after={cursor}"),
            None => "/sessions?limit=10".to_owned(),
        };
        let page = app.get(&path, &token).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        let ids: Vec<String> = page.body["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap().to_owned())
            .collect();
        pages.push(ids.len());
        seen.extend(ids);
        // A session created while paging does not disturb the pages still to come.
        if pages.len() == 1 {
            app.create_session(&token, json!({"agent": {"name": "echo"}}))
                .await;
        }
        match page.body.get("next") {
            Some(next) => after = Some(next.as_str().unwrap().to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, vec![10, 10, 5]);
    assert_eq!(seen, created);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 25);

    let bad = app.get("/sessions?after=bm90LWEtY3Vyc29y", &token).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.code(), "invalid_query");
    let too_many = app.get("/sessions?limit=1000", &token).await;
    assert_eq!(too_many.status, StatusCode::BAD_REQUEST);
}
