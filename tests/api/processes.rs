//! How many processes may serve one database: one for a SQLite file (a second is refused
//! before it touches the database), several for PostgreSQL.

use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestDb, user};
use crate::process::{ServerProcess, agentry, run_ok};

#[tokio::test]
async fn a_second_process_on_one_sqlite_file_is_refused_and_the_first_serves_on() {
    let db = TestDb::new().await;
    let first = ServerProcess::start(agentry(db.url()));
    let client = reqwest::Client::new();

    // The CLI's commands still work beside the serving process.
    let tenant = run_ok(agentry(db.url()).args(["admin", "create-tenant", "acme", "--raw"]));
    let token = run_ok(agentry(db.url()).args(["admin", "issue-token", tenant.trim(), "--raw"]));
    let token = token.trim();

    if db.url().starts_with("sqlite:") {
        let mut second = agentry(db.url())
            .arg("serve")
            .env("AGENTRY__SERVER__BIND", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("agentry serve starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while second.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = second.kill();
                panic!("a second process on the SQLite file kept running");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let output = second.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(
            stderr.contains("another agentry process is serving the SQLite database"),
            "{stderr}"
        );
    } else {
        // PostgreSQL takes several processes.
        let second = ServerProcess::start(agentry(db.url()));
        let ready = client.get(second.url("/readyz")).send().await.unwrap();
        assert_eq!(ready.status(), StatusCode::OK);
        second.kill();
    }

    // The first process was left alone: its turns run and number their events as before.
    let session = first.create_session(token, "echo").await;
    for text in ["one", "two"] {
        let reply = client
            .post(first.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(token)
            .json(&json!({"messages": [user(text)]}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), StatusCode::OK);
        let body: Value = reply.json().await.unwrap();
        assert_eq!(body["stopReason"], "end_turn", "{body}");
    }
}
