//! Webhooks: signed deliveries of turn events, retries, ordering, disabling, SSRF refusal,
//! and deliveries that survive a crash or are shared by several processes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::helpers::{TestApp, TestDb, spawn_app_on, user};
use crate::process::Deployment;

/// Lets endpoints on this machine's loopback receive, and retries quickly.
const LOOPBACK: &str = "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1\"]\n\
     retry_initial_delay_ms = 50\nretry_max_delay_ms = 200\npoll_interval_ms = 100\n\
     timeout_seconds = 5\n";

/// One request a receiver got.
#[derive(Debug, Clone)]
struct Received {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }

    /// Verifies the request as Standard Webhooks says a receiver should: the timestamp is
    /// recent, and one of the signatures is HMAC-SHA256 over `id.timestamp.body` keyed with
    /// the secret's decoded bytes.
    fn assert_signed_with(&self, secret: &str) {
        let sent: i64 = self.timestamp.parse().expect("a unix timestamp");
        let now = chrono::Utc::now().timestamp();
        assert!((now - sent).abs() < 300, "a stale timestamp: {sent}");
        let key = STANDARD
            .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
            .unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(format!("{}.{}.{}", self.id, self.timestamp, self.body).as_bytes());
        let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
        assert!(
            self.signature.split(' ').any(|s| s == expected),
            "no signature of {secret:.10}… in {:?}",
            self.signature
        );
    }
}

#[derive(Default)]
struct Inbox {
    received: Mutex<Vec<Received>>,
    /// Statuses of the next answers (then 200).
    statuses: Mutex<VecDeque<u16>>,
    /// Whether the next request is held until `release`.
    hold_next: AtomicBool,
    release: tokio::sync::Notify,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// A webhook receiver on 127.0.0.1 that records what it gets.
struct Receiver {
    url: String,
    inbox: Arc<Inbox>,
    _server: actix_web::dev::ServerHandle,
}

async fn receive(inbox: web::Data<Inbox>, request: HttpRequest, body: web::Bytes) -> HttpResponse {
    let now = inbox.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    inbox.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    inbox.received.lock().unwrap().push(Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body: String::from_utf8(body.to_vec()).unwrap(),
    });
    if inbox.hold_next.swap(false, Ordering::SeqCst) {
        inbox.release.notified().await;
    }
    let status = inbox.statuses.lock().unwrap().pop_front().unwrap_or(200);
    inbox.in_flight.fetch_sub(1, Ordering::SeqCst);
    // A redirect (307 keeps the POST) back here would arrive as one more request.
    let location = format!(
        "http://{}{}",
        request.connection_info().host(),
        request.path()
    );
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap())
        .insert_header(("Location", location))
        .body("secret-looking response body")
}

impl Receiver {
    async fn start() -> Receiver {
        Receiver::on(std::net::TcpListener::bind("127.0.0.1:0").unwrap())
    }

    fn on(listener: std::net::TcpListener) -> Receiver {
        let inbox = Arc::new(Inbox::default());
        let data = web::Data::from(inbox.clone());
        let port = listener.local_addr().unwrap().port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/hook", web::post().to(receive))
        })
        .workers(2)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            inbox,
            _server: handle,
        }
    }

    fn received(&self) -> Vec<Received> {
        self.inbox.received.lock().unwrap().clone()
    }

    /// Waits (up to 30 s) until `count` requests arrived.
    async fn wait_for(&self, count: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let received = self.received();
            if received.len() >= count {
                return received;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {count} requests arrived",
                received.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// An app on a fresh database whose tenants may target loopback receivers.
async fn app_with(extra: &str) -> TestApp {
    spawn_app_on(Arc::new(TestDb::new().await), extra).await
}

/// Registers an endpoint; returns its id and secret.
async fn register(app: &TestApp, token: &str, url: &str) -> (String, String) {
    let reply = app.post("/webhooks", token, json!({"url": url})).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    (
        reply.body["id"].as_str().unwrap().to_owned(),
        reply.body["secret"].as_str().unwrap().to_owned(),
    )
}

/// Runs one turn to its end; returns its id.
async fn run_turn(app: &TestApp, token: &str, session: &str, text: &str) -> String {
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            token,
            json!({"stream": "none", "messages": [user(text)]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    reply.headers["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// Polls `path` (up to 30 s) until `done` holds of its body; returns the body.
async fn poll(app: &TestApp, token: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reply = app.get(path, token).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        if done(&reply.body) {
            return reply.body;
        }
        assert!(Instant::now() < deadline, "never reached: {}", reply.text);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_completed_turn_is_delivered_once_signed() {
    let receiver = Receiver::start().await;
    let app = app_with(LOOPBACK).await;
    let (tenant, token) = app.new_tenant().await;
    let (endpoint, secret) = register(&app, &token, &receiver.url).await;
    assert!(secret.starts_with("whsec_"));
    // The secret is shown once, at creation.
    let shown = app.get(&format!("/webhooks/{endpoint}"), &token).await;
    assert_eq!(shown.status, StatusCode::OK);
    assert!(!shown.text.contains(&secret[6..]), "{}", shown.text);
    assert_eq!(shown.body["enabled"], true);

    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let turn = run_turn(&app, &token, &session, "hello").await;

    let received = receiver.wait_for(1).await;
    received[0].assert_signed_with(&secret);
    assert!(received[0].id.starts_with("msg_"), "{}", received[0].id);
    let body = received[0].json();
    assert_eq!(body["type"], "turn.completed");
    assert_eq!(body["data"]["turn_id"], turn);
    assert_eq!(body["data"]["session_id"], session);
    assert_eq!(body["data"]["tenant_id"], tenant);
    assert_eq!(body["data"]["agent"], "echo");
    assert_eq!(body["data"]["status"], "completed");
    assert_eq!(body["data"]["stop_reason"], "end_turn");
    assert!(body["data"]["usage"].is_object());

    let deliveries = poll(
        &app,
        &token,
        &format!("/webhooks/{endpoint}/deliveries"),
        |b| b["deliveries"][0]["status"] == "delivered",
    )
    .await;
    let delivery = &deliveries["deliveries"][0];
    assert_eq!(delivery["id"], received[0].id);
    assert_eq!(delivery["attempts"], 1);
    assert_eq!(delivery["last_status"], 200);
    assert_eq!(deliveries["deliveries"].as_array().unwrap().len(), 1);
    assert_eq!(receiver.received().len(), 1, "delivered once");

    // Another tenant sees none of it.
    let (_, other) = app.new_tenant().await;
    let hidden = app.get(&format!("/webhooks/{endpoint}"), &other).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    let hidden = app
        .get(&format!("/webhooks/{endpoint}/deliveries"), &other)
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_failing_receiver_gets_the_same_message_until_it_succeeds_and_redirects_fail() {
    let receiver = Receiver::start().await;
    receiver.inbox.statuses.lock().unwrap().extend([500, 307]);
    let app = app_with(LOOPBACK).await;
    let (_, token) = app.new_tenant().await;
    let (endpoint, secret) = register(&app, &token, &receiver.url).await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    run_turn(&app, &token, &session, "again").await;

    let received = receiver.wait_for(3).await;
    assert!(
        received.iter().all(|r| r.id == received[0].id),
        "{received:?}"
    );
    assert!(received.iter().all(|r| r.body == received[0].body));
    for request in &received {
        request.assert_signed_with(&secret);
    }
    let deliveries = poll(
        &app,
        &token,
        &format!("/webhooks/{endpoint}/deliveries"),
        |b| b["deliveries"][0]["status"] == "delivered",
    )
    .await;
    let delivery = &deliveries["deliveries"][0];
    assert_eq!(delivery["attempts"], 3, "{delivery}");
    assert_eq!(delivery["last_status"], 200);
    assert_eq!(receiver.received().len(), 3);
    let metrics = app.get("/metrics", &token).await.text;
    for line in [
        "agentry_webhook_deliveries_total{outcome=\"failed\"} 2\n",
        "agentry_webhook_deliveries_total{outcome=\"delivered\"} 1\n",
    ] {
        assert!(metrics.contains(line), "{line}: {metrics}");
    }

    // A replay is a new attempt of the same message.
    let replay = app
        .post(
            &format!("/webhooks/{endpoint}/deliveries/{}/replay", received[0].id),
            &token,
            json!({}),
        )
        .await;
    assert_eq!(replay.status, StatusCode::ACCEPTED, "{}", replay.text);
    let again = receiver.wait_for(4).await;
    assert_eq!(again[3].id, received[0].id);
    again[3].assert_signed_with(&secret);
    poll(
        &app,
        &token,
        &format!("/webhooks/{endpoint}/deliveries"),
        |b| b["deliveries"][0]["attempts"] == 4 && b["deliveries"][0]["status"] == "delivered",
    )
    .await;
}

#[tokio::test]
async fn a_runs_status_change_follows_its_turns_end() {
    let receiver = Receiver::start().await;
    let app = app_with(LOOPBACK).await;
    let (_, token) = app.new_tenant().await;
    let reply = app
        .post(
            "/webhooks",
            &token,
            json!({"url": receiver.url, "event_types": ["turn.completed", "run.status_changed"]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let run = crate::acp::run(
        &app,
        &token,
        json!({"agent_name": "echo", "input": [crate::acp::acp_user("a run")], "mode": "sync"}),
    )
    .await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.text);
    let run_hex = run.body["run_id"].as_str().unwrap().replace('-', "");

    let received = receiver.wait_for(2).await;
    let bodies: Vec<Value> = received.iter().map(Received::json).collect();
    assert_eq!(bodies[0]["type"], "turn.completed");
    assert_eq!(bodies[1]["type"], "run.status_changed");
    assert_eq!(bodies[1]["data"]["status"], "completed");
    assert_eq!(bodies[1]["data"]["turn_status"], "completed");
    assert_eq!(bodies[1]["data"]["terminal"], true);
    assert!(bodies[0]["data"].get("terminal").is_none());
    assert_eq!(bodies[1]["data"]["turn_id"], bodies[0]["data"]["turn_id"]);
    for body in &bodies {
        assert_eq!(body["data"]["run_id"], format!("run_{run_hex}"), "{body}");
    }
    assert_ne!(received[0].id, received[1].id);
}

#[tokio::test]
async fn a_turn_stopped_on_client_tool_calls_awaits_input() {
    use crate::scripted::{Reply, ScriptedOpenAi, finish, tool_fragment};
    let model = ScriptedOpenAi::start().await;
    let agent = format!(
        "[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\n\
         model = \"m\"\napi_key = \"k\"\n",
        model.url
    );
    let receiver = Receiver::start().await;
    let app = app_with(&format!("{LOOPBACK}{agent}")).await;
    let (_, token) = app.new_tenant().await;
    register(&app, &token, &receiver.url).await;
    let lookup = json!({"name": "lookup", "description": "Looks things up.",
                        "parameters": {"type": "object"}});
    let session = app
        .create_session(&token, json!({"agent": {"name": "gpt"}, "tools": [lookup]}))
        .await;
    model.push(Reply::Stream(vec![
        tool_fragment(0, Some("call_a"), Some("lookup"), "{}"),
        finish("tool_calls"),
    ]));
    let turn = run_turn(&app, &token, &session, "look it up").await;

    let body = receiver.wait_for(1).await[0].json();
    assert_eq!(body["type"], "turn.awaiting_input");
    assert_eq!(body["data"]["turn_id"], turn);
    assert_eq!(body["data"]["stop_reason"], "tool_use");
    assert_eq!(body["data"]["agent"], "gpt");
}

#[tokio::test]
async fn a_loopback_target_is_refused_unless_allowed() {
    let app = app_with("[webhooks]\nallow_http = true\n").await;
    let (_, token) = app.new_tenant().await;
    for url in [
        "http://127.0.0.1:9/hook",
        "https://localhost/hook",
        "https://[::1]/hook",
        "https://10.1.2.3/hook",
        "https://169.254.169.254/latest",
    ] {
        let reply = app.post("/webhooks", &token, json!({"url": url})).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{url}: {}",
            reply.text
        );
        assert_eq!(reply.code(), "invalid_request");
        assert_eq!(reply.body["error"]["field"], "url", "{}", reply.text);
        let host = reqwest::Url::parse(url)
            .unwrap()
            .host_str()
            .unwrap()
            .to_owned();
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&host),
            "{}",
            reply.text
        );
    }
    for (url, why) in [
        ("ftp://example.com/hook", "https://"),
        ("not a url", "not a URL"),
    ] {
        let reply = app.post("/webhooks", &token, json!({"url": url})).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{url}");
        assert!(reply.text.contains(why), "{}", reply.text);
    }
    let reply = app
        .post(
            "/webhooks",
            &token,
            json!({"url": "http://127.0.0.1:9/hook", "event_types": ["turn.exploded"]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);

    // http:// needs the operator's consent too.
    let strict = app_with("[webhooks]\nallow_targets = [\"127.0.0.1\"]\n").await;
    let (_, token) = strict.new_tenant().await;
    let reply = strict
        .post(
            "/webhooks",
            &token,
            json!({"url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(reply.text.contains("webhooks.allow_http"), "{}", reply.text);
    let reply = strict
        .post(
            "/webhooks",
            &token,
            json!({"url": "https://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
}

#[tokio::test]
async fn a_target_no_longer_allowed_is_refused_at_delivery() {
    let receiver = Receiver::start().await;
    let app = app_with(LOOPBACK).await;
    let (_, token) = app.new_tenant().await;
    let (endpoint, _) = register(&app, &token, &receiver.url).await;
    // The operator withdraws the permission: the endpoint stays, its attempts are refused.
    let db = app.stop().await;
    let app = spawn_app_on(
        db,
        "[webhooks]\nallow_http = true\npoll_interval_ms = 100\n",
    )
    .await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    run_turn(&app, &token, &session, "refused").await;
    let deliveries = poll(
        &app,
        &token,
        &format!("/webhooks/{endpoint}/deliveries"),
        |b| b["deliveries"][0]["attempts"].as_i64() >= Some(1),
    )
    .await;
    let error = deliveries["deliveries"][0]["last_error"].as_str().unwrap();
    assert!(error.contains("internal address"), "{error}");
    assert!(deliveries["deliveries"][0]["last_status"].is_null());
    assert!(receiver.received().is_empty());
}

#[tokio::test]
async fn an_endpoint_disabled_after_repeated_failure_says_why() {
    let receiver = Receiver::start().await;
    receiver.inbox.statuses.lock().unwrap().extend([500; 1000]);
    let app = app_with(&format!("{LOOPBACK}retry_for_seconds = 1\n")).await;
    let (_, token) = app.new_tenant().await;
    let (endpoint, _) = register(&app, &token, &receiver.url).await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    run_turn(&app, &token, &session, "doomed").await;

    let shown = poll(&app, &token, &format!("/webhooks/{endpoint}"), |b| {
        b["enabled"] == false
    })
    .await;
    let reason = shown["disabled_reason"].as_str().unwrap();
    assert!(reason.contains("HTTP 500"), "{reason}");
    assert!(
        reason.contains("not delivered within 1 seconds"),
        "{reason}"
    );
    assert!(!reason.contains("secret-looking"), "{reason}");
    let deliveries = app
        .get(&format!("/webhooks/{endpoint}/deliveries"), &token)
        .await;
    let delivery = &deliveries.body["deliveries"][0];
    assert_eq!(delivery["status"], "failed");
    assert_eq!(delivery["last_status"], 500);
    assert_eq!(delivery["last_error"], "HTTP 500");
    assert!(delivery["attempts"].as_i64().unwrap() >= 2, "{delivery}");
    let metrics = app.get("/metrics", &token).await.text;
    assert!(
        metrics.contains("agentry_webhook_deliveries_total{outcome=\"disabled\"} 1\n"),
        "{metrics}"
    );

    // A disabled endpoint replays nothing until it is enabled again.
    let message = delivery["id"].as_str().unwrap();
    let replay_path = format!("/webhooks/{endpoint}/deliveries/{message}/replay");
    let refused = app.post(&replay_path, &token, json!({})).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    let enabled = app
        .patch(
            &format!("/webhooks/{endpoint}"),
            &token,
            json!({"enabled": true}),
        )
        .await;
    assert_eq!(enabled.status, StatusCode::OK, "{}", enabled.text);
    assert_eq!(enabled.body["enabled"], true);
    assert!(enabled.body["disabled_reason"].is_null());
    receiver.inbox.statuses.lock().unwrap().clear();
    let before = receiver.received().len();
    let replayed = app.post(&replay_path, &token, json!({})).await;
    assert_eq!(replayed.status, StatusCode::ACCEPTED, "{}", replayed.text);
    receiver.wait_for(before + 1).await;
    poll(
        &app,
        &token,
        &format!("/webhooks/{endpoint}/deliveries"),
        |b| b["deliveries"][0]["status"] == "delivered",
    )
    .await;
}

#[tokio::test]
async fn deliveries_to_one_endpoint_are_sent_one_at_a_time_in_order() {
    let receiver = Receiver::start().await;
    receiver.inbox.hold_next.store(true, Ordering::SeqCst);
    let app = app_with(LOOPBACK).await;
    let (_, token) = app.new_tenant().await;
    let (endpoint, _) = register(&app, &token, &receiver.url).await;
    let mut turns = Vec::new();
    for text in ["first", "second", "third"] {
        let session = app
            .create_session(&token, json!({"agent": {"name": "echo"}}))
            .await;
        turns.push(run_turn(&app, &token, &session, text).await);
    }
    receiver.wait_for(1).await;
    poll(
        &app,
        &token,
        &format!("/webhooks/{endpoint}/deliveries"),
        |b| b["deliveries"].as_array().unwrap().len() == 3,
    )
    .await;
    // While the first is held, the sender has several polls to send another: it must not.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 1, "one in flight per endpoint");
    receiver.inbox.release.notify_one();

    let received = receiver.wait_for(3).await;
    let order: Vec<String> = received
        .iter()
        .map(|r| r.json()["data"]["turn_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(order, turns);
    assert_eq!(receiver.inbox.max_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn endpoints_are_managed_by_the_tenant_and_by_the_admin() {
    let receiver = Receiver::start().await;
    let app = app_with(&format!("{LOOPBACK}max_endpoints_per_tenant = 2\n")).await;
    let (tenant, token) = app.new_tenant().await;
    let admin = app.admin_token.clone();
    let base = format!("/admin/tenants/{tenant}/webhooks");
    let created = app
        .post(
            &base,
            &admin,
            json!({"url": receiver.url, "description": "ops", "event_types": ["turn.failed"]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let endpoint = created.body["id"].as_str().unwrap().to_owned();
    let secret = created.body["secret"].as_str().unwrap().to_owned();
    assert_eq!(created.body["event_types"], json!(["turn.failed"]));
    // The tenant sees what the admin registered.
    let listed = app.get("/webhooks", &token).await;
    assert_eq!(listed.body["endpoints"][0]["id"], endpoint.as_str());
    assert!(!listed.text.contains(&secret[6..]));

    // Only the event types it asked for: a completed turn is not sent.
    let patched = app
        .patch(
            &format!("{base}/{endpoint}"),
            &admin,
            json!({"description": null, "event_types": ["turn.completed"]}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert!(patched.body["description"].is_null());

    // A rotated secret is shown once; both secrets sign during the overlap.
    let rotated = app
        .post(
            &format!("/webhooks/{endpoint}/rotate-secret"),
            &token,
            json!({}),
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let new_secret = rotated.body["secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, secret);
    assert!(rotated.body["previous_secret_expires_at"].is_string());
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    run_turn(&app, &token, &session, "rotated").await;
    let received = receiver.wait_for(1).await;
    received[0].assert_signed_with(&new_secret);
    received[0].assert_signed_with(&secret);
    assert_eq!(received[0].signature.split(' ').count(), 2);

    let deliveries = app
        .get(&format!("{base}/{endpoint}/deliveries?limit=1"), &admin)
        .await;
    assert_eq!(deliveries.status, StatusCode::OK, "{}", deliveries.text);
    assert_eq!(deliveries.body["deliveries"].as_array().unwrap().len(), 1);

    // Deleting it removes its deliveries.
    let deleted = app.delete(&format!("{base}/{endpoint}"), &admin).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = app.get(&format!("/webhooks/{endpoint}"), &token).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let left = app
        .db
        .scalar("SELECT COUNT(*) FROM webhook_deliveries")
        .await;
    assert_eq!(left, "0");

    // A tenant has at most `webhooks.max_endpoints_per_tenant`; deleting the tenant
    // deletes them.
    for _ in 0..2 {
        register(&app, &token, &receiver.url).await;
    }
    let refused = app
        .post("/webhooks", &token, json!({"url": receiver.url}))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert!(refused.text.contains("at most 2"), "{}", refused.text);
    let deleted = app
        .delete(&format!("/admin/tenants/{tenant}"), &admin)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let left = app
        .db
        .scalar("SELECT COUNT(*) FROM webhook_endpoints")
        .await;
    assert_eq!(left, "0");
}

/// A `serve` process's configuration: loopback receivers, quick retries.
const PROCESS_CONFIG: &str = "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1\"]\n\
     retry_initial_delay_ms = 300\nretry_max_delay_ms = 600\npoll_interval_ms = 100\n\
     timeout_seconds = 2\n";

/// Registers an endpoint on a `serve` process; returns its id.
async fn register_on(address: &str, token: &str, url: &str) -> String {
    let reply = reqwest::Client::new()
        .post(format!("{address}/webhooks"))
        .bearer_auth(token)
        .json(&json!({"url": url}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), StatusCode::CREATED);
    let body: Value = reply.json().await.unwrap();
    body["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_crash_between_the_event_and_its_delivery_still_delivers() {
    let deployment = Deployment::new(PROCESS_CONFIG).await;
    let (_, token) = deployment.tenant_token("acme");
    // The receiver's port, while nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/hook");

    let first = deployment.start(&[]);
    let endpoint = register_on(&first.address, &token, &url).await;
    let session = first.create_session(&token, "echo").await;
    let mut stream = first.stream_turn(&token, &session, "survive").await;
    stream.until_turn_stop().await;
    // The first attempt found nobody listening.
    let deliveries = format!("/webhooks/{endpoint}/deliveries");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = first.get_json(&token, &deliveries).await;
        if body["deliveries"][0]["attempts"].as_i64() >= Some(1) {
            assert_eq!(body["deliveries"][0]["status"], "pending");
            assert_eq!(body["deliveries"][0]["last_error"], "the connection failed");
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill();

    let receiver = Receiver::on(std::net::TcpListener::bind(("127.0.0.1", port)).unwrap());
    let second = deployment.start(&[]);
    let received = receiver.wait_for(1).await;
    assert_eq!(received[0].json()["data"]["session_id"], session);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = second.get_json(&token, &deliveries).await;
        if body["deliveries"][0]["status"] == "delivered" {
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The new process knows the endpoint it did not register.
    let mut stream = second.stream_turn(&token, &session, "after").await;
    stream.until_turn_stop().await;
    let received = receiver.wait_for(2).await;
    assert_ne!(received[1].id, received[0].id);
    assert_eq!(received[1].json()["data"]["session_id"], session);
}

#[tokio::test]
async fn two_processes_deliver_each_message_once() {
    let db = TestDb::new().await;
    if db.url().starts_with("sqlite:") {
        eprintln!("several processes need PostgreSQL: set TEST_POSTGRES_URL");
        return;
    }
    let deployment = Deployment::on(db, PROCESS_CONFIG);
    let (_, token) = deployment.tenant_token("acme");
    let receiver = Receiver::start().await;
    let processes = [deployment.start(&[]), deployment.start(&[])];
    let endpoint = register_on(&processes[0].address, &token, &receiver.url).await;
    const TURNS: usize = 6;
    for i in 0..TURNS {
        let process = &processes[i % 2];
        let session = process.create_session(&token, "echo").await;
        let mut stream = process.stream_turn(&token, &session, "each once").await;
        stream.until_turn_stop().await;
    }
    let deliveries = format!("/webhooks/{endpoint}/deliveries");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = processes[1].get_json(&token, &deliveries).await;
        let list = body["deliveries"].as_array().unwrap();
        if list.len() == TURNS && list.iter().all(|d| d["status"] == "delivered") {
            assert!(list.iter().all(|d| d["attempts"] == 1), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let received = receiver.received();
    let mut ids: Vec<&str> = received.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), TURNS);
    assert_eq!(received.len(), TURNS, "each message once");
    assert_eq!(receiver.inbox.max_in_flight.load(Ordering::SeqCst), 1);
}

/// The statements a `serve` process logged that begin with `prefix`.
fn logged_statements(server: &crate::process::ServerProcess, prefix: &str) -> usize {
    server
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|record| {
            record["fields"]["db.statement"]
                .as_str()
                .map(|s| s.trim().to_owned())
        })
        .filter(|statement| statement.starts_with(prefix))
        .count()
}

/// Waits until the process logged `count` ends of turns.
async fn turns_ended(server: &crate::process::ServerProcess, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while server
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.contains("\"turn ended\""))
        .count()
        < count
    {
        assert!(Instant::now() < deadline, "{count} turns never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_tenant_without_endpoints_pays_no_statement_for_webhooks() {
    let deployment = Deployment::new(PROCESS_CONFIG).await;
    let sqlite = deployment.db.url().starts_with("sqlite:");
    let (_, quiet) = deployment.tenant_token("quiet");
    let (_, hooked) = deployment.tenant_token("hooked");
    let receiver = Receiver::start().await;
    let server = deployment.start(&[("RUST_LOG", "info,sqlx::query=debug")]);
    register_on(&server.address, &hooked, &receiver.url).await;
    const ENQUEUE: &str = "INSERT INTO webhook_deliveries";

    let session = server.create_session(&quiet, "echo").await;
    let mut stream = server.stream_turn(&quiet, &session, "quiet").await;
    stream.until_turn_stop().await;
    turns_ended(&server, 1).await;
    assert_eq!(logged_statements(&server, ENQUEUE), 0);
    // On PostgreSQL the writer's call that stops the turn queues its messages: no
    // statement of its own, with or without endpoints.
    const BATCH: &str = "SELECT fenced, queued FROM agentry_append(";
    if !sqlite {
        let batches = logged_statements(&server, BATCH);
        assert!(batches >= 1, "{batches} batches");
    }

    let session = server.create_session(&hooked, "echo").await;
    let mut stream = server.stream_turn(&hooked, &session, "hooked").await;
    stream.until_turn_stop().await;
    turns_ended(&server, 2).await;
    receiver.wait_for(1).await;
    if sqlite {
        assert_eq!(logged_statements(&server, ENQUEUE), 1);
    } else {
        assert_eq!(logged_statements(&server, ENQUEUE), 0);
        assert!(logged_statements(&server, BATCH) >= 2);
    }
}

#[tokio::test]
async fn the_readmes_local_receiver_prints_what_a_local_endpoint_is_sent() {
    use std::io::{BufRead, BufReader};

    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let recipe = readme
        .split("**Trying it on a laptop.**")
        .nth(1)
        .expect("README has the local receiver recipe");
    let code = recipe
        .split("python3 -c '")
        .nth(1)
        .and_then(|rest| rest.split("'\n```").next())
        .expect("the receiver's one-liner");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let code = code.replace("9000", &port.to_string());
    let mut receiver = std::process::Command::new("python3")
        .arg("-c")
        .arg(&code)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let stdout = receiver.stdout.take().unwrap();
    let (line_tx, line_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = line_tx.send(line);
        }
    });

    // The two settings the recipe names, as its environment variables set them.
    let config = format!(
        "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1:{port}\"]\n\
         retry_initial_delay_ms = 100\n"
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the receiver did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let created = app
        .post(
            "/webhooks",
            &token,
            json!({"url": format!("http://127.0.0.1:{port}/hook"), "event_types": ["turn.completed"]}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("Hi")]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK);
    let line = tokio::task::spawn_blocking(move || line_rx.recv_timeout(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("the receiver printed the message");
    let _ = receiver.kill();
    let _ = receiver.wait();
    let (id, body) = line.split_once(' ').unwrap();
    assert!(id.starts_with("msg_"), "{line}");
    let body: Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["type"], "turn.completed");
    assert_eq!(body["data"]["session_id"], session.as_str());
}
