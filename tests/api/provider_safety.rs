//! What a tenant's options and a provider's answers must not do: leak the key, or point
//! the operator's provider settings at an address the tenant chose.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, TestDb, captured_logs, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi};

async fn app_with(agent: &str) -> TestApp {
    spawn_app_on(Arc::new(TestDb::new().await), agent).await
}

/// Every prefix of `key` of at least four characters.
fn key_prefixes(key: &str) -> Vec<&str> {
    (4..=key.len()).map(|n| &key[..n]).collect()
}

#[tokio::test]
async fn a_provider_error_echoing_the_key_at_the_cut_leaves_no_part_of_it() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with(&format!(
        "[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\n\
         model = \"m\"\napi_key = \"{{{{options.api_key}}}}\"\nmax_retries = 0\n\
         [[agents.options]]\nname = \"api_key\"\ntype = \"secret\"\ndefault = \"\"\n",
        server.url
    ))
    .await;
    let (_, token) = app.new_tenant().await;
    let key = format!("zq-leak-{}", uuid::Uuid::new_v4().simple());
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "options": {"api_key": key}}}),
        )
        .await;
    // The key starts 10 characters before the 200-character cut.
    let message = format!("{}key={key} is not valid", "x".repeat(186));
    server.push(Reply::Status(401, json!({"error": {"message": message}})));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("hi")]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["stopReason"], "error");
    let turn = reply.headers["agentry-turn-id"].to_str().unwrap();
    let record = app
        .get(&format!("/sessions/{session}/turns/{turn}"), &token)
        .await;
    let error = record.body["error"]["message"].as_str().unwrap().to_owned();
    assert!(error.contains("401"), "{error}");
    let events = app
        .get(&format!("/sessions/{session}/turns/{turn}/events"), &token)
        .await
        .text;
    let logs = captured_logs();
    for piece in key_prefixes(&key) {
        assert!(!error.contains(piece), "the error holds `{piece}`: {error}");
        assert!(!events.contains(piece), "the events hold `{piece}`");
        assert!(!logs.contains(piece), "the logs hold `{piece}`");
        assert!(!reply.text.contains(piece), "the reply holds `{piece}`");
    }
}
