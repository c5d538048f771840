//! The errors a new user meets first: each names the field, parameter or header at fault
//! and what it must be, in the user's terms, never in the server's own type names.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestDb, captured_logs, spawn_app, spawn_app_on, user};

/// A 400 naming `field`, whose message holds every one of `words` and no Rust.
fn assert_names(reply: &crate::helpers::Reply, code: &str, field: &str, words: &[&str]) {
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
    assert_eq!(reply.code(), code, "{}", reply.text);
    assert_eq!(reply.body["error"]["field"], field, "{}", reply.text);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("{field}: ")), "{message}");
    for word in words {
        assert!(message.contains(word), "{word:?} is not in {message:?}");
    }
    for rust in ["struct", "In`", "Request", "map", "sequence", "u32"] {
        assert!(!message.contains(rust), "{rust:?} in {message:?}");
    }
}

#[tokio::test]
async fn a_misspelled_field_of_a_session_or_turn_is_refused_naming_it() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let misspelled = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo"}, "mesages": [user("Hello")]}),
        )
        .await;
    assert_names(&misspelled, "invalid_request", "mesages", &["`messages`"]);
    let listed = app.get("/sessions", &token).await;
    assert_eq!(listed.body["sessions"], json!([]), "nothing was created");

    let in_agent = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo", "option": {"style": "upper"}}}),
        )
        .await;
    assert_names(&in_agent, "invalid_request", "agent.option", &["`options`"]);
    let in_tool = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo", "tools": [{"name": "clock", "trusted": true}]}}),
        )
        .await;
    assert_names(
        &in_tool,
        "invalid_request",
        "agent.tools[0].trusted",
        &["`trust`"],
    );

    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"strem": "delta", "messages": [user("Hi")]}),
        )
        .await;
    assert_names(
        &turn,
        "invalid_request",
        "strem",
        &["`stream`", "`messages`"],
    );
}

#[tokio::test]
async fn a_wrong_type_is_described_in_json_terms_not_the_servers_types() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let agent_as_string = app
        .post("/sessions", &token, json!({"agent": "echo"}))
        .await;
    assert_names(
        &agent_as_string,
        "invalid_request",
        "agent",
        &["must be an object", "\"echo\""],
    );
    let messages_as_object = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo"}, "tools": {"name": "x"}}),
        )
        .await;
    assert_names(
        &messages_as_object,
        "invalid_request",
        "tools",
        &["must be an array"],
    );
}

#[tokio::test]
async fn a_stream_that_is_not_a_mode_names_the_modes() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    for (stream, got) in [(json!(true), "boolean `true`"), (json!("fast"), "\"fast\"")] {
        let reply = app
            .post(
                &format!("/sessions/{session}/turns"),
                &token,
                json!({"stream": stream, "messages": [user("Hi")]}),
            )
            .await;
        assert_names(
            &reply,
            "invalid_request",
            "stream",
            &[r#""none", "delta", "message""#, got],
        );
    }
}

#[tokio::test]
async fn a_query_parameter_that_does_not_parse_is_named_with_its_form() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let usage = app.get("/usage?from=yesterday", &token).await;
    assert_names(
        &usage,
        "invalid_query",
        "from",
        &["RFC 3339", "2026-11-01T00:00:00Z", "yesterday"],
    );
    let limit = app.get("/sessions?limit=ten", &token).await;
    assert_names(&limit, "invalid_query", "limit", &["whole number", "`ten`"]);
    let admin_usage = app
        .get(
            &format!("/admin/tenants/{tenant}/usage?to=tomorrow"),
            &app.admin_token,
        )
        .await;
    assert_names(
        &admin_usage,
        "invalid_query",
        "to",
        &["RFC 3339", "tomorrow"],
    );
    let fine = app
        .get(
            "/usage?from=2026-01-01T00:00:00Z&to=2100-01-01T00:00:00%2B02:00",
            &token,
        )
        .await;
    assert_eq!(fine.status, StatusCode::OK, "{}", fine.text);
}

#[tokio::test]
async fn history_without_a_type_names_the_parameter_and_the_types_the_agent_keeps() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let reply = app
        .get(&format!("/sessions/{session}/history"), &token)
        .await;
    assert_names(
        &reply,
        "invalid_query",
        "type",
        &["is required", "?type=full", "?type=compacted"],
    );
}

#[tokio::test]
async fn a_token_without_the_bearer_scheme_is_told_so() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    for (header, what) in [
        (token.clone(), "lacks the `Bearer ` scheme"),
        (format!("Token {token}"), "scheme other than `Bearer`"),
        ("Bearer ".to_owned(), "no token"),
    ] {
        let reply = app
            .client
            .get(app.url("/sessions"))
            .header("Authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
        let body: Value = reply.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_token");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(what), "{message}");
        assert!(
            message.contains("Authorization: Bearer <token>"),
            "{message}"
        );
        assert!(!message.contains(&token), "the token is not echoed");
    }
    let fine = app.get("/sessions", &token).await;
    assert_eq!(fine.status, StatusCode::OK);
}

#[tokio::test]
async fn an_a2a_1_0_method_without_the_version_header_names_the_header_and_its_value() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                         "params": {"message": crate::a2a::message("Hi")}});
    for version in [None, Some("0.3")] {
        let mut call = app.client.post(app.url("/a2a/echo")).bearer_auth(&token);
        if let Some(version) = version {
            call = call.header("A2A-Version", version);
        }
        let body: Value = call
            .json(&request)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(body["error"]["code"], -32009, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("`A2A-Version: 1.0`"), "{message}");
        assert!(!message.contains("``"), "{message}");
    }
}

#[tokio::test]
async fn acp_answers_a_missing_or_bad_token_with_a_token_code() {
    let app = spawn_app().await;
    let missing = app
        .request(reqwest::Method::GET, "/acp/agents", None, None)
        .await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(missing.body["code"], "missing_token", "{}", missing.text);
    let bad = app.get("/acp/agents", "not-a-token").await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    assert_eq!(bad.body["code"], "invalid_token", "{}", bad.text);
}

#[tokio::test]
async fn an_unknown_agent_is_refused_with_the_names_of_the_known_ones() {
    let config = "[[agents]]\nname = \"echo\"\nprovider = \"echo\"\n\n\
                  [[agents]]\nname = \"helper\"\nprovider = \"echo\"\n";
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let (_, token) = app.new_tenant().await;
    let aap = app
        .post("/sessions", &token, json!({"agent": {"name": "ecko"}}))
        .await;
    assert_names(
        &aap,
        "invalid_request",
        "agent.name",
        &["`ecko`", "`echo`, `helper`"],
    );
    let acp = app
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "ecko", "input": [{"role": "user", "parts": [{"content": "Hi"}]}]}),
        )
        .await;
    assert_eq!(acp.status, StatusCode::NOT_FOUND);
    assert_eq!(acp.body["code"], "not_found");
    assert!(
        acp.body["message"]
            .as_str()
            .unwrap()
            .contains("`echo`, `helper`"),
        "{}",
        acp.text
    );
    let agentscope = app
        .post(
            "/agentscope/agents/ecko/process",
            &token,
            json!({"input": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}),
        )
        .await;
    // AgentScope answers a stream by default: the refusal is its error event.
    assert!(agentscope.text.contains("`ecko`"), "{}", agentscope.text);
    assert!(
        agentscope.text.contains("`echo`, `helper`"),
        "{}",
        agentscope.text
    );
}

#[tokio::test]
async fn an_unreachable_provider_is_named_by_its_host_in_the_answer_and_the_log() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        "[[agents]]\nname = \"gone\"\nprovider = \"openai\"\n\
         base_url = \"http://127.0.0.1:{port}/v1/key-in-path-sk-path-secret\"\n\
         api_key = \"sk-operator-secret\"\nmodel = \"m\"\nmax_retries = 0\n"
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "gone"}}))
        .await;
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("Hi")]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["stopReason"], "error");
    let message = reply.body["error"]["message"].as_str().unwrap();
    let host = format!("127.0.0.1:{port}");
    assert!(message.contains(&host), "{message}");
    assert!(message.contains("could not be reached"), "{message}");
    for secret in ["sk-path-secret", "sk-operator-secret", "/v1"] {
        assert!(!message.contains(secret), "{message}");
    }
    // The turn's task logs its end just after its last event is durable.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let (logs, ended) = loop {
        let logs = captured_logs();
        let ended = logs
            .lines()
            .find(|line| line.contains("turn ended") && line.contains(&session))
            .map(str::to_owned);
        if let Some(ended) = ended {
            break (logs, ended);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn's end is logged"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(ended.contains(&host), "{ended}");
    assert!(!logs.contains("sk-path-secret") && !logs.contains("sk-operator-secret"));
}
