//! Open event streams are capped per tenant and per client address; the next one gets 429
//! too_many_streams with Retry-After, other tenants still stream, `/healthz` answers.

use reqwest::StatusCode;
use serde_json::json;

use crate::hardening::app_with;
use crate::helpers::user;

#[tokio::test]
async fn a_tenants_streams_stop_at_its_cap_and_others_and_healthz_go_on() {
    // A client that left is noticed at the stream's next write: a keep-alive each second.
    let app = app_with(
        "[limits]\nmax_streams_per_tenant = 5\nmax_streams_per_address = 8\n\
         [engine]\nsse_keep_alive_seconds = 1\n",
    )
    .await;
    let (_, greedy) = app.new_tenant().await;
    let (_, other) = app.new_tenant().await;
    let session = app
        .create_session(&greedy, json!({"agent": {"name": "echo"}}))
        .await;
    let events = format!("/sessions/{session}/events");
    let mut open = Vec::new();
    for _ in 0..5 {
        open.push(app.stream(&events, &greedy, None).await);
    }
    let refused = app.get(&events, &greedy).await;
    assert_eq!(
        refused.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refused.text
    );
    assert_eq!(refused.code(), "too_many_streams");
    assert!(refused.headers.contains_key("retry-after"));
    // A turn that would stream is refused before it starts: the session stays idle.
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &greedy,
            json!({"stream": "delta", "messages": [user("hi")]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::TOO_MANY_REQUESTS, "{}", turn.text);
    let turns = app.get(&format!("/sessions/{session}"), &greedy).await;
    assert_eq!(turns.status, StatusCode::OK);
    let health = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    let admin = app.get("/admin/tenants", &app.admin_token).await;
    assert_eq!(admin.status, StatusCode::OK);

    // Another tenant streams, from the same address, up to the address's cap.
    let theirs = app
        .create_session(&other, json!({"agent": {"name": "echo"}}))
        .await;
    let their_events = format!("/sessions/{theirs}/events");
    for _ in 0..3 {
        open.push(app.stream(&their_events, &other, None).await);
    }
    let by_address = app.get(&their_events, &other).await;
    assert_eq!(
        by_address.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        by_address.text
    );
    assert!(by_address.text.contains("address"), "{}", by_address.text);

    // A stream whose client left gives its place back (at its next keep-alive).
    drop(open.remove(0));
    let mut reopened = None;
    for _ in 0..200 {
        let response = app
            .client
            .get(app.url(&events))
            .bearer_auth(&greedy)
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::OK {
            reopened = Some(response);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(reopened.is_some(), "the closed stream's place came back");
}
