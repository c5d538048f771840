//! Token verification: every way a token can be wrong is a 401, the wrong kind a 403.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

/// The key the app signs with (generated on first start and stored).
async fn signing_secret(app: &TestApp) -> String {
    app.state
        .store()
        .get_instance_key("jwt")
        .await
        .unwrap()
        .expect("a generated JWT key")
}

fn sign(secret: &str, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(
        &header,
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn claims(tenant: &str, exp_offset: i64) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({
        "iss": "agentry", "aud": "agentry", "sub": tenant, "role": "tenant",
        "iat": now, "exp": now + exp_offset,
        "jti": "tok_0123456789abcdef0123456789abcdef"
    })
}

#[tokio::test]
async fn every_kind_of_bad_token_is_rejected_with_401() {
    let app = spawn_app().await;
    let (tenant, good) = app.new_tenant().await;
    let secret = signing_secret(&app).await;
    let kid = agentry::crypto::fingerprint(secret.as_bytes());

    // A token forged with the real key and well-formed claims works: the cases below fail
    // for the one reason each names.
    let forged_ok = sign(&secret, &kid, &claims(&tenant, 600));
    assert_eq!(
        app.get("/sessions", &forged_ok).await.status,
        StatusCode::OK
    );

    let mut wrong_audience = claims(&tenant, 600);
    wrong_audience["aud"] = json!("someone-else");
    let mut wrong_issuer = claims(&tenant, 600);
    wrong_issuer["iss"] = json!("someone-else");
    let mut unknown_tenant = claims("ten_0123456789abcdef0123456789abcdef", 600);
    unknown_tenant["role"] = json!("tenant");
    let mut no_exp = claims(&tenant, 600);
    no_exp.as_object_mut().unwrap().remove("exp");

    let none_header =
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT", "kid": kid}).to_string());
    let none_payload = URL_SAFE_NO_PAD.encode(claims(&tenant, 600).to_string());
    let alg_none = format!("{none_header}.{none_payload}.");

    let mut hs512_header = Header::new(Algorithm::HS512);
    hs512_header.kid = Some(kid.clone());
    let other_algorithm = jsonwebtoken::encode(
        &hs512_header,
        &claims(&tenant, 600),
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap();

    let cases = [
        ("expired", sign(&secret, &kid, &claims(&tenant, -3600))),
        (
            "wrong signature",
            sign(
                "another-secret-another-secret-another",
                &kid,
                &claims(&tenant, 600),
            ),
        ),
        (
            "unknown kid",
            sign(&secret, "0000000000000000", &claims(&tenant, 600)),
        ),
        ("alg none", alg_none),
        ("other algorithm", other_algorithm),
        ("wrong audience", sign(&secret, &kid, &wrong_audience)),
        ("wrong issuer", sign(&secret, &kid, &wrong_issuer)),
        ("unknown tenant", sign(&secret, &kid, &unknown_tenant)),
        ("no exp", sign(&secret, &kid, &no_exp)),
        ("garbage", "not-a-jwt".to_owned()),
        ("tampered", format!("{good}x")),
    ];
    for (what, token) in cases {
        let reply = app.get("/sessions", &token).await;
        assert_eq!(
            reply.status,
            StatusCode::UNAUTHORIZED,
            "{what}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "invalid_token", "{what}");
        assert_eq!(reply.headers["www-authenticate"], "Bearer", "{what}");
    }

    let missing = app.request(Method::GET, "/sessions", None, None).await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(missing.code(), "missing_token");
    let basic = app
        .client
        .get(app.url("/sessions"))
        .basic_auth("admin", Some("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn revoked_api_keys_stop_working_at_once() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let issued = app
        .post(
            &format!("/admin/tenants/{tenant}/tokens"),
            &app.admin_token,
            json!({}),
        )
        .await;
    let key = issued.body["token"].as_str().unwrap();
    let jti = issued.body["jti"].as_str().unwrap();
    assert_eq!(app.get("/sessions", key).await.status, StatusCode::OK);
    let revoke = app
        .delete(
            &format!("/admin/tenants/{tenant}/tokens/{jti}"),
            &app.admin_token,
        )
        .await;
    assert_eq!(revoke.status, StatusCode::NO_CONTENT);
    let reply = app.get("/sessions", key).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(reply.code(), "invalid_token");
    // Revoking again is harmless; an unknown jti is not found; other tokens still work.
    let again = app
        .delete(
            &format!("/admin/tenants/{tenant}/tokens/{jti}"),
            &app.admin_token,
        )
        .await;
    assert_eq!(again.status, StatusCode::NO_CONTENT);
    let unknown = app
        .delete(
            &format!("/admin/tenants/{tenant}/tokens/tok_0123456789abcdef0123456789abcdef"),
            &app.admin_token,
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/sessions", &token).await.status, StatusCode::OK);
}

#[tokio::test]
async fn tenant_tokens_are_forbidden_on_every_admin_route() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let t = format!("/admin/tenants/{tenant}");
    let routes = [
        (Method::GET, "/admin/tenants".to_owned()),
        (Method::POST, "/admin/tenants".to_owned()),
        (Method::GET, t.clone()),
        (Method::PATCH, t.clone()),
        (Method::DELETE, t.clone()),
        (Method::GET, format!("{t}/credentials")),
        (Method::POST, format!("{t}/credentials")),
        (
            Method::DELETE,
            format!("{t}/credentials/cred_0123456789abcdef0123456789abcdef"),
        ),
        (Method::GET, format!("{t}/tokens")),
        (Method::POST, format!("{t}/tokens")),
        (
            Method::DELETE,
            format!("{t}/tokens/tok_0123456789abcdef0123456789abcdef"),
        ),
    ];
    for (method, path) in routes {
        let body = json!({"name": "x", "status": "suspended"});
        let reply = app
            .request(method.clone(), &path, Some(&token), Some(&body))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{method} {path}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "forbidden");
        let anonymous = app.request(method.clone(), &path, None, Some(&body)).await;
        assert_eq!(
            anonymous.status,
            StatusCode::UNAUTHORIZED,
            "{method} {path}"
        );
    }
    // Nothing changed.
    let tenant_now = app.get(&t, &app.admin_token).await;
    assert_eq!(tenant_now.body["status"], "active");
    // And an admin token is not a tenant token.
    let reply = app.get("/sessions", &app.admin_token).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_suspended_tenant_is_refused_until_reactivated() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let credential = app
        .post(
            &format!("/admin/tenants/{tenant}/credentials"),
            &app.admin_token,
            json!({}),
        )
        .await;
    let login = json!({
        "client_id": credential.body["client_id"],
        "client_secret": credential.body["client_secret"],
    });
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;

    let suspended = app
        .patch(
            &format!("/admin/tenants/{tenant}"),
            &app.admin_token,
            json!({"status": "suspended"}),
        )
        .await;
    assert_eq!(suspended.body["status"], "suspended");
    for path in ["/sessions".to_owned(), format!("/sessions/{session}")] {
        let reply = app.get(&path, &token).await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{path}");
        assert_eq!(reply.code(), "tenant_suspended");
    }
    let refused = app
        .request(Method::POST, "/auth/token", None, Some(&login))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "tenant_suspended");

    app.patch(
        &format!("/admin/tenants/{tenant}"),
        &app.admin_token,
        json!({"status": "active"}),
    )
    .await;
    assert_eq!(
        app.get(&format!("/sessions/{session}"), &token)
            .await
            .status,
        StatusCode::OK
    );
    let login = app
        .request(Method::POST, "/auth/token", None, Some(&login))
        .await;
    assert_eq!(login.status, StatusCode::OK);
}

#[tokio::test]
async fn admin_login_is_disabled_without_an_admin_secret() {
    let db = std::sync::Arc::new(crate::helpers::TestDb::new().await);
    let settings = crate::helpers::test_settings(&db, "[auth]\nadmin_secret = \"\"\n");
    let app = agentry::App::build(settings).await.unwrap();
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());
    for secret in ["", "anything"] {
        let reply = reqwest::Client::new()
            .post(format!("{address}/auth/token"))
            .json(&json!({"client_id": "admin", "client_secret": secret}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), StatusCode::UNAUTHORIZED);
    }
}
