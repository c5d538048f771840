//! U+0000 on both backends (PostgreSQL refuses it in text): names, ids and keys holding it
//! are refused naming the field, never a 500; content carries U+FFFD in its place, stored
//! and streamed alike, and a session with it goes on.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::acp::acp_user;
use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

const NUL: &str = "a\u{0}b";
const STORED: &str = "a\u{fffd}b";

async fn full_history(app: &TestApp, token: &str, session: &str) -> Vec<Value> {
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), token)
        .await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.text);
    history.body["history"]["full"].as_array().unwrap().clone()
}

#[tokio::test]
async fn names_ids_and_keys_with_nul_are_refused_naming_the_field() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let refused = |reply: &crate::helpers::Reply, field: &str| {
        assert!(
            reply.status.is_client_error(),
            "{}: {}",
            reply.status,
            reply.text
        );
        assert!(
            reply.text.contains(field),
            "the error names `{field}`: {}",
            reply.text
        );
    };
    // AAP: an option's value, a client tool's description.
    let option = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "tooly", "options": {"language": NUL}}}),
        )
        .await;
    refused(&option, "agent.options.language");
    let tool = json!({"name": "t", "description": NUL, "parameters": {"type": "object"}});
    let described = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo"}, "tools": [tool]}),
        )
        .await;
    refused(&described, "tools[0]");
    // AgentScope: its session key and its request id.
    let keyed = app
        .post(
            "/agentscope/process",
            &token,
            json!({"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                   "session_id": NUL, "stream": false}),
        )
        .await;
    refused(&keyed, "session_id");
    let id = app
        .post(
            "/agentscope/process",
            &token,
            json!({"input": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                   "id": NUL, "stream": false}),
        )
        .await;
    refused(&id, "id");
    // ACP: a session key that is no UUID.
    let acp = app
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "echo", "session_id": NUL, "input": [acp_user("hi")]}),
        )
        .await;
    refused(&acp, "session_id");
    // A credential's and a token's name, through the admin API.
    let (tenant, _) = app.new_tenant().await;
    for what in ["credentials", "tokens"] {
        let named = app
            .post(
                &format!("/admin/tenants/{tenant}/{what}"),
                &app.admin_token,
                json!({"name": NUL}),
            )
            .await;
        assert_eq!(
            named.status,
            StatusCode::BAD_REQUEST,
            "{what}: {}",
            named.text
        );
        assert_eq!(named.body["error"]["field"], "name", "{what}");
    }
    for path in [
        format!("/admin/tenants/{tenant}/credentials/cred_%00"),
        format!("/admin/tenants/{tenant}/tokens/tok_%00"),
    ] {
        let missing = app.delete(&path, &app.admin_token).await;
        assert_eq!(
            missing.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            missing.text
        );
    }
    // Keys in paths name nothing.
    for path in [
        "/agentscope/sessions/a%00b/messages",
        "/agentscope/responses/a%00b/events",
        "/acp/sessions/a%00b",
        "/sessions/sess_%00/history?type=full",
    ] {
        let missing = app.get(path, &token).await;
        assert_eq!(
            missing.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            missing.text
        );
    }
}

#[tokio::test]
async fn content_with_nul_is_stored_with_a_replacement_on_every_face() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    // AAP: a seed and a turn.
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "echo"}, "messages": [user(NUL)]}),
        )
        .await;
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user(NUL)]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    assert!(turn.text.contains(STORED), "{}", turn.text);
    let history = full_history(&app, &token, &session).await;
    let texts: Vec<String> = history.iter().map(|m| m["content"].to_string()).collect();
    assert_eq!(history.len(), 3, "{texts:?}");
    assert!(texts.iter().all(|t| t.contains(STORED)), "{texts:?}");
    // The live stream and its replay agree.
    let mut live = app
        .stream_turn(
            &token,
            &session,
            json!({"stream": "delta", "messages": [user(NUL)]}),
        )
        .await;
    let live = live.until_turn_stop().await;
    let replayed = app
        .stream(
            &format!("/sessions/{session}/events"),
            &token,
            Some(live[0].id.unwrap() - 1),
        )
        .await
        .until_turn_stop()
        .await;
    assert_eq!(live, replayed);
    assert!(live.iter().any(|f| f.data.to_string().contains(STORED)));
    // AgentScope and ACP input.
    let scope = app
        .post(
            "/agentscope/process",
            &token,
            json!({"input": [{"role": "user", "content": [{"type": "text", "text": NUL}]}],
                   "stream": false}),
        )
        .await;
    assert_eq!(scope.status, StatusCode::OK, "{}", scope.text);
    assert!(scope.text.contains(STORED), "{}", scope.text);
    let acp = app
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "echo", "input": [acp_user(NUL)]}),
        )
        .await;
    assert_eq!(acp.status, StatusCode::OK, "{}", acp.text);
    assert_eq!(acp.body["status"], "completed", "{}", acp.text);
    assert!(acp.text.contains(STORED), "{}", acp.text);
}

#[tokio::test]
async fn a_model_output_and_a_tool_call_with_nul_leave_the_session_usable() {
    let server = ScriptedOpenAi::start().await;
    let config = format!(
        "[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\n\
         timeout_seconds = 2\nmax_retries = 0\n",
        server.url
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    let lookup = json!({"name": "lookup", "description": "d", "parameters": {"type": "object"}});
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}, "tools": [lookup]}))
        .await;
    let path = format!("/sessions/{session}/turns");
    // The model writes NUL in its text and in a tool call's arguments.
    server.push(Reply::Stream(vec![
        text("said a\u{0}b"),
        tool_fragment(0, Some("c1"), Some("lookup"), r#"{"q": "x\u0000y"}"#),
        finish("tool_calls"),
    ]));
    let first = app
        .post(&path, &token, json!({"messages": [user("go")]}))
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.body["stopReason"], "tool_use", "{}", first.text);
    // Its result, with NUL, answers the call; the model answers with NUL again.
    server.push(Reply::Stream(vec![text("done \u{0}"), finish("stop")]));
    let answered = app
        .post(
            &path,
            &token,
            json!({"messages": [{"role": "tool", "toolCallId": "c1", "content": NUL}]}),
        )
        .await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.body["stopReason"], "end_turn", "{}", answered.text);
    let history = full_history(&app, &token, &session).await;
    let stored = serde_json::to_string(&history).unwrap();
    assert!(!stored.contains("\\u0000"), "{stored}");
    assert!(
        stored.contains("said a\u{fffd}b") && stored.contains("x\u{fffd}y"),
        "{stored}"
    );
    assert!(
        stored.contains(STORED) && stored.contains("done \u{fffd}"),
        "{stored}"
    );
    // Not wedged: the next message is taken.
    server.push(Reply::Stream(vec![text("again"), finish("stop")]));
    let next = app
        .post(&path, &token, json!({"messages": [user("more")]}))
        .await;
    assert_eq!(next.status, StatusCode::OK, "{}", next.text);
    assert_eq!(next.body["stopReason"], "end_turn", "{}", next.text);
}
