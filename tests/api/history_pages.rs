//! Histories are read a page at a time, and what one request may seed is bounded.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestDb, spawn_app, spawn_app_on, user};

#[tokio::test]
async fn a_history_is_read_page_by_page_exactly_once() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let seed: Vec<Value> = (0..250).map(|i| user(&format!("m{i}"))).collect();
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}, "messages": seed}))
        .await;
    let path = format!("/sessions/{session}/history?type=full");

    // No cursor: the first page (100) and where the next one is.
    let first = app.get(&path, &token).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.body["history"]["full"].as_array().unwrap().len(), 100);
    let next = first.body["next"].as_str().unwrap().to_owned();
    let link = first.headers["link"].to_str().unwrap();
    assert!(
        link.contains(&next) && link.ends_with("rel=\"next\""),
        "{link}"
    );

    let mut texts = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &after {
            Some(cursor) => format!("{path}&limit=7&after={cursor}"),
            None => format!("{path}&limit=7"),
        };
        let page = app.get(&url, &token).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        let messages = page.body["history"]["full"].as_array().unwrap();
        assert!(messages.len() <= 7);
        texts.extend(
            messages
                .iter()
                .map(|m| m["content"].as_str().unwrap().to_owned()),
        );
        pages += 1;
        match page.body["next"].as_str() {
            Some(cursor) => after = Some(cursor.to_owned()),
            None => break,
        }
    }
    let expected: Vec<String> = (0..250).map(|i| format!("m{i}")).collect();
    assert_eq!(texts, expected);
    assert_eq!(pages, 36);

    for bad in ["&after=bm90LWEtY3Vyc29y", "&limit=0", "&limit=1001"] {
        let refused = app.get(&format!("{path}{bad}"), &token).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{bad}: {}",
            refused.text
        );
    }
    let compacted = app
        .get(
            &format!("/sessions/{session}/history?type=compacted&limit=3"),
            &token,
        )
        .await;
    assert_eq!(compacted.status, StatusCode::OK, "{}", compacted.text);
    assert_eq!(
        compacted.body["history"]["compacted"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(compacted.body["next"].is_string());
}

#[tokio::test]
async fn a_request_may_seed_a_bounded_history() {
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[engine]\nmax_seed_messages = 5\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let seed: Vec<Value> = (0..6).map(|i| user(&format!("m{i}"))).collect();
    let refused = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo"}, "messages": seed}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.body["error"]["field"], "messages");
    let fits: Vec<Value> = (0..5).map(|i| user(&format!("m{i}"))).collect();
    app.create_session(&token, json!({"agent": {"name": "echo"}, "messages": fits}))
        .await;

    let message =
        |role: &str, text: &str| json!({"role": role, "content": [{"type": "text", "text": text}]});
    let mut input: Vec<Value> = (0..3)
        .flat_map(|i| [message("user", &format!("q{i}")), message("assistant", "a")])
        .collect();
    input.push(message("user", "now"));
    let seeded = app
        .post(
            "/agentscope/process",
            &token,
            json!({"input": input, "stream": false}),
        )
        .await;
    assert_eq!(seeded.status, StatusCode::BAD_REQUEST, "{}", seeded.text);
    assert_eq!(seeded.body["error"]["field"], "input", "{}", seeded.text);
}
