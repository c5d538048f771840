//! Tenant isolation: another tenant's session is indistinguishable from none at all.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn another_tenants_session_is_not_found_on_every_route() {
    let app = spawn_app().await;
    let (_, alice) = app.new_tenant().await;
    let (_, bob) = app.new_tenant().await;
    let session = app
        .create_session(
            &alice,
            json!({"agent": {"name": "echo"}, "messages": [{"role": "user", "content": "private"}]}),
        )
        .await;
    let missing = "sess_0123456789abcdef0123456789abcdef";

    let routes = |id: &str| {
        vec![
            (Method::GET, format!("/sessions/{id}"), None),
            (Method::DELETE, format!("/sessions/{id}"), None),
            (
                Method::GET,
                format!("/sessions/{id}/history?type=full"),
                None,
            ),
            (
                Method::GET,
                format!("/sessions/{id}/history?type=compacted"),
                None,
            ),
            (
                Method::POST,
                format!("/sessions/{id}/turns"),
                Some(json!({"messages": [{"role": "user", "content": "hi"}]})),
            ),
        ]
    };
    for ((method, path, body), (_, missing_path, _)) in
        routes(&session).into_iter().zip(routes(missing))
    {
        let reply = app
            .request(method.clone(), &path, Some(&bob), body.as_ref())
            .await;
        let nothing = app
            .request(method.clone(), &missing_path, Some(&bob), body.as_ref())
            .await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            reply.text
        );
        assert_eq!(
            reply.body, nothing.body,
            "{method} {path} differs from a missing session"
        );
    }

    let listed = app.get("/sessions", &bob).await;
    assert_eq!(listed.body["sessions"], json!([]));
    assert!(!listed.text.contains(&session));

    // Alice's session is untouched by Bob's attempts.
    let read = app.get(&format!("/sessions/{session}"), &alice).await;
    assert_eq!(read.status, StatusCode::OK);
    let history = app
        .get(&format!("/sessions/{session}/history?type=full"), &alice)
        .await;
    assert_eq!(history.body["history"]["full"][0]["content"], "private");
    let listed = app.get("/sessions", &alice).await;
    assert_eq!(listed.body["sessions"][0]["sessionId"], session.as_str());
}
