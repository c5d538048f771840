//! The command line as an operator uses it: quiet unless asked, tenants by name, the whole
//! tenant lifecycle, and the server's own log lines short.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::helpers::TestDb;
use crate::process::{ServerProcess, agentry, run_ok};

fn run(command: &mut Command) -> std::process::Output {
    command.output().expect("the binary runs")
}

#[tokio::test]
async fn admin_commands_print_their_result_alone_unless_asked_to_log() {
    let db = TestDb::new().await;
    let quiet = run(agentry(db.url()).env("AGENTRY__LOG__FORMAT", "text").args([
        "admin",
        "create-tenant",
        "acme",
        "--raw",
    ]));
    assert!(quiet.status.success());
    let stdout = String::from_utf8(quiet.stdout).unwrap();
    assert!(stdout.trim().starts_with("ten_"), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(
        String::from_utf8_lossy(&quiet.stderr),
        "",
        "nothing but the result"
    );

    let migrate = run(agentry(db.url())
        .env("AGENTRY__LOG__FORMAT", "text")
        .arg("migrate"));
    assert!(migrate.status.success());
    assert_eq!(String::from_utf8_lossy(&migrate.stderr), "");

    let verbose = run(agentry(db.url()).env("AGENTRY__LOG__FORMAT", "text").args([
        "-v",
        "admin",
        "list-tenants",
    ]));
    assert!(verbose.status.success());
    let logs = String::from_utf8_lossy(&verbose.stderr);
    assert!(
        !logs.contains("secrets.key"),
        "said when a server starts: {logs}"
    );
    let fresh = TestDb::new().await;
    let migrated = run(agentry(fresh.url())
        .env("AGENTRY__LOG__FORMAT", "text")
        .args(["admin", "list-tenants", "-v"]));
    assert!(migrated.status.success());
    let logs = String::from_utf8_lossy(&migrated.stderr);
    assert!(
        logs.contains(" INFO ") && logs.contains("applied database migrations"),
        "-v logs: {logs}"
    );
    assert!(!logs.contains("\\n"), "no escaped line breaks: {logs}");
    assert!(!logs.contains("going to apply"), "{logs}");
    let listed: Value = serde_json::from_slice(&verbose.stdout).unwrap();
    assert_eq!(listed["tenants"][0]["name"], "acme");

    let failed = run(agentry(db.url()).args(["admin", "issue-token", "nobody"]));
    assert_eq!(failed.status.code(), Some(1));
    let error = String::from_utf8_lossy(&failed.stderr);
    assert!(error.starts_with("error: "), "{error}");
    assert!(
        error.contains("`nobody`") && error.contains("list-tenants"),
        "{error}"
    );
    assert_eq!(error.lines().count(), 1, "{error}");
}

#[tokio::test]
async fn a_tenant_named_by_name_is_issued_tokens_revoked_suspended_reported_and_deleted() {
    let db = TestDb::new().await;
    let server = ServerProcess::start(agentry(db.url()));
    let tenant = run_ok(agentry(db.url()).args(["admin", "create-tenant", "acme", "--raw"]));
    let tenant = tenant.trim();
    let issued: Value = serde_json::from_str(&run_ok(agentry(db.url()).args([
        "admin",
        "issue-token",
        "acme",
    ])))
    .unwrap();
    let token = issued["token"].as_str().unwrap();
    let jti = issued["jti"].as_str().unwrap();
    let spare = run_ok(agentry(db.url()).args(["admin", "issue-token", tenant, "--raw"]));
    let spare = spare.trim();
    let credential: Value = serde_json::from_str(&run_ok(agentry(db.url()).args([
        "admin",
        "create-credential",
        "acme",
        "--name",
        "ci",
    ])))
    .unwrap();
    assert!(credential["client_secret"].is_string());

    let client = reqwest::Client::new();
    let status = |token: &str| {
        let request = client.get(server.url("/sessions")).bearer_auth(token);
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(status(token).await, StatusCode::OK);
    server.create_session(token, "echo").await;
    let turn = server
        .stream_turn(token, &server.create_session(token, "echo").await, "Hi")
        .await;
    turn.collect().await;

    let tokens: Value = serde_json::from_str(&run_ok(agentry(db.url()).args([
        "admin",
        "list-tokens",
        "acme",
    ])))
    .unwrap();
    assert_eq!(tokens["tokens"].as_array().unwrap().len(), 2);
    assert!(!tokens.to_string().contains(token), "records, never tokens");
    let revoked: Value = serde_json::from_str(&run_ok(agentry(db.url()).args([
        "admin",
        "revoke-token",
        "acme",
        jti,
    ])))
    .unwrap();
    assert_eq!(revoked["revoked"], jti);
    wait_for_status(&status, token, StatusCode::UNAUTHORIZED).await;
    assert_eq!(status(spare).await, StatusCode::OK);

    let usage: Value =
        serde_json::from_str(&run_ok(agentry(db.url()).args(["admin", "usage", "acme"]))).unwrap();
    assert_eq!(usage["tenant_id"], tenant);
    assert_eq!(usage["turns"], 1);
    assert_eq!(usage["days"][0]["turns"], 1);
    let bad_time = run(agentry(db.url()).args(["admin", "usage", "acme", "--from", "yesterday"]));
    assert_eq!(bad_time.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_time.stderr).contains("--from"));

    let suspended: Value = serde_json::from_str(&run_ok(agentry(db.url()).args([
        "admin",
        "suspend-tenant",
        "acme",
    ])))
    .unwrap();
    assert_eq!(suspended["status"], "suspended");
    wait_for_status(&status, spare, StatusCode::FORBIDDEN).await;
    let active: Value = serde_json::from_str(&run_ok(agentry(db.url()).args([
        "admin",
        "activate-tenant",
        tenant,
    ])))
    .unwrap();
    assert_eq!(active["status"], "active");
    wait_for_status(&status, spare, StatusCode::OK).await;

    let unconfirmed = run(agentry(db.url()).args(["admin", "delete-tenant", "acme"]));
    assert_eq!(unconfirmed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unconfirmed.stderr).contains("--yes"));
    assert_eq!(status(spare).await, StatusCode::OK, "nothing was deleted");
    run_ok(agentry(db.url()).args(["admin", "delete-tenant", "acme", "--yes"]));
    let listed: Value =
        serde_json::from_str(&run_ok(agentry(db.url()).args(["admin", "list-tenants"]))).unwrap();
    assert_eq!(listed["tenants"], serde_json::json!([]));
    wait_for_status(&status, spare, StatusCode::UNAUTHORIZED).await;
}

/// Waits until a serving process, which trusts a token's checked state for
/// `auth.state_cache_ttl_ms`, answers `expected`.
async fn wait_for_status<F, Fut>(status: &F, token: &str, expected: StatusCode)
where
    F: Fn(&str) -> Fut,
    Fut: std::future::Future<Output = StatusCode>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = status(token).await;
        if got == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{got}, not {expected}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_request_is_one_short_log_line_naming_each_id_once() {
    let db = TestDb::new().await;
    let tenant = run_ok(agentry(db.url()).args(["admin", "create-tenant", "acme", "--raw"]));
    let token = run_ok(agentry(db.url()).args(["admin", "issue-token", tenant.trim(), "--raw"]));
    let token = token.trim();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = agentry(db.url())
        .env("AGENTRY__LOG__FORMAT", "text")
        .env("AGENTRY__SERVER__BIND", format!("127.0.0.1:{port}"))
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let created: Value = client
        .post(format!("{base}/sessions"))
        .bearer_auth(token)
        .json(&serde_json::json!({"agent": {"name": "echo"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = created["sessionId"].as_str().unwrap();
    let read = client
        .get(format!("{base}/sessions/{session}/history"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::BAD_REQUEST);
    let missing = client.get(format!("{base}/nowhere")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let output = child.wait_with_output().unwrap();
    let logs = String::from_utf8_lossy(&output.stderr);

    let history = logs
        .lines()
        .find(|line| line.contains("route=/sessions/{session_id}/history"))
        .unwrap_or_else(|| panic!("the request is logged: {logs}"));
    assert!(history.contains("status=400"), "{history}");
    assert!(
        history.contains("error=\"invalid_query: type: is required"),
        "{history}"
    );
    assert_eq!(history.matches(session).count(), 1, "{history}");
    assert!(
        history.len() < 500,
        "{} characters: {history}",
        history.len()
    );
    let unmatched = logs
        .lines()
        .find(|line| line.contains("route=unmatched"))
        .unwrap_or_else(|| panic!("the request is logged: {logs}"));
    assert!(
        unmatched.contains("error=\"not_found: no such route\""),
        "{unmatched}"
    );
    assert!(
        unmatched.len() < 300,
        "{} characters: {unmatched}",
        unmatched.len()
    );
    for noise in [
        "ApiError {",
        "exception.details",
        "http.user_agent",
        "Error encountered",
    ] {
        assert!(!logs.contains(noise), "{noise}: {logs}");
    }
    assert!(!logs.contains(token));
}
