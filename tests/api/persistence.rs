//! A restarted server on the same database has everything: tenants, keys, sessions.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{spawn_app, spawn_app_on};

#[tokio::test]
async fn a_restarted_app_keeps_tenants_tokens_sessions_and_history() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let credential = app
        .post(
            &format!("/admin/tenants/{tenant}/credentials"),
            &app.admin_token,
            json!({}),
        )
        .await;
    let seed = json!([{"role": "user", "content": "remember me"}]);
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "echo", "options": {"api_key": "kept-secret"}}, "messages": seed}),
        )
        .await;
    let before = app.get(&format!("/sessions/{session}"), &token).await.body;
    let admin_token = app.admin_token.clone();

    let db = app.stop().await;
    let app = spawn_app_on(db, "").await;

    // Tokens signed before the restart still verify: the generated key was kept.
    let read = app.get(&format!("/sessions/{session}"), &token).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert_eq!(read.body, before);
    assert_eq!(
        app.get(&format!("/admin/tenants/{tenant}"), &admin_token)
            .await
            .status,
        StatusCode::OK
    );
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &token)
        .await;
    assert_eq!(history.body["history"]["full"], seed);
    let compacted = app
        .get(
            &format!("/sessions/{session}/history?type=compacted"),
            &token,
        )
        .await;
    assert_eq!(compacted.body["history"]["compacted"], seed);

    // Credentials still log in; secrets still decrypt with the kept key.
    let login = app
        .request(
            reqwest::Method::POST,
            "/auth/token",
            None,
            Some(&json!({
                "client_id": credential.body["client_id"],
                "client_secret": credential.body["client_secret"],
            })),
        )
        .await;
    assert_eq!(login.status, StatusCode::OK);
    let stored = app
        .state
        .store()
        .get_session(&tenant.parse().unwrap(), &session.parse().unwrap())
        .await
        .unwrap();
    let options = agentry::engine::open_secret_options(app.state.secrets(), &stored).unwrap();
    assert_eq!(options["api_key"], "kept-secret");
}

#[tokio::test]
async fn migrating_twice_applies_nothing_the_second_time() {
    let app = spawn_app().await;
    assert!(app.state.store().migrate().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_configured_secrets_key_takes_over_and_old_secrets_still_open() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "echo", "options": {"api_key": "before"}}}),
        )
        .await;
    let db = app.stop().await;
    let key = agentry::crypto::encode_key(&[7u8; 32]);
    let app = spawn_app_on(db, &format!("[secrets]\nkey = \"{key}\"\n")).await;
    let tenant_id = tenant.parse().unwrap();
    let old = app
        .state
        .store()
        .get_session(&tenant_id, &session.parse().unwrap())
        .await
        .unwrap();
    let options = agentry::engine::open_secret_options(app.state.secrets(), &old).unwrap();
    assert_eq!(options["api_key"], "before");
    let fresh = app
        .create_session(
            &token,
            json!({"agent": {"name": "echo", "options": {"api_key": "after"}}}),
        )
        .await;
    let fresh = app
        .state
        .store()
        .get_session(&tenant_id, &fresh.parse().unwrap())
        .await
        .unwrap();
    let configured = agentry::crypto::SecretBox::new([7u8; 32], []);
    let context = format!("{tenant}/{}/options/api_key", fresh.id);
    assert_eq!(
        configured
            .open(&fresh.sealed_options["api_key"], &context)
            .unwrap(),
        b"after"
    );
}
