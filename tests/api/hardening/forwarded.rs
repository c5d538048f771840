//! Forwarding headers count only from a trusted proxy, and only an http(s) scheme and a
//! well-formed host ever reach an absolute URL.

use reqwest::StatusCode;
use serde_json::json;

use super::app_with;
use crate::acp::run;
use crate::helpers::TestApp;

/// A session with one history message holding a stored part; its id.
async fn session_with_a_file(app: &TestApp, token: &str) -> String {
    let reply = run(
        app,
        token,
        json!({"agent_name": "echo", "input": [{"role": "user", "parts": [
            {"content": "see the report"},
            {"name": "report.txt", "content_type": "text/markdown", "content": "r".repeat(500)}
        ]}]}),
    )
    .await;
    assert_eq!(reply.body["status"], "completed", "{}", reply.text);
    reply.body["session_id"].as_str().unwrap().to_owned()
}

/// The session's first history URL and the stored part's URL, as the server writes them
/// for a request with `headers`.
async fn urls(
    app: &TestApp,
    token: &str,
    session: &str,
    headers: &[(&str, &str)],
) -> (String, String) {
    let get = |path: String| {
        let mut request = app.client.get(app.url(&path)).bearer_auth(token);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request
    };
    let described: serde_json::Value = get(format!("/acp/sessions/{session}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let history = described["history"][0].as_str().unwrap().to_owned();
    let response = get(format!("/acp/sessions/{session}/history/0"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let message: serde_json::Value = response.json().await.unwrap();
    let file = message["parts"][1]["content_url"]
        .as_str()
        .unwrap()
        .to_owned();
    (history, file)
}

const INLINE_LIMIT: &str = "[engine]\ninline_part_max_bytes = 64\n";

#[tokio::test]
async fn forwarding_headers_from_an_untrusted_peer_change_no_url() {
    let app = app_with(&format!(
        "{INLINE_LIMIT}[server]\ntrusted_proxies = [\"10.0.0.0/8\"]\n"
    ))
    .await;
    let (_, token) = app.new_tenant().await;
    let session = session_with_a_file(&app, &token).await;
    for forged in [
        vec![
            ("X-Forwarded-Proto", "javascript"),
            ("X-Forwarded-Host", "evil.example"),
        ],
        vec![("Forwarded", "proto=https;host=evil.example;for=10.0.0.1")],
    ] {
        let (history, file) = urls(&app, &token, &session, &forged).await;
        let base = format!("{}/", app.address);
        assert!(
            history.starts_with(&format!("{base}acp/sessions/")),
            "{history}"
        );
        assert!(file.starts_with(&format!("{base}files/file_")), "{file}");
    }
}

#[tokio::test]
async fn a_trusted_proxy_names_the_scheme_and_host_but_never_another_scheme() {
    let app = app_with(&format!(
        "{INLINE_LIMIT}[server]\ntrusted_proxies = [\"127.0.0.1\"]\n"
    ))
    .await;
    let (_, token) = app.new_tenant().await;
    let session = session_with_a_file(&app, &token).await;

    let (history, file) = urls(
        &app,
        &token,
        &session,
        &[
            ("X-Forwarded-Proto", "https"),
            ("X-Forwarded-Host", "api.example"),
        ],
    )
    .await;
    assert!(
        history.starts_with("https://api.example/acp/sessions/"),
        "{history}"
    );
    assert!(
        file.starts_with("https://api.example/files/file_"),
        "{file}"
    );

    let (history, _) = urls(
        &app,
        &token,
        &session,
        &[("Forwarded", "proto=https;host=\"api.example:8443\"")],
    )
    .await;
    assert!(
        history.starts_with("https://api.example:8443/acp/"),
        "{history}"
    );

    // Another scheme is ignored; a host that is not host[:port] falls back to Host.
    let (history, file) = urls(
        &app,
        &token,
        &session,
        &[
            ("X-Forwarded-Proto", "javascript"),
            ("X-Forwarded-Host", "evil.example/x?"),
        ],
    )
    .await;
    let base = format!("{}/", app.address);
    assert!(
        history.starts_with(&format!("{base}acp/sessions/")),
        "{history}"
    );
    assert!(file.starts_with(&format!("{base}files/file_")), "{file}");
}
