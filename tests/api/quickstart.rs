//! The README's quickstart, step by step, with the real binary.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::TestDb;
use crate::process::{ServerProcess, agentry, run_ok};

#[tokio::test]
async fn the_readme_quickstart_works_verbatim() {
    let db = TestDb::new().await;

    // 1. Start the server.
    let server = ServerProcess::start(agentry(db.url()));

    // 2. Create a tenant and an API key with the CLI.
    let tenant = run_ok(agentry(db.url()).args(["admin", "create-tenant", "acme", "--raw"]));
    let tenant = tenant.trim();
    assert!(tenant.starts_with("ten_"), "{tenant}");
    let token = run_ok(agentry(db.url()).args(["admin", "issue-token", tenant, "--raw"]));
    let token = token.trim();

    let listed: Value =
        serde_json::from_str(&run_ok(agentry(db.url()).args(["admin", "list-tenants"]))).unwrap();
    assert_eq!(listed["tenants"][0]["id"], tenant);
    let credential: Value = serde_json::from_str(&run_ok(agentry(db.url()).args([
        "admin",
        "create-credential",
        tenant,
    ])))
    .unwrap();
    assert!(credential["client_secret"].is_string());

    // 3. Create a session with a secret option.
    let client = reqwest::Client::new();
    let created = client
        .post(server.url("/sessions"))
        .bearer_auth(token)
        .json(&json!({
            "agent": {"name": "echo", "options": {"api_key": "sk-my-own-key"}},
            "messages": [{"role": "user", "content": "Hello, agentry!"}]
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let session = created.json::<Value>().await.unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    // 4. Read it back: the secret is redacted.
    let read: Value = client
        .get(server.url(&format!("/sessions/{session}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["agent"]["options"]["api_key"], "***");
    assert_eq!(read["agent"]["options"]["style"], "plain");
    let history: Value = client
        .get(server.url(&format!("/sessions/{session}/history?type=full")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history["history"]["full"][0]["content"], "Hello, agentry!");

    // 5. Stream a turn: the agent's reply arrives as deltas.
    let response = client
        .post(server.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(token)
        .json(&json!({"stream": "delta", "messages": [{"role": "user", "content": "Tell me a story."}]}))
        .send()
        .await
        .unwrap();
    let turn = response.headers()["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let frames = crate::sse::SseReader::new(response).collect().await;
    let reply: String = frames
        .iter()
        .filter_map(|f| f.data["delta"].as_str())
        .collect();
    assert_eq!(reply, "Tell me a story.");
    assert_eq!(frames.last().unwrap().data["stopReason"], "end_turn");

    // 6. Resume after the second event, as a client that lost its connection would.
    let second = frames[1].id.unwrap();
    let resumed = crate::sse::SseReader::new(
        client
            .get(server.url(&format!("/sessions/{session}/turns/{turn}/events")))
            .bearer_auth(token)
            .header("Last-Event-ID", second.to_string())
            .send()
            .await
            .unwrap(),
    )
    .collect()
    .await;
    assert_eq!(resumed[..], frames[2..]);

    let logs = server.logs.lock().unwrap().join("\n");
    assert!(!logs.contains("sk-my-own-key"));
}

#[test]
fn config_check_names_the_offending_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[server]\nbind = \"not an address\"\n").unwrap();
    let output = agentry("sqlite://unused.db")
        .args(["config", "check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("server.bind"), "{stderr}");

    std::fs::write(&file, "[database]\nurl = \"mysql://x\"\n").unwrap();
    let output = agentry("sqlite://unused.db")
        .env_remove("AGENTRY__DATABASE__URL")
        .args(["config", "check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("database.url"));

    let output = agentry("sqlite://unused.db")
        .env("AGENTRY__SERVER__WORKERZ", "4")
        .args(["config", "check"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("server.workerz"));

    let good = agentry("sqlite://unused.db")
        .args(["config", "check", "--config", "config/docker.toml"])
        .env("AGENTRY__DATABASE__URL", "postgres://agentry@db/agentry")
        .output()
        .unwrap();
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
}
