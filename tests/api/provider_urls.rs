//! A tenant's option that fills part of a provider's base URL cannot send the operator's
//! key somewhere the tenant chose: it is checked for the part it fills, and a host it
//! chooses must not be inside the network unless the agent allows it.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{TestApp, TestDb, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text};

async fn app_with_templated_host(server: &ScriptedOpenAi) -> TestApp {
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let agent = |name: &str, allow: bool| {
        format!(
            "[[agents]]\nname = \"{name}\"\nprovider = \"openai\"\n\
             base_url = \"http://{{{{options.host}}}}:{port}/v1\"\n\
             api_key = \"operator-key\"\nmodel = \"m\"\ntimeout_seconds = 2\nmax_retries = 0\n\
             allow_private_base_url = {allow}\n\n\
             [[agents.options]]\nname = \"host\"\ntype = \"text\"\ndefault = \"api.example\"\n"
        )
    };
    let config = agent("chosen", false) + &agent("trusted", true);
    spawn_app_on(Arc::new(TestDb::new().await), &config).await
}

#[tokio::test]
async fn an_option_that_would_redirect_the_host_is_refused_naming_it() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_templated_host(&server).await;
    let (_, token) = app.new_tenant().await;
    for host in [
        "localhost:18604/x#",
        "evil.example@localhost/#",
        "api.example\r\nHost: evil",
        "a/b",
    ] {
        let refused = app
            .post(
                "/sessions",
                &token,
                json!({"agent": {"name": "chosen", "options": {"host": host}}}),
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{host}: {}",
            refused.text
        );
        assert_eq!(
            refused.body["error"]["field"], "agent.options.host",
            "{host}"
        );
    }
    // The same on a turn's overrides.
    let session = app
        .create_session(&token, json!({"agent": {"name": "chosen"}}))
        .await;
    let refused = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"agent": {"options": {"host": "x#"}}, "messages": [user("hi")]}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_host_an_option_chooses_inside_the_network_is_refused_unless_the_agent_allows_it() {
    let server = ScriptedOpenAi::start().await;
    let app = app_with_templated_host(&server).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "chosen", "options": {"host": "localhost"}}}),
        )
        .await;
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("hi")]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    assert_eq!(turn.body["stopReason"], "error", "{}", turn.text);
    assert_eq!(
        turn.body["error"]["code"], "provider_error",
        "{}",
        turn.text
    );
    assert!(
        turn.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("inside the network"),
        "{}",
        turn.text
    );
    assert!(
        server.requests().is_empty(),
        "the operator's key went nowhere"
    );

    // An agent that allows it reaches the same host.
    server.push(Reply::Stream(vec![text("hello"), finish("stop")]));
    let trusted = app
        .create_session(
            &token,
            json!({"agent": {"name": "trusted", "options": {"host": "localhost"}}}),
        )
        .await;
    let turn = app
        .post(
            &format!("/sessions/{trusted}/turns"),
            &token,
            json!({"messages": [user("hi")]}),
        )
        .await;
    assert_eq!(turn.body["stopReason"], "end_turn", "{}", turn.text);
    assert_eq!(server.requests().len(), 1);
}
