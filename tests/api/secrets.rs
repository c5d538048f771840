//! Secret options: encrypted at rest, `"***"` in every read, absent from logs, and exactly
//! recoverable by the engine.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{captured_logs, spawn_app};

#[tokio::test]
async fn a_secret_option_is_never_shown_but_decrypts_for_the_engine() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let secret = format!("sk-live-{}", uuid::Uuid::new_v4().simple());

    let session = app
        .create_session(
            &token,
            json!({
                "agent": {"name": "tooly", "options": {"api_key": secret, "model": "large"}},
                "messages": [{"role": "user", "content": "hello"}]
            }),
        )
        .await;
    let defaulted = app
        .create_session(&token, json!({"agent": {"name": "tooly"}}))
        .await;

    let mut bodies = Vec::new();
    let single = app.get(&format!("/sessions/{session}"), &token).await;
    assert_eq!(single.status, StatusCode::OK);
    assert_eq!(single.body["agent"]["options"]["api_key"], "***");
    assert_eq!(single.body["agent"]["options"]["model"], "large");
    bodies.push(single.text);
    let list = app.get("/sessions", &token).await;
    for listed in list.body["sessions"].as_array().unwrap() {
        assert_eq!(listed["agent"]["options"]["api_key"], "***");
    }
    bodies.push(list.text);
    bodies.push(
        app.get(&format!("/sessions/{session}/history?type=full"), &token)
            .await
            .text,
    );
    bodies.push(
        app.get(&format!("/admin/tenants/{tenant}"), &app.admin_token)
            .await
            .text,
    );
    bodies.push(app.get("/admin/tenants", &app.admin_token).await.text);
    bodies.push(
        app.request(reqwest::Method::GET, "/meta", None, None)
            .await
            .text,
    );
    let default_read = app.get(&format!("/sessions/{defaulted}"), &token).await;
    assert_eq!(default_read.body["agent"]["options"]["api_key"], "***");
    bodies.push(default_read.text);
    for body in &bodies {
        assert!(!body.contains(&secret), "secret leaked in {body}");
        assert!(
            !body.contains("operator-default-key"),
            "default secret leaked in {body}"
        );
    }

    // Not in the logs, at debug level.
    let logs = captured_logs();
    assert!(logs.contains(&session), "the log capture works");
    assert!(!logs.contains(&secret), "secret leaked into the logs");

    // Not in the database in plaintext.
    let tenant_id = tenant.parse().unwrap();
    let stored = app
        .state
        .store()
        .get_session(&tenant_id, &session.parse().unwrap())
        .await
        .unwrap();
    let sealed = &stored.sealed_options["api_key"];
    assert!(sealed.starts_with("v1."));
    assert!(!sealed.contains(&secret));
    assert!(!stored.options.contains_key("api_key"));

    // The engine reads it back exactly; the operator default applies when none was given.
    let options = agentry::engine::open_secret_options(app.state.secrets(), &stored).unwrap();
    assert_eq!(options["api_key"], secret);
    assert_eq!(options["model"], "large");
    assert_eq!(options["language"], "English");
    let defaulted = app
        .state
        .store()
        .get_session(&tenant_id, &defaulted.parse().unwrap())
        .await
        .unwrap();
    let options = agentry::engine::open_secret_options(app.state.secrets(), &defaulted).unwrap();
    assert_eq!(options["api_key"], "operator-default-key");
}

#[tokio::test]
async fn a_sealed_option_cannot_be_moved_to_another_session() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let a = app
        .create_session(
            &token,
            json!({"agent": {"name": "echo", "options": {"api_key": "a-key"}}}),
        )
        .await;
    let b = app
        .create_session(
            &token,
            json!({"agent": {"name": "echo", "options": {"api_key": "b-key"}}}),
        )
        .await;
    let tenant_id = tenant.parse().unwrap();
    let a = app
        .state
        .store()
        .get_session(&tenant_id, &a.parse().unwrap())
        .await
        .unwrap();
    let mut b = app
        .state
        .store()
        .get_session(&tenant_id, &b.parse().unwrap())
        .await
        .unwrap();
    b.sealed_options = a.sealed_options.clone();
    assert!(agentry::engine::open_secret_options(app.state.secrets(), &b).is_err());
}

#[tokio::test]
async fn a_turns_stored_request_hash_is_keyed_and_idempotent_retries_still_match() {
    let app = crate::helpers::spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let body = json!({"agent": {"options": {"api_key": "sk-guess-me"}},
                      "messages": [crate::helpers::user("hello")]});
    let send = |body: &serde_json::Value| {
        app.client
            .post(app.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(&token)
            .header("Idempotency-Key", "k1")
            .body(body.to_string())
            .send()
    };
    let first = send(&body).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let turn = first.headers()["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let retry = send(&body).await.unwrap();
    assert_eq!(retry.headers()["agentry-turn-id"].to_str().unwrap(), turn);
    let mut other = body.clone();
    other["messages"][0]["content"] = json!("something else");
    let reused = send(&other).await.unwrap();
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);

    let stored = app
        .db
        .scalar(&format!(
            "SELECT request_hash FROM turns WHERE id = {}",
            app.db.id(&turn)
        ))
        .await;
    // Neither the digest of the body as sent nor of the body as parsed: a reader of the
    // database cannot test guesses of a secret option against it.
    assert_eq!(stored.len(), 64);
    for unkeyed in [
        agentry::model::sha256_hex(body.to_string().as_bytes()),
        agentry::model::sha256_hex(serde_json::to_string(&body).unwrap().as_bytes()),
    ] {
        assert_ne!(stored, unkeyed);
    }
}

/// The session's options as the engine opens them (secrets decrypted).
async fn opened(
    app: &crate::helpers::TestApp,
    tenant: &str,
    session: &str,
) -> std::collections::BTreeMap<String, String> {
    let stored = app
        .state
        .store()
        .get_session(&tenant.parse().unwrap(), &session.parse().unwrap())
        .await
        .unwrap();
    agentry::engine::open_secret_options(app.state.secrets(), &stored).unwrap()
}

#[tokio::test]
async fn a_redacted_secret_sent_back_on_a_turn_keeps_the_stored_secret() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "echo", "options": {"api_key": "sk-real", "style": "plain"}}}),
        )
        .await;
    // A client sends back the options it read, changing one of them.
    let read = app.get(&format!("/sessions/{session}"), &token).await;
    let mut options = read.body["agent"]["options"].clone();
    assert_eq!(options["api_key"], "***");
    options["style"] = json!("upper");
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"agent": {"options": options}, "messages": [crate::helpers::user("hi")]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    assert_eq!(turn.body["messages"][0]["content"][0]["text"], "HI");
    let now = opened(&app, &tenant, &session).await;
    assert_eq!(now["api_key"], "sk-real");
    assert_eq!(now["style"], "upper");
    // A real value still replaces it.
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"agent": {"options": {"api_key": "sk-new"}}, "messages": [crate::helpers::user("hi")]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    assert_eq!(opened(&app, &tenant, &session).await["api_key"], "sk-new");
}

#[tokio::test]
async fn a_redacted_secret_at_creation_is_refused_naming_the_option() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let refused = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "echo", "options": {"api_key": "***", "style": "plain"}}}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("agent.options.api_key"), "{message}");
    assert!(message.contains("***"), "{message}");
    let listed = app.get("/sessions", &token).await;
    assert_eq!(listed.body["sessions"], json!([]), "no session was made");
    // A select or text option may hold the text `***`: only secrets read back redacted.
    let plain = app
        .post(
            "/sessions",
            &token,
            json!({"agent": {"name": "tooly", "options": {"language": "***"}}}),
        )
        .await;
    assert_eq!(plain.status, StatusCode::CREATED, "{}", plain.text);
}
