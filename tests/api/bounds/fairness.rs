//! Webhook delivery is fair across tenants: with one tenant's 100 endpoints answering only
//! after 30 s, another tenant's delivery still arrives within 2 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use actix_web::{App, HttpResponse, HttpServer, web};
use reqwest::StatusCode;
use serde_json::json;
use tokio::sync::mpsc;

use crate::hardening::app_with;
use crate::helpers::user;

struct Inbox {
    slow_hits: AtomicUsize,
    fast: mpsc::UnboundedSender<Instant>,
}

async fn slow(inbox: web::Data<Inbox>) -> HttpResponse {
    inbox.slow_hits.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(30)).await;
    HttpResponse::NoContent().finish()
}

async fn fast(inbox: web::Data<Inbox>) -> HttpResponse {
    let _ = inbox.fast.send(Instant::now());
    HttpResponse::NoContent().finish()
}

#[tokio::test]
async fn a_tenants_slow_receivers_do_not_delay_another_tenants_delivery() {
    let (sender, mut arrivals) = mpsc::unbounded_channel();
    let inbox = web::Data::from(Arc::new(Inbox {
        slow_hits: AtomicUsize::new(0),
        fast: sender,
    }));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let data = inbox.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/slow/{n}", web::post().to(slow))
            .route("/fast", web::post().to(fast))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    let handle = server.handle();
    tokio::spawn(server);

    let app = app_with(
        "[webhooks]\nallow_http = true\nallow_targets = [\"127.0.0.1\"]\n\
         timeout_seconds = 30\nmax_endpoints_per_tenant = 100\n",
    )
    .await;
    let (_, noisy) = app.new_tenant().await;
    let (_, quiet) = app.new_tenant().await;
    for i in 0..100 {
        let reply = app
            .post(
                "/webhooks",
                &noisy,
                json!({"url": format!("http://127.0.0.1:{port}/slow/{i}")}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    }
    let reply = app
        .post(
            "/webhooks",
            &quiet,
            json!({"url": format!("http://127.0.0.1:{port}/fast")}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);

    // The noisy tenant's turn queues 100 deliveries to receivers that hang.
    let session = app
        .create_session(&noisy, json!({"agent": {"name": "echo"}}))
        .await;
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &noisy,
            json!({"messages": [user("hi")]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    let waiting = Instant::now();
    while inbox.slow_hits.load(Ordering::SeqCst) < 4 {
        assert!(
            waiting.elapsed() < Duration::from_secs(20),
            "the noisy deliveries started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let session = app
        .create_session(&quiet, json!({"agent": {"name": "echo"}}))
        .await;
    let turn = app
        .post(
            &format!("/sessions/{session}/turns"),
            &quiet,
            json!({"messages": [user("hi")]}),
        )
        .await;
    assert_eq!(turn.status, StatusCode::OK, "{}", turn.text);
    let ended = Instant::now();
    let arrived = tokio::time::timeout(Duration::from_secs(10), arrivals.recv())
        .await
        .expect("the quiet tenant's delivery arrived within 10 s")
        .unwrap();
    let took = arrived.saturating_duration_since(ended);
    eprintln!("the quiet tenant's delivery arrived {took:?} after its turn");
    assert!(took < Duration::from_secs(2), "delivered after {took:?}");
    handle.stop(false).await;
}
