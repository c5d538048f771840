//! Tokens: one whose `nbf` lies ahead is not valid yet.

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
        .store
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
