//! What one request may make the server hold: a 50 MB session read through every
//! history-like route a page at a time, and credential creations, measured on the server
//! process (`/proc/<pid>/status`; the peak is reset through `/proc/<pid>/clear_refs`).

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::process::{DEPLOYMENT_ADMIN_SECRET, Deployment, ServerProcess};

/// An echo agent that answers in one delta.
const BULK_AGENT: &str = r#"
[[agents]]
name = "bulk"
provider = "echo"
chunk_size = 1000000
"#;

/// The most a route's whole read of the session may add to the server's peak memory.
const ROUTE_BOUND_KIB: u64 = 20 * 1024;

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Runs `read` and returns how far it raised the process's peak resident memory (KiB).
async fn peak_growth<F: std::future::Future<Output = ()>>(pid: u32, read: F) -> u64 {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = status_kib(pid, "VmRSS:");
    read.await;
    status_kib(pid, "VmHWM:").saturating_sub(before)
}

async fn get(client: &reqwest::Client, server: &ServerProcess, token: &str, path: &str) -> Value {
    let response = client
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    response.json().await.unwrap()
}

/// Every page of `path`, following `next` as `after`: the items under `key` of each.
async fn all_pages(
    client: &reqwest::Client,
    server: &ServerProcess,
    token: &str,
    path: &str,
    key: &dyn Fn(&Value) -> Vec<Value>,
) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let separator = if path.contains('?') { '&' } else { '?' };
        let url = match &after {
            Some(cursor) => format!("{path}{separator}after={cursor}"),
            None => path.to_owned(),
        };
        let page = get(client, server, token, &url).await;
        pages.push(key(&page));
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return pages,
        }
        assert!(pages.len() < 1000, "paging ends");
    }
}

#[tokio::test]
async fn a_50_mb_session_is_read_a_page_at_a_time_within_a_bound_on_every_route() {
    let deployment = Deployment::new(BULK_AGENT).await;
    let server = deployment.start(&[]);
    let (_, token) = deployment.tenant_token("big");
    let client = reqwest::Client::new();
    let session = server.create_session(&token, "bulk").await;
    // 28 turns of 900 KB, each echoed back: 56 messages, about 50 MB stored.
    let turns = 28;
    for i in 0..turns {
        let text = format!("{i:02}{}", "x".repeat(900_000));
        let response = client
            .post(server.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(&token)
            .json(&json!({"messages": [{"role": "user", "content": text}]}))
            .timeout(Duration::from_secs(120))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "turn {i}");
    }
    // A fresh process reads it: what the writes left in memory does not hide the reads'.
    server.terminate();
    server.wait_exit(Duration::from_secs(30));
    let server = deployment.start(&[]);
    let pid = server.pid();
    let expected: Vec<String> = (0..turns).map(|i| format!("{i:02}")).collect();
    let texts = |messages: &[Value], field: &str| -> Vec<String> {
        messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m[field].as_str().unwrap_or_default()[..2].to_owned())
            .collect()
    };

    // AAP history.
    let history = format!("/sessions/{session}/history?type=full&limit=1000");
    let aap = |page: &Value| {
        page["history"]["full"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let first = peak_growth(pid, async {
        all_pages(&client, &server, &token, &history, &aap).await;
    })
    .await;
    eprintln!("AAP history, first read: peak +{first} KiB");
    let mut pages = Vec::new();
    let growth = peak_growth(pid, async {
        pages = all_pages(&client, &server, &token, &history, &aap).await;
    })
    .await;
    eprintln!("AAP history: {} pages, peak +{growth} KiB", pages.len());
    let messages: Vec<Value> = pages.iter().flatten().cloned().collect();
    assert_eq!(messages.len(), 2 * turns);
    assert_eq!(texts(&messages, "content"), expected);
    assert!(growth < ROUTE_BOUND_KIB, "AAP history: +{growth} KiB");
    assert!(
        pages.len() >= turns,
        "pages are cut by bytes: {}",
        pages.len()
    );

    // AgentScope session messages.
    let agentscope = format!("/agentscope/sessions/{session}/messages?limit=1000");
    let messages_of = |page: &Value| page["messages"].as_array().cloned().unwrap_or_default();
    let first = peak_growth(pid, async {
        all_pages(&client, &server, &token, &agentscope, &messages_of).await;
    })
    .await;
    eprintln!("AgentScope messages, first read: peak +{first} KiB");
    let mut pages = Vec::new();
    let growth = peak_growth(pid, async {
        pages = all_pages(&client, &server, &token, &agentscope, &messages_of).await;
    })
    .await;
    eprintln!(
        "AgentScope messages: {} pages, peak +{growth} KiB",
        pages.len()
    );
    let messages: Vec<Value> = pages.iter().flatten().cloned().collect();
    assert_eq!(messages.len(), 2 * turns);
    let users: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"][0]["text"].as_str().unwrap()[..2].to_owned())
        .collect();
    assert_eq!(users, expected);
    assert!(
        growth < ROUTE_BOUND_KIB,
        "AgentScope messages: +{growth} KiB"
    );

    // ACP session: its history's URLs, without reading a message.
    let session_uuid = get(&client, &server, &token, &format!("/sessions/{session}")).await;
    assert!(session_uuid.is_object());
    let acp = format!("/acp/sessions/{session}");
    let mut described = Value::Null;
    let growth = peak_growth(pid, async {
        described = get(&client, &server, &token, &acp).await;
    })
    .await;
    eprintln!("ACP session: peak +{growth} KiB");
    assert_eq!(described["history"].as_array().unwrap().len(), 2 * turns);
    assert!(growth < ROUTE_BOUND_KIB, "ACP session: +{growth} KiB");

    // Parts listing.
    let parts = format!("/sessions/{session}/parts?limit=1000");
    let parts_of = |page: &Value| page["parts"].as_array().cloned().unwrap_or_default();
    let mut pages = Vec::new();
    let growth = peak_growth(pid, async {
        pages = all_pages(&client, &server, &token, &parts, &parts_of).await;
    })
    .await;
    eprintln!("parts: {} pages, peak +{growth} KiB", pages.len());
    assert!(pages.iter().all(Vec::is_empty), "no named parts");
    assert!(growth < ROUTE_BOUND_KIB, "parts: +{growth} KiB");
    assert!(
        pages.len() >= turns,
        "the parts listing pages the history too"
    );
}

#[tokio::test]
async fn thirty_credential_creations_keep_one_hashing_buffer() {
    let deployment = Deployment::new("").await;
    let server = deployment.start(&[]);
    let (tenant, _) = deployment.tenant_token("hashing");
    let client = reqwest::Client::new();
    let login: Value = client
        .post(server.url("/auth/token"))
        .json(&json!({"client_id": "admin", "client_secret": DEPLOYMENT_ADMIN_SECRET}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let admin = login["access_token"].as_str().unwrap().to_owned();
    let create = || {
        client
            .post(server.url(&format!("/admin/tenants/{tenant}/credentials")))
            .bearer_auth(&admin)
            .json(&json!({"name": "ci"}))
            .send()
    };
    // Warm up: the first creation starts the hasher.
    assert_eq!(create().await.unwrap().status(), StatusCode::CREATED);
    let pid = server.pid();
    let before = status_kib(pid, "VmRSS:");
    for _ in 0..3 {
        let replies = join_all((0..10).map(|_| create())).await;
        for reply in replies {
            assert_eq!(reply.unwrap().status(), StatusCode::CREATED);
        }
    }
    let after = status_kib(pid, "VmRSS:");
    let growth = after.saturating_sub(before);
    eprintln!("30 credential creations: RSS {before} KiB -> {after} KiB");
    assert!(growth < 40 * 1024, "+{growth} KiB after 30 creations");
}
