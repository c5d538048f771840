//! History compaction: the full history stays exact, the compacted one shrinks within the
//! budget, tool calls keep their results, and each compaction is an event.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text};

fn echo_agent(strategy: &str, budget: u64, keep_last: usize) -> String {
    format!(
        "[[agents]]\nname = \"echo\"\nprovider = \"echo\"\nchunk_size = 64\n\
         [agents.history]\nstrategy = \"{strategy}\"\nbudget_tokens = {budget}\nkeep_last = {keep_last}\n"
    )
}

async fn history(app: &TestApp, token: &str, session: &str, kind: &str) -> Vec<Value> {
    app.get(&format!("/sessions/{session}/history?type={kind}"), token)
        .await
        .body["history"][kind]
        .as_array()
        .unwrap()
        .clone()
}

async fn compactions(app: &TestApp, tenant: &str, session: &str) -> Vec<agentry::model::EventData> {
    app.state
        .store()
        .list_events(
            &tenant.parse().unwrap(),
            &session.parse().unwrap(),
            None,
            0,
            10_000,
            agentry::store::Deltas::Merged,
        )
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.data)
        .filter(|d| d.kind() == "compaction")
        .collect()
}

#[tokio::test]
async fn window_keeps_the_latest_messages_and_the_full_history_intact() {
    let app = spawn_app_on(Arc::new(TestDb::new().await), &echo_agent("window", 120, 2)).await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let path = format!("/sessions/{session}/turns");
    let mut said = Vec::new();
    for i in 0..8 {
        let text = format!("message number {i} with some padding to take up room");
        let reply = app
            .post(&path, &token, json!({"messages": [user(&text)]}))
            .await;
        assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
        said.push(text);
    }
    let full = history(&app, &token, &session, "full").await;
    assert_eq!(full.len(), 16, "the full history is exact");
    for (i, text) in said.iter().enumerate() {
        assert_eq!(full[2 * i], user(text));
    }
    let compacted = history(&app, &token, &session, "compacted").await;
    assert!(compacted.len() < full.len());
    assert_eq!(
        compacted[0]["role"], "user",
        "the window starts at a user message"
    );
    assert_eq!(compacted, full[full.len() - compacted.len()..].to_vec());
    let events = compactions(&app, &tenant, &session).await;
    assert!(!events.is_empty());
    for event in &events {
        let agentry::model::EventData::Compaction {
            tokens_before,
            tokens_after,
            ..
        } = event
        else {
            unreachable!()
        };
        assert!(tokens_after < tokens_before);
    }
}

#[tokio::test]
async fn dropping_tool_results_keeps_each_call_with_its_result() {
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        &echo_agent("drop_tool_results", 150, 2),
    )
    .await;
    let (tenant, token) = app.new_tenant().await;
    let bulky = "x".repeat(600);
    let seed = json!([
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": [{"type": "tool_use", "toolCallId": "t1", "name": "lookup", "input": {}}]},
        {"role": "tool", "toolCallId": "t1", "content": bulky},
        {"role": "assistant", "content": "found it"}
    ]);
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}, "messages": seed}))
        .await;
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("thanks")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    let compacted = history(&app, &token, &session, "compacted").await;
    assert_eq!(compacted[1]["content"][0]["toolCallId"], "t1");
    assert_eq!(
        compacted[2],
        json!({"role": "tool", "toolCallId": "t1", "content": "[tool result omitted to save space]"})
    );
    let full = history(&app, &token, &session, "full").await;
    assert_eq!(
        full[2]["content"],
        bulky.as_str(),
        "the full history keeps the result"
    );
    assert_eq!(compactions(&app, &tenant, &session).await.len(), 1);
}

#[tokio::test]
async fn a_history_that_cannot_fit_stops_the_turn_with_max_tokens() {
    let app = spawn_app_on(Arc::new(TestDb::new().await), &echo_agent("none", 20, 2)).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user(&"too long for the budget ".repeat(10))]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body["stopReason"], "max_tokens");
}

#[tokio::test]
async fn summarize_replaces_the_older_part_with_the_models_summary() {
    let server = ScriptedOpenAi::start().await;
    let config = String::from("[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nmodel = \"m\"\n")
        + "base_url = \""
        + &server.url
        + "\"\n[agents.history]\nstrategy = \"summarize\"\nbudget_tokens = 260\nkeep_last = 2\n";
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}}))
        .await;
    let path = format!("/sessions/{session}/turns");
    for i in 0..3 {
        server.push(Reply::Stream(vec![
            text(&format!("answer {i} {}", "y".repeat(300))),
            finish("stop"),
        ]));
        app.post(
            &path,
            &token,
            json!({"messages": [user(&format!("question {i}"))]}),
        )
        .await;
    }
    // The next turn is over budget: first the summary request, then the answer.
    server.push(Reply::Stream(vec![
        text("They asked three questions."),
        finish("stop"),
    ]));
    server.push(Reply::Stream(vec![text("done"), finish("stop")]));
    let reply = app
        .post(&path, &token, json!({"messages": [user("and now?")]}))
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);

    let requests = server.requests();
    let summary_request = &requests[requests.len() - 2].body["messages"];
    let last = summary_request.as_array().unwrap().last().unwrap();
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .starts_with("Summarize the conversation")
    );
    let answer_request = &requests[requests.len() - 1].body["messages"];
    assert_eq!(
        answer_request[0]["content"],
        "Summary of the earlier conversation:\nThey asked three questions."
    );
    assert_eq!(
        answer_request.as_array().unwrap().last().unwrap()["content"],
        "and now?"
    );
    let compacted = history(&app, &token, &session, "compacted").await;
    assert!(
        compacted[0]["content"]
            .as_str()
            .unwrap()
            .contains("three questions")
    );
    assert_eq!(history(&app, &token, &session, "full").await.len(), 8);
    assert_eq!(compactions(&app, &tenant, &session).await.len(), 1);
    // The summary is a model call like the others.
    let metrics = app.get("/metrics", &token).await.text;
    let calls = format!(
        "agentry_provider_calls_total{{provider=\"openai\",model=\"m\"}} {}\n",
        requests.len()
    );
    assert!(metrics.contains(&calls), "{calls}{metrics}");
}

#[tokio::test]
async fn the_budget_is_corrected_by_the_input_tokens_the_provider_reports() {
    use crate::scripted::usage;

    let server = ScriptedOpenAi::start().await;
    let config = String::from("[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nmodel = \"m\"\n")
        + "base_url = \""
        + &server.url
        + "\"\n[agents.history]\nstrategy = \"window\"\nbudget_tokens = 400\nkeep_last = 1\n";
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}}))
        .await;
    let path = format!("/sessions/{session}/turns");

    // About 160 estimated tokens, which the provider counts as far more.
    let long = "word ".repeat(120);
    server.push(Reply::Stream(vec![
        text("ok"),
        finish("stop"),
        usage(100_000, 1),
    ]));
    let reply = app
        .post(&path, &token, json!({"messages": [user(&long)]}))
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    assert!(compactions(&app, &tenant, &session).await.is_empty());
    let ratio = app
        .state
        .store()
        .get_token_ratio(&tenant.parse().unwrap(), &session.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(ratio, Some(10.0), "bounded at 10");

    // By length alone the history still fits (about 180 of 400); corrected it does not, so
    // the window drops the long message before the model sees it.
    server.push(Reply::Stream(vec![text("short"), finish("stop")]));
    let reply = app
        .post(&path, &token, json!({"messages": [user("and now?")]}))
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    let sent = server.requests()[1].body["messages"].clone();
    assert_eq!(sent, json!([{"role": "user", "content": "and now?"}]));
    let events = compactions(&app, &tenant, &session).await;
    assert_eq!(events.len(), 1);
    let agentry::model::EventData::Compaction {
        tokens_before,
        tokens_after,
        ..
    } = &events[0]
    else {
        unreachable!()
    };
    assert!(*tokens_before > 400, "{tokens_before}");
    assert!(*tokens_after <= 400, "{tokens_after}");
    assert_eq!(history(&app, &token, &session, "full").await.len(), 4);
}
