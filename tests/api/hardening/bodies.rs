//! A client cannot hold a connection with a body that never arrives, nor get past the
//! JSON error body with an oversized head.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::app_with;
use crate::helpers::{TestApp, spawn_app};

/// Opens a connection and sends a request head announcing a large body, then 13 bytes of it.
async fn stall(app: &TestApp, path: &str) -> TcpStream {
    let address = app.address.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.expect("connects");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: 1000000\r\n\r\n{{\"client_id\":"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Everything the server sends until it closes the connection (or `limit` passes).
async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut received = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut received))
        .await
        .ok()?
        .ok()?;
    Some(String::from_utf8_lossy(&received).into_owned())
}

#[tokio::test]
async fn a_stalled_request_body_gets_408_and_the_connection_is_closed() {
    let app = app_with("[server]\nbody_read_timeout_seconds = 1\n").await;
    let started = Instant::now();
    let mut stream = stall(&app, "/auth/token").await;
    let answer = read_to_close(&mut stream, Duration::from_secs(10))
        .await
        .expect("the server answers and closes within 10 s");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    let body: Value = serde_json::from_str(body).expect("a JSON body");
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
}

#[tokio::test]
async fn many_stalled_bodies_do_not_stop_the_server_answering_and_are_all_dropped() {
    let app = app_with("[server]\nbody_read_timeout_seconds = 2\n").await;
    let mut stalled = Vec::new();
    for i in 0..200 {
        let path = if i % 2 == 0 {
            "/auth/token"
        } else {
            "/sessions"
        };
        stalled.push(stall(&app, path).await);
    }
    let started = Instant::now();
    let health = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    for stream in &mut stalled {
        let answer = read_to_close(stream, Duration::from_secs(10)).await;
        assert!(answer.is_some(), "every stalled connection is closed");
    }
}

#[tokio::test]
async fn an_oversized_request_head_gets_431_with_the_json_error_body() {
    let app = spawn_app().await;
    let huge = format!("Bearer {}", "a".repeat(100 * 1024));
    let response = app
        .client
        .get(app.url("/sessions"))
        .header("Authorization", &huge)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(body["error"]["code"], "headers_too_large", "{body}");
    // Past the HTTP layer's own limit (128 KiB) the answer is a bare 431: see README.
    let larger = format!("Bearer {}", "a".repeat(200 * 1024));
    let response = app
        .client
        .get(app.url("/sessions"))
        .header("Authorization", &larger)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
}
