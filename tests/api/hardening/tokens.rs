//! Tokens: one whose `nbf` lies ahead is not valid yet; a revoked token, a deleted
//! credential's token and a suspended tenant's token are refused although token states are
//! cached.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_token_that_is_not_valid_yet_is_rejected() {
    let app = spawn_app().await;
    let (tenant, _) = app.new_tenant().await;
    let secret = app
        .state
        .store()
        .get_instance_key("jwt")
        .await
        .unwrap()
        .expect("a generated JWT key");
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(agentry::crypto::fingerprint(secret.as_bytes()));
    let sign = |nbf: i64| {
        let now = chrono::Utc::now().timestamp();
        let claims = json!({
            "iss": "agentry", "aud": "agentry", "sub": tenant, "role": "tenant",
            "iat": now, "exp": now + 7200, "nbf": now + nbf,
            "jti": "tok_0123456789abcdef0123456789abcdef"
        });
        jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    // The same token valid from a minute ago works: the one below fails for its nbf only.
    let valid = app.get("/sessions", &sign(-60)).await;
    assert_eq!(valid.status, StatusCode::OK, "{}", valid.text);
    let early = app.get("/sessions", &sign(3600)).await;
    assert_eq!(early.status, StatusCode::UNAUTHORIZED, "{}", early.text);
    assert_eq!(early.code(), "invalid_token");
}

/// Polls `GET /sessions` until it answers `refused`; how long that took after `since`.
async fn refused_after(
    app: &crate::helpers::TestApp,
    token: &str,
    refused: StatusCode,
    since: std::time::Instant,
) -> std::time::Duration {
    loop {
        let reply = app.get("/sessions", token).await;
        if reply.status == refused {
            return since.elapsed();
        }
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        assert!(
            since.elapsed() < std::time::Duration::from_secs(5),
            "never refused"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_token_revoked_or_a_tenant_suspended_by_another_process_is_refused_within_a_second() {
    let app = spawn_app().await;
    let (revoked, revoked_token) = app.new_tenant().await;
    let (suspended, suspended_token) = app.new_tenant().await;
    // Both tokens' states are cached by a first request.
    for token in [&revoked_token, &suspended_token] {
        assert_eq!(app.get("/sessions", token).await.status, StatusCode::OK);
    }
    // Changed in the database, as another process or the CLI changes it.
    let since = std::time::Instant::now();
    app.db
        .execute(&[
            format!(
                "UPDATE api_tokens SET revoked_at = created_at WHERE tenant_id = {}",
                app.db.id(&revoked)
            ),
            format!(
                "UPDATE tenants SET status = 'suspended' WHERE id = {}",
                app.db.id(&suspended)
            ),
        ])
        .await;
    let waited = refused_after(&app, &revoked_token, StatusCode::UNAUTHORIZED, since).await;
    assert!(waited <= std::time::Duration::from_secs(1), "{waited:?}");
    let waited = refused_after(&app, &suspended_token, StatusCode::FORBIDDEN, since).await;
    assert!(waited <= std::time::Duration::from_secs(1), "{waited:?}");
}

#[tokio::test]
async fn a_change_through_this_processs_admin_api_applies_to_the_next_request() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let login = app
        .post(
            &format!("/admin/tenants/{tenant}/credentials"),
            &app.admin_token,
            json!({}),
        )
        .await;
    let client_id = login.body["client_id"].as_str().unwrap().to_owned();
    let issued = app
        .request(
            reqwest::Method::POST,
            "/auth/token",
            None,
            Some(&json!({"client_id": client_id, "client_secret": login.body["client_secret"]})),
        )
        .await;
    assert_eq!(issued.status, StatusCode::OK, "{}", issued.text);
    let logged_in = issued.body["access_token"].as_str().unwrap().to_owned();
    for token in [&token, &logged_in, &other] {
        assert_eq!(app.get("/sessions", token).await.status, StatusCode::OK);
    }

    let deleted = app
        .delete(
            &format!("/admin/tenants/{tenant}/credentials/{client_id}"),
            &app.admin_token,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get("/sessions", &logged_in).await.status,
        StatusCode::UNAUTHORIZED
    );
    let suspended = app
        .patch(
            &format!("/admin/tenants/{tenant}"),
            &app.admin_token,
            json!({"status": "suspended"}),
        )
        .await;
    assert_eq!(suspended.status, StatusCode::OK);
    assert_eq!(
        app.get("/sessions", &token).await.status,
        StatusCode::FORBIDDEN
    );
    // Another tenant's cached state is untouched.
    assert_eq!(app.get("/sessions", &other).await.status, StatusCode::OK);
}
