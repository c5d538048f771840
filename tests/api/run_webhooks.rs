//! A run's own webhook endpoints, as a protocol face registers them through
//! `AppState::webhooks` (the A2A face's push notification configs): told of their run's
//! status changes only, in a payload format the face registered, signed with the client's
//! token; listed, delivered, retried and replayed like a tenant's endpoints.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use agentry::engine::{
    Authorization, NewRunEndpoint, OutboundMessage, Payload, PayloadFormat, WebhookError,
};
use agentry::model::{RunId, TenantId};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::{Notify, mpsc};

use crate::acp::{acp_user, post_raw, reply_of};
use crate::helpers::{TestApp, TestDb, captured_logs, spawn_app_on};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, tool_fragment};

/// Loopback receivers allowed, quick retries (and `webhooks`, more webhook settings), and
/// `gpt`, an agent of the scripted model.
fn config(model: &ScriptedOpenAi, webhooks: &str) -> String {
    format!(
        "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1\"]\n\
         retry_initial_delay_ms = 50\nretry_max_delay_ms = 200\npoll_interval_ms = 100\n\
         timeout_seconds = 5\n{webhooks}\
         [[agents]]\nname = \"gpt\"\nprovider = \"openai\"\nbase_url = \"{}\"\n\
         model = \"m\"\napi_key = \"k\"\n",
        model.url
    )
}

/// The test's payload format: a small JSON body, and the token echoed in a header.
#[derive(Debug)]
struct Compact;

impl PayloadFormat for Compact {
    fn render(&self, message: &OutboundMessage<'_>, token: &str) -> Result<Payload, String> {
        Ok(Payload {
            content_type: "application/vnd.compact+json",
            body: json!({
                "event": message.event_type,
                "status": message.data["status"],
                "run": message.data["run_id"],
                "terminal": message.data["terminal"],
                "agent": message.data["agent"],
            })
            .to_string(),
            headers: vec![("x-compact-token", token.to_owned())],
        })
    }
}

/// An app of its own database with the `compact` format registered.
async fn app_with(model: &ScriptedOpenAi) -> TestApp {
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config(model, "")).await;
    app.state
        .webhooks()
        .register_format("compact", Arc::new(Compact));
    app
}

/// One request a receiver got.
#[derive(Debug, Clone)]
pub struct Hook {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub authorization: String,
    pub content_type: String,
    pub echoed_token: String,
    /// `X-A2A-Notification-Token`.
    pub a2a_token: String,
    pub body: String,
}

impl Hook {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }

    /// Verifies the Standard Webhooks signature keyed with the token's own bytes.
    pub fn assert_signed_with(&self, token: &str) {
        let sent: i64 = self.timestamp.parse().expect("a unix timestamp");
        assert!((chrono::Utc::now().timestamp() - sent).abs() < 300);
        let mut mac = Hmac::<Sha256>::new_from_slice(token.as_bytes()).unwrap();
        mac.update(format!("{}.{}.{}", self.id, self.timestamp, self.body).as_bytes());
        let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
        assert_eq!(self.signature, expected, "not signed with the token");
    }
}

struct Inbox {
    hooks: mpsc::UnboundedSender<Hook>,
    /// Statuses of the next answers (then 200).
    statuses: Mutex<VecDeque<u16>>,
}

async fn receive(inbox: web::Data<Inbox>, request: HttpRequest, body: web::Bytes) -> HttpResponse {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let _ = inbox.hooks.send(Hook {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        authorization: header("authorization"),
        content_type: header("content-type"),
        echoed_token: header("x-compact-token"),
        a2a_token: header("x-a2a-notification-token"),
        body: String::from_utf8(body.to_vec()).unwrap(),
    });
    let status = inbox.statuses.lock().unwrap().pop_front().unwrap_or(200);
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap()).finish()
}

/// A webhook receiver on 127.0.0.1 whose requests arrive on a channel.
pub struct Receiver {
    pub url: String,
    hooks: mpsc::UnboundedReceiver<Hook>,
    _server: actix_web::dev::ServerHandle,
}

impl Receiver {
    pub fn start(statuses: &[u16]) -> Receiver {
        let (sender, hooks) = mpsc::unbounded_channel();
        let inbox = Arc::new(Inbox {
            hooks: sender,
            statuses: Mutex::new(statuses.iter().copied().collect()),
        });
        let data = web::Data::from(inbox);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/hook", web::post().to(receive))
        })
        .workers(1)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            hooks,
            _server: handle,
        }
    }

    /// The next request (waiting up to 30 s).
    pub async fn next(&mut self) -> Hook {
        tokio::time::timeout(Duration::from_secs(30), self.hooks.recv())
            .await
            .expect("a request arrives")
            .expect("the receiver runs")
    }

    /// The requests that arrived and were not taken yet.
    pub fn pending(&mut self) -> Vec<Hook> {
        std::iter::from_fn(|| self.hooks.try_recv().ok()).collect()
    }
}

/// An async ACP run of `gpt` on a session with the client tool `lookup`: its model call
/// waits for the returned gate, then calls the tool, so the run goes `awaiting`.
async fn gated_tool_run(
    app: &TestApp,
    model: &ScriptedOpenAi,
    token: &str,
) -> (RunId, String, Arc<Notify>) {
    let lookup = json!({"name": "lookup", "description": "d", "parameters": {"type": "object"}});
    let session = app
        .create_session(token, json!({"agent": {"name": "gpt"}, "tools": [lookup]}))
        .await;
    let session = uuid::Uuid::parse_str(session.trim_start_matches("sess_")).unwrap();
    let gate = Arc::new(Notify::new());
    model.push(Reply::Gated(
        gate.clone(),
        Box::new(Reply::Stream(vec![
            tool_fragment(0, Some("a"), Some("lookup"), "{}"),
            finish("tool_calls"),
        ])),
    ));
    let reply = crate::acp::run(
        app,
        token,
        json!({"agent_name": "gpt", "session_id": session.hyphenated().to_string(),
               "input": [acp_user("look it up")], "mode": "async"}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    let acp_id = reply.body["run_id"].as_str().unwrap().to_owned();
    let run = RunId::from_uuid(uuid::Uuid::parse_str(&acp_id).unwrap());
    (run, acp_id, gate)
}

/// A sync ACP run of `gpt` that the model answers at once.
async fn answered_run(app: &TestApp, model: &ScriptedOpenAi, token: &str) -> crate::helpers::Reply {
    model.push(Reply::Stream(vec![text("hello"), finish("stop")]));
    crate::acp::run(
        app,
        token,
        json!({"agent_name": "gpt", "input": [acp_user("a run")], "mode": "sync"}),
    )
    .await
}

/// Answers the awaiting run's tool call; the model then ends it.
async fn resume(app: &TestApp, model: &ScriptedOpenAi, token: &str, acp_id: &str) {
    model.push(Reply::Stream(vec![text("found it"), finish("stop")]));
    let body = json!({"await_resume": {"type": "message", "message": {"role": "user", "parts": [
        {"name": "/tool_results/a", "content_type": "text/plain", "content": "found"}]}},
        "mode": "sync"});
    let reply = reply_of(post_raw(app, &format!("/acp/runs/{acp_id}"), token, &body).await).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.body["status"], "completed", "{}", reply.text);
}

fn new_endpoint(run: RunId, key: &str, url: &str, token: Option<&str>) -> NewRunEndpoint {
    NewRunEndpoint {
        run,
        key: key.to_owned(),
        url: url.to_owned(),
        token: token.map(str::to_owned),
        authorization: None,
        format: "compact".to_owned(),
    }
}

fn tenant_id(tenant: &str) -> TenantId {
    tenant.parse().unwrap()
}

#[tokio::test]
async fn a_runs_endpoint_receives_its_status_changes_in_order_rendered_signed_and_authorized() {
    let model = ScriptedOpenAi::start().await;
    let app = app_with(&model).await;
    let mut pushed = Receiver::start(&[]);
    let mut tenant_wide = Receiver::start(&[]);
    let (tenant, token) = app.new_tenant().await;
    let registered = app
        .post("/webhooks", &token, json!({"url": tenant_wide.url}))
        .await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{}",
        registered.text
    );
    let (run, acp_id, gate) = gated_tool_run(&app, &model, &token).await;
    let mut new = new_endpoint(run, "main", &pushed.url, Some("client-token-1"));
    new.authorization = Some(Authorization {
        scheme: "Bearer".into(),
        credentials: Some("push-credentials".into()),
    });
    let created = app
        .state
        .webhooks()
        .create_run_endpoint(&tenant_id(&tenant), new)
        .await
        .unwrap();
    assert_eq!(created.token, "client-token-1");
    assert_eq!(created.endpoint.run, run);
    assert_eq!(
        created.endpoint.authorization_scheme.as_deref(),
        Some("Bearer")
    );
    gate.notify_one();

    let awaiting = pushed.next().await;
    assert_eq!(
        awaiting.json(),
        json!({"event": "run.status_changed", "status": "awaiting", "run": run.to_string(),
               "terminal": false, "agent": "gpt"})
    );
    assert_eq!(awaiting.content_type, "application/vnd.compact+json");
    assert_eq!(awaiting.authorization, "Bearer push-credentials");
    assert_eq!(awaiting.echoed_token, "client-token-1");
    assert!(awaiting.id.starts_with("msg_"), "{}", awaiting.id);
    awaiting.assert_signed_with("client-token-1");

    // Another run of the tenant ends: its messages reach the tenant's endpoint only.
    let other = answered_run(&app, &model, &token).await;
    assert_eq!(other.status, StatusCode::OK, "{}", other.text);
    resume(&app, &model, &token, &acp_id).await;

    // Had the other run's message been queued for this endpoint, it would come first.
    let completed = pushed.next().await;
    assert_eq!(
        completed.json(),
        json!({"event": "run.status_changed", "status": "completed", "run": run.to_string(),
               "terminal": true, "agent": "gpt"})
    );
    completed.assert_signed_with("client-token-1");
    assert_eq!(completed.authorization, "Bearer push-credentials");
    assert_ne!(completed.id, awaiting.id);
    assert!(pushed.pending().is_empty());

    // The tenant's endpoint got every message of both runs, in its own JSON body.
    let mut seen = Vec::new();
    for _ in 0..6 {
        let hook = tenant_wide.next().await;
        assert_eq!(hook.content_type, "application/json");
        assert!(hook.authorization.is_empty());
        let body = hook.json();
        seen.push((
            body["type"].as_str().unwrap().to_owned(),
            body["data"]["run_id"] == run.to_string(),
        ));
    }
    let expected = [
        ("turn.awaiting_input", true),
        ("run.status_changed", true),
        ("turn.completed", false),
        ("run.status_changed", false),
        ("turn.completed", true),
        ("run.status_changed", true),
    ]
    .map(|(kind, ours)| (kind.to_owned(), ours));
    assert_eq!(seen, expected);
    assert!(tenant_wide.pending().is_empty());
}

#[tokio::test]
async fn a_generated_token_is_returned_once_signs_and_is_never_shown_again() {
    let model = ScriptedOpenAi::start().await;
    let app = app_with(&model).await;
    let mut pushed = Receiver::start(&[]);
    // A tenant with no endpoint but its run's.
    let (tenant, token) = app.new_tenant().await;
    let tenant = tenant_id(&tenant);
    let (run, _, gate) = gated_tool_run(&app, &model, &token).await;
    let mut new = new_endpoint(run, "generated", &pushed.url, None);
    new.authorization = Some(Authorization {
        scheme: "Basic".into(),
        credentials: Some("dXNlcjpwYXNzd29yZA==".into()),
    });
    let created = app
        .state
        .webhooks()
        .create_run_endpoint(&tenant, new)
        .await
        .unwrap();
    let generated = created.token.clone();
    assert!(generated.len() >= 43, "{generated}");
    assert!(
        generated
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{generated}"
    );
    assert!(!format!("{created:?}").contains(&generated));
    gate.notify_one();

    let hook = pushed.next().await;
    hook.assert_signed_with(&generated);
    assert_eq!(hook.echoed_token, generated);
    assert_eq!(hook.authorization, "Basic dXNlcjpwYXNzd29yZA==");

    // Read back: no token, no credentials, anywhere.
    let webhooks = app.state.webhooks();
    let got = webhooks
        .get_run_endpoint(&tenant, &run, "generated")
        .await
        .unwrap();
    assert_eq!(got, created.endpoint);
    let listed = webhooks.list_run_endpoints(&tenant, &run).await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&created.endpoint));
    let shown = [
        serde_json::to_string(&got).unwrap(),
        serde_json::to_string(&listed).unwrap(),
        format!("{got:?}"),
        app.get("/webhooks", &token).await.text,
        app.get(&format!("/webhooks/{}", got.id), &token).await.text,
        captured_logs(),
    ];
    for text in shown {
        assert!(!text.contains(&generated), "the token is shown: {text}");
        assert!(
            !text.contains("dXNlcjpwYXNzd29yZA"),
            "credentials shown: {text}"
        );
    }
    // Sealed at rest.
    let stored = app
        .db
        .scalar(&format!(
            "SELECT secret || authorization_credentials FROM webhook_endpoints WHERE id = {}",
            app.db.id(&got.id.to_string())
        ))
        .await;
    assert!(!stored.contains(&generated) && !stored.contains("dXNlcjpwYXNzd29yZA"));
}

#[tokio::test]
async fn run_endpoints_are_replaced_by_key_limited_deleted_idempotently_and_checked() {
    let model = ScriptedOpenAi::start().await;
    let db = Arc::new(TestDb::new().await);
    let app = spawn_app_on(db, &config(&model, "max_endpoints_per_tenant = 1\n")).await;
    app.state
        .webhooks()
        .register_format("compact", Arc::new(Compact));
    let webhooks = app.state.webhooks();
    let (tenant, token) = app.new_tenant().await;
    let tenant = tenant_id(&tenant);
    let run_reply = answered_run(&app, &model, &token).await;
    assert_eq!(run_reply.status, StatusCode::OK, "{}", run_reply.text);
    let acp_id = run_reply.body["run_id"].as_str().unwrap();
    let run = RunId::from_uuid(uuid::Uuid::parse_str(acp_id).unwrap());
    let url = "http://127.0.0.1:9/first";

    // The same key again replaces it, under the same id.
    let first = webhooks
        .create_run_endpoint(&tenant, new_endpoint(run, "a", url, Some("t1")))
        .await
        .unwrap();
    let mut again = new_endpoint(run, "a", "http://127.0.0.1:9/second", Some("t2"));
    again.authorization = Some(Authorization {
        scheme: "Token".into(),
        credentials: None,
    });
    let replaced = webhooks.create_run_endpoint(&tenant, again).await.unwrap();
    assert_eq!(replaced.endpoint.id, first.endpoint.id);
    assert_eq!(replaced.endpoint.url, "http://127.0.0.1:9/second");
    assert_eq!(
        replaced.endpoint.authorization_scheme.as_deref(),
        Some("Token")
    );
    assert_eq!(replaced.endpoint.created_at, first.endpoint.created_at);
    assert_eq!(
        webhooks.list_run_endpoints(&tenant, &run).await.unwrap(),
        std::slice::from_ref(&replaced.endpoint)
    );

    // Ten a run, beside the tenant's own limit; a replacement at the limit is no new one.
    let mut keys = vec!["a".to_owned()];
    for i in 1..10 {
        let key = format!("key-{i}");
        webhooks
            .create_run_endpoint(&tenant, new_endpoint(run, &key, url, None))
            .await
            .unwrap();
        keys.push(key);
    }
    let listed = webhooks.list_run_endpoints(&tenant, &run).await.unwrap();
    let listed_keys: Vec<&str> = listed.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(listed_keys, keys, "oldest first");
    let refused = webhooks
        .create_run_endpoint(&tenant, new_endpoint(run, "eleventh", url, None))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, WebhookError::TooManyForRun(10)),
        "{refused}"
    );
    assert!(refused.to_string().contains("at most 10"), "{refused}");
    webhooks
        .create_run_endpoint(&tenant, new_endpoint(run, "key-9", url, None))
        .await
        .unwrap();
    let own = app.post("/webhooks", &token, json!({"url": url})).await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.text);

    // Deleting is idempotent; then it is not found.
    webhooks
        .delete_run_endpoint(&tenant, &run, "a")
        .await
        .unwrap();
    webhooks
        .delete_run_endpoint(&tenant, &run, "a")
        .await
        .unwrap();
    let missing = webhooks.get_run_endpoint(&tenant, &run, "a").await;
    assert!(
        matches!(missing, Err(WebhookError::NotFound("push config"))),
        "{missing:?}"
    );

    // Another tenant's run, or none, is not found.
    let (other, _) = app.new_tenant().await;
    let other = tenant_id(&other);
    for (tenant, run) in [(other, run), (tenant, RunId::generate())] {
        let refused = webhooks
            .create_run_endpoint(&tenant, new_endpoint(run, "a", url, None))
            .await;
        assert!(
            matches!(refused, Err(WebhookError::NotFound("run"))),
            "{refused:?}"
        );
        let refused = webhooks.get_run_endpoint(&tenant, &run, "key-1").await;
        assert!(
            matches!(refused, Err(WebhookError::NotFound("run"))),
            "{refused:?}"
        );
        let refused = webhooks.list_run_endpoints(&tenant, &run).await;
        assert!(
            matches!(refused, Err(WebhookError::NotFound("run"))),
            "{refused:?}"
        );
    }

    // Bad input names its field; internal targets are refused as for a tenant's endpoint.
    let mut unknown_format = new_endpoint(run, "b", url, None);
    unknown_format.format = "nonesuch".into();
    let mut bad_scheme = new_endpoint(run, "b", url, None);
    bad_scheme.authorization = Some(Authorization {
        scheme: "Bad Scheme".into(),
        credentials: None,
    });
    for (new, field, says) in [
        (
            new_endpoint(run, "b", "https://10.1.2.3/hook", None),
            "url",
            "internal address",
        ),
        (
            new_endpoint(run, "b", "https://169.254.169.254/latest", None),
            "url",
            "internal address",
        ),
        (
            new_endpoint(run, "b", "ftp://example.com/", None),
            "url",
            "https://",
        ),
        (unknown_format, "format", "nonesuch"),
        (new_endpoint(run, "", url, None), "key", "1 to 256"),
        (new_endpoint(run, "a\nb", url, None), "key", "control"),
        (
            new_endpoint(run, "b", url, Some("has space")),
            "token",
            "visible",
        ),
        (new_endpoint(run, "b", url, Some("")), "token", "1 to"),
        (bad_scheme, "authorization.scheme", "scheme"),
    ] {
        match webhooks.create_run_endpoint(&tenant, new).await {
            Err(WebhookError::Invalid(error)) => {
                assert_eq!(error.field, field, "{error}");
                assert!(error.message.contains(says), "{error}");
            }
            other => panic!("{field}: {other:?}"),
        }
    }

    // The run's endpoints die with it (its session here).
    let session = run_reply.body["session_id"]
        .as_str()
        .unwrap()
        .replace('-', "");
    let deleted = app
        .delete(&format!("/sessions/sess_{session}"), &token)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.text);
    let left = app
        .db
        .scalar("SELECT COUNT(*) FROM webhook_endpoints WHERE run_id IS NOT NULL")
        .await;
    assert_eq!(left, "0");
}

#[tokio::test]
async fn a_failing_run_endpoint_is_retried_until_it_answers_and_keeps_the_order() {
    let model = ScriptedOpenAi::start().await;
    let app = app_with(&model).await;
    let mut pushed = Receiver::start(&[500, 503]);
    let (tenant, token) = app.new_tenant().await;
    let (run, acp_id, gate) = gated_tool_run(&app, &model, &token).await;
    app.state
        .webhooks()
        .create_run_endpoint(
            &tenant_id(&tenant),
            new_endpoint(run, "flaky", &pushed.url, Some("flaky-token")),
        )
        .await
        .unwrap();
    gate.notify_one();

    // The run goes on while its first message is still being retried.
    let first = pushed.next().await;
    resume(&app, &model, &token, &acp_id).await;
    let mut hooks = vec![first];
    for _ in 0..3 {
        hooks.push(pushed.next().await);
    }
    for hook in &hooks {
        hook.assert_signed_with("flaky-token");
    }
    let statuses: Vec<Value> = hooks.iter().map(|h| h.json()["status"].clone()).collect();
    assert_eq!(statuses, ["awaiting", "awaiting", "awaiting", "completed"]);
    assert!(hooks[..3].iter().all(|h| h.id == hooks[0].id));
    assert!(hooks[..3].iter().all(|h| h.body == hooks[0].body));
    assert_ne!(hooks[3].id, hooks[0].id);
    assert!(pushed.pending().is_empty());
}

#[tokio::test]
async fn run_endpoints_are_listed_with_the_tenants_and_their_deliveries_read_and_replayed() {
    let model = ScriptedOpenAi::start().await;
    let app = app_with(&model).await;
    let document = crate::openapi::document(&app).await;
    let mut pushed = Receiver::start(&[]);
    let (tenant, token) = app.new_tenant().await;
    let own = app
        .post(
            "/webhooks",
            &token,
            json!({"url": "http://127.0.0.1:9/own"}),
        )
        .await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.text);
    let (run, _, gate) = gated_tool_run(&app, &model, &token).await;
    let created = app
        .state
        .webhooks()
        .create_run_endpoint(
            &tenant_id(&tenant),
            new_endpoint(run, "listed", &pushed.url, Some("listed-token")),
        )
        .await
        .unwrap();
    let id = created.endpoint.id.to_string();
    gate.notify_one();
    let hook = pushed.next().await;

    for path in [
        "/webhooks".to_owned(),
        format!("/admin/tenants/{tenant}/webhooks"),
    ] {
        let who = if path.starts_with("/admin") {
            app.admin_token.clone()
        } else {
            token.clone()
        };
        let listed = app.get(&path, &who).await;
        assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
        let endpoints = listed.body["endpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), 2, "{}", listed.text);
        // Newest first: the run's, then the tenant's own.
        assert_eq!(endpoints[0]["id"], id.as_str());
        assert_eq!(endpoints[0]["run_id"], run.to_string());
        assert_eq!(endpoints[0]["format"], "compact");
        assert_eq!(endpoints[0]["event_types"], json!(["run.status_changed"]));
        assert_eq!(endpoints[1]["id"], own.body["id"]);
        assert!(endpoints[1]["run_id"].is_null() && endpoints[1]["format"].is_null());
        assert!(!listed.text.contains("listed-token"));
    }
    let listed = app.get("/webhooks", &token).await;
    crate::openapi::check(&document, "get", "/webhooks", &listed);

    let deliveries = format!("/webhooks/{id}/deliveries");
    let delivered = poll_deliveries(&app, &token, &deliveries).await;
    crate::openapi::check(
        &document,
        "get",
        "/webhooks/{endpoint_id}/deliveries",
        &delivered,
    );
    let delivery = &delivered.body["deliveries"][0];
    assert_eq!(delivery["id"], hook.id.as_str());
    assert_eq!(delivery["event_type"], "run.status_changed");
    assert_eq!(delivery["attempts"], 1);

    // A replay sends the same message again, rendered and signed as before.
    let replayed = app
        .post(
            &format!("{deliveries}/{}/replay", hook.id),
            &token,
            json!({}),
        )
        .await;
    assert_eq!(replayed.status, StatusCode::ACCEPTED, "{}", replayed.text);
    let again = pushed.next().await;
    assert_eq!(again.id, hook.id);
    assert_eq!(again.body, hook.body);
    again.assert_signed_with("listed-token");

    // Its token is its client's: not rotated, and it takes no other event type.
    let rotated = app
        .post(&format!("/webhooks/{id}/rotate-secret"), &token, json!({}))
        .await;
    assert_eq!(rotated.status, StatusCode::CONFLICT, "{}", rotated.text);
    crate::openapi::check(
        &document,
        "post",
        "/webhooks/{endpoint_id}/rotate-secret",
        &rotated,
    );
    let patched = app
        .patch(
            &format!("/webhooks/{id}"),
            &token,
            json!({"event_types": ["turn.completed"]}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::BAD_REQUEST, "{}", patched.text);
    assert_eq!(patched.body["error"]["field"], "event_types");
}

#[tokio::test]
async fn a_format_missing_at_send_time_fails_the_attempt_with_a_clear_error() {
    let model = ScriptedOpenAi::start().await;
    let app = app_with(&model).await;
    let mut pushed = Receiver::start(&[]);
    let (tenant, token) = app.new_tenant().await;
    let (run, acp_id, gate) = gated_tool_run(&app, &model, &token).await;
    let created = app
        .state
        .webhooks()
        .create_run_endpoint(
            &tenant_id(&tenant),
            new_endpoint(run, "restart", &pushed.url, Some("restart-token")),
        )
        .await
        .unwrap();
    gate.notify_one();
    assert_eq!(pushed.next().await.json()["status"], "awaiting");
    let deliveries = format!("/webhooks/{}/deliveries", created.endpoint.id);
    poll_deliveries(&app, &token, &deliveries).await;

    // The next process serves no `compact` format, until it registers one.
    let db = app.stop().await;
    let app = spawn_app_on(db, &config(&model, "")).await;
    resume(&app, &model, &token, &acp_id).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let failed = loop {
        let reply = app.get(&deliveries, &token).await;
        let latest = reply.body["deliveries"][0].clone();
        if latest["attempts"].as_i64() >= Some(1) {
            break latest;
        }
        assert!(std::time::Instant::now() < deadline, "{}", reply.text);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(failed["status"], "pending");
    assert_eq!(
        failed["last_error"],
        "no payload format `compact` is registered"
    );
    assert!(failed["last_status"].is_null());
    assert!(pushed.pending().is_empty());
    app.state
        .webhooks()
        .register_format("compact", Arc::new(Compact));
    let completed = pushed.next().await;
    assert_eq!(completed.json()["status"], "completed");
    completed.assert_signed_with("restart-token");
}

/// Polls the deliveries (up to 30 s) until the newest is delivered.
async fn poll_deliveries(app: &TestApp, token: &str, path: &str) -> crate::helpers::Reply {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let reply = app.get(path, token).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        if reply.body["deliveries"][0]["status"] == "delivered" {
            return reply;
        }
        assert!(std::time::Instant::now() < deadline, "{}", reply.text);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
