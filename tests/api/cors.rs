//! Browsers calling the API from another origin (`server.cors_allowed_origins`).

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, spawn_app, spawn_app_on, user};

const ALLOWED: &str = "https://app.example.com";

async fn app_allowing(origins: &str) -> TestApp {
    spawn_app_on(
        Arc::new(TestDb::new().await),
        &format!("[server]\ncors_allowed_origins = {origins}\n"),
    )
    .await
}

async fn preflight(app: &TestApp, path: &str, method: &str, origin: &str) -> reqwest::Response {
    app.client
        .request(Method::OPTIONS, app.url(path))
        .header("Origin", origin)
        .header("Access-Control-Request-Method", method)
        .header(
            "Access-Control-Request-Headers",
            "authorization, content-type, idempotency-key",
        )
        .send()
        .await
        .unwrap()
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

/// A route of each face, with the method a page would use.
const ROUTES: [(&str, &str); 8] = [
    ("/meta", "GET"),
    ("/sessions", "POST"),
    (
        "/sessions/sess_00000000000000000000000000000000/turns",
        "POST",
    ),
    ("/acp/runs", "POST"),
    ("/agentscope/process", "POST"),
    ("/admin/tenants", "POST"),
    ("/auth/token", "POST"),
    ("/healthz", "GET"),
];

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_succeeds_on_every_face_and_another_origin_is_refused() {
    let app = app_allowing(&format!("[\"{ALLOWED}\"]")).await;
    for (path, method) in ROUTES {
        let allowed = preflight(&app, path, method, ALLOWED).await;
        assert_eq!(allowed.status(), StatusCode::NO_CONTENT, "{path}");
        assert_eq!(
            header(&allowed, "access-control-allow-origin"),
            Some(ALLOWED)
        );
        assert!(
            header(&allowed, "access-control-allow-methods")
                .unwrap()
                .contains(method)
        );
        let headers = header(&allowed, "access-control-allow-headers").unwrap();
        for needed in [
            "Authorization",
            "Content-Type",
            "Idempotency-Key",
            "Last-Event-ID",
            "Agentry-Session",
        ] {
            assert!(headers.contains(needed), "{path}: {headers}");
        }
        assert_eq!(header(&allowed, "access-control-allow-credentials"), None);
        assert!(header(&allowed, "vary").unwrap().contains("Origin"));

        let other = preflight(&app, path, method, "https://evil.example.com").await;
        assert_eq!(other.status(), StatusCode::FORBIDDEN, "{path}");
        assert_eq!(header(&other, "access-control-allow-origin"), None);
        let body: Value = other.json().await.unwrap();
        assert_eq!(body["error"]["code"], "forbidden");
    }
}

#[tokio::test]
async fn a_response_to_an_allowed_origin_names_it_and_exposes_the_headers_clients_read() {
    let app = app_allowing(&format!("[\"{ALLOWED}\"]")).await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let reply = app
        .client
        .post(app.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(&token)
        .header("Origin", ALLOWED)
        .json(&json!({"messages": [user("hi")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::OK);
    assert_eq!(header(&reply, "access-control-allow-origin"), Some(ALLOWED));
    let exposed = header(&reply, "access-control-expose-headers").unwrap();
    for name in [
        "Agentry-Turn-Id",
        "Agentry-Request-Id",
        "Location",
        "Retry-After",
        "RateLimit",
        "RateLimit-Policy",
    ] {
        assert!(exposed.contains(name), "{exposed}");
    }
    assert!(header(&reply, "agentry-turn-id").is_some());
    // An error answer carries them too, so a page can read it.
    let missing = app
        .client
        .get(app.url("/sessions"))
        .header("Origin", ALLOWED)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        header(&missing, "access-control-allow-origin"),
        Some(ALLOWED)
    );
    // Another origin's page gets the answer without the header: its browser hides it.
    let other = app
        .client
        .get(app.url("/meta"))
        .bearer_auth(&token)
        .header("Origin", "https://evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&other, "access-control-allow-origin"), None);
}

#[tokio::test]
async fn no_origin_is_allowed_by_default_and_star_allows_every_origin_without_credentials() {
    let app = spawn_app().await;
    let refused = preflight(&app, "/sessions", "POST", ALLOWED).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert_eq!(header(&refused, "access-control-allow-origin"), None);

    let open = app_allowing("[\"*\"]").await;
    let any = preflight(&open, "/acp/runs", "POST", "https://any.example").await;
    assert_eq!(any.status(), StatusCode::NO_CONTENT);
    assert_eq!(header(&any, "access-control-allow-origin"), Some("*"));
    assert_eq!(header(&any, "access-control-allow-credentials"), None);
}
