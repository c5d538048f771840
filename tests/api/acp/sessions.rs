//! ACP sessions are agentry sessions: continued across runs, described with history URLs
//! agentry serves, and shared with AAP and AgentScope.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{acp_user, assert_acp_error, output_text, run};
use std::sync::Arc;

use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on, user};

/// The path of a history URL (the URL is absolute, on the request's host).
fn path_of(app: &TestApp, url: &str) -> String {
    assert!(url.starts_with(&app.address), "{url}");
    url[app.address.len()..].to_owned()
}

#[tokio::test]
async fn a_session_continues_across_runs_and_describes_its_history() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = uuid::Uuid::new_v4().to_string();
    // A client session unknown here: acp-sdk forwards its descriptor.
    let first = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": null,
               "session": {"id": session, "history": [], "state": null},
               "input": [acp_user("turn one")]}),
    )
    .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.body["session_id"], session.as_str());
    let second = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": session, "input": [acp_user("turn two")]}),
    )
    .await;
    assert_eq!(second.body["session_id"], session.as_str());
    assert_ne!(second.body["run_id"], first.body["run_id"]);
    // A run's output is its own turn's.
    assert_eq!(output_text(&second.body), "turn two");

    let described = app.get(&format!("/acp/sessions/{session}"), &token).await;
    assert_eq!(described.status, StatusCode::OK);
    assert_eq!(described.body["id"], session.as_str());
    assert_eq!(described.body["state"], Value::Null);
    let urls: Vec<String> = described.body["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(urls.len(), 4);
    let mut messages = Vec::new();
    let mut stored = Vec::new();
    for url in &urls {
        let message = app.get(&path_of(&app, url), &token).await;
        assert_eq!(message.status, StatusCode::OK);
        // When it was stored, as the reference's timestamps are written.
        let at = message.body["created_at"].as_str().unwrap().to_owned();
        assert_eq!(message.body["completed_at"], at.as_str());
        assert!(at.ends_with('Z') && at.len() == 27, "{at}");
        stored.push(chrono::DateTime::parse_from_rfc3339(&at).unwrap());
        messages.push((
            message.body["role"].as_str().unwrap().to_owned(),
            message.body["parts"][0]["content"]
                .as_str()
                .unwrap()
                .to_owned(),
        ));
    }
    let expected = [
        ("user", "turn one"),
        ("agent/echo", "turn one"),
        ("user", "turn two"),
        ("agent/echo", "turn two"),
    ];
    assert_eq!(
        messages,
        expected.map(|(r, t)| (r.to_owned(), t.to_owned()))
    );
    assert!(stored.is_sorted(), "{stored:?}");
    let unknown = app
        .get(&format!("/acp/sessions/{}", uuid::Uuid::new_v4()), &token)
        .await;
    assert_acp_error(&unknown, StatusCode::NOT_FOUND, "not_found");
    for position in ["9", "-1", "x"] {
        let beyond = app
            .get(
                &format!("/acp/sessions/{session}/history/{position}"),
                &token,
            )
            .await;
        assert_acp_error(&beyond, StatusCode::NOT_FOUND, "not_found");
    }
    // Another agent cannot take the session over.
    let other = run(
        &app,
        &token,
        json!({"agent_name": "slow", "session_id": session, "input": [acp_user("x")]}),
    )
    .await;
    assert_acp_error(&other, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
}

#[tokio::test]
async fn a_session_started_over_aap_goes_on_over_agentscope_and_acp_and_aap_shows_it_all() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    app.stream_turn(&token, &session, json!({"messages": [user("over aap")]}))
        .await
        .collect()
        .await;
    let scope = crate::sse::SseReader::new(
        app.client
            .post(app.url("/agentscope/process"))
            .bearer_auth(&token)
            .json(&json!({"session_id": session, "input": [
                {"role": "user", "type": "message", "content": [{"type": "text", "text": "over agentscope"}]}
            ]}))
            .send()
            .await
            .unwrap(),
    )
    .collect()
    .await;
    assert_eq!(scope.last().unwrap().data["status"], "completed");
    // ACP names it by its id, or by the UUID of its id.
    let acp = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": session, "input": [acp_user("over acp")]}),
    )
    .await;
    assert_eq!(acp.body["status"], "completed", "{}", acp.text);
    let uuid = acp.body["session_id"].as_str().unwrap().to_owned();
    assert_eq!(uuid.replace('-', ""), session.trim_start_matches("sess_"));
    let again = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": uuid, "input": [acp_user("by uuid")]}),
    )
    .await;
    assert_eq!(again.body["session_id"], uuid.as_str());

    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    let texts: Vec<String> = history.body["history"]["full"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            blocks => blocks[0]["text"].as_str().unwrap().to_owned(),
        })
        .collect();
    assert_eq!(
        texts,
        [
            "over aap",
            "over aap",
            "over agentscope",
            "over agentscope",
            "over acp",
            "over acp",
            "by uuid",
            "by uuid"
        ]
    );
    let described = app.get(&format!("/acp/sessions/{uuid}"), &token).await;
    assert_eq!(described.body["history"].as_array().unwrap().len(), 8);
}

#[tokio::test]
async fn a_large_part_is_stored_once_and_its_url_is_absolute_on_the_requests_host() {
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[engine]\ninline_part_max_bytes = 64\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let report = "r".repeat(500);
    let reply = run(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [{"role": "user", "parts": [
            {"content": "see the report"},
            {"name": "report.txt", "content_type": "text/markdown", "content": report}
        ]}]}),
    )
    .await;
    assert_eq!(reply.body["status"], "completed", "{}", reply.text);
    let session = reply.body["session_id"].as_str().unwrap();
    let described = app.get(&format!("/acp/sessions/{session}"), &token).await;
    let first = described.body["history"][0].as_str().unwrap().to_owned();
    let message = app.get(&path_of(&app, &first), &token).await;
    let part = &message.body["parts"][1];
    assert_eq!(part["name"], "/report.txt");
    assert_eq!(part["content"], Value::Null);
    let url = part["content_url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/files/file_", app.address)),
        "{url}"
    );
    let served = app
        .client
        .get(url)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(served.headers()["content-type"], "text/markdown");
    assert_eq!(served.text().await.unwrap(), report);
    let hidden = app
        .client
        .get(url)
        .bearer_auth(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(hidden.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_session_id_neither_a_uuid_nor_an_agentry_id_is_refused_naming_it() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let refused = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": "abc", "input": [acp_user("x")]}),
    )
    .await;
    assert_acp_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid_input");
    assert_eq!(refused.body["data"]["field"], "session_id");
    assert!(
        refused.body["message"].as_str().unwrap().contains("`abc`"),
        "{}",
        refused.text
    );
    let forwarded = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session": {"id": "abc", "history": [], "state": null},
               "input": [acp_user("x")]}),
    )
    .await;
    assert_acp_error(
        &forwarded,
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_input",
    );
    assert_eq!(forwarded.body["data"]["field"], "session.id");
    // Nothing was created for either.
    let sessions = app.get("/sessions", &token).await;
    assert_eq!(sessions.body["sessions"], json!([]), "{}", sessions.text);
    // A UUID and an agentry id are taken as before.
    let uuid = uuid::Uuid::new_v4().to_string();
    let first = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": uuid, "input": [acp_user("x")]}),
    )
    .await;
    assert_eq!(first.body["session_id"], uuid.as_str(), "{}", first.text);
    let listed = app.get("/sessions", &token).await;
    let agentry_id = listed.body["sessions"][0]["sessionId"]
        .as_str()
        .expect(&listed.text)
        .to_owned();
    let again = run(
        &app,
        &token,
        json!({"agent_name": "echo", "session_id": agentry_id, "input": [acp_user("y")]}),
    )
    .await;
    assert_eq!(again.body["session_id"], uuid.as_str(), "{}", again.text);
}
