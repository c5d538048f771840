//! SQLite on a small file system the test fills up: nothing is acknowledged that is not
//! stored (no 201 for a session that is not there, no event a client saw is lost), every
//! stored turn ends with exactly one terminal event, and writes work again once space is
//! freed, without a restart.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{assert_one_terminal_event_last, turn_id};
use crate::helpers::TestDb;
use crate::process::{Deployment, SLOW_AGENT, ServerProcess};
use crate::sse::{Frame, SseReader, coalesced};

/// A tmpfs of `size` MiB the test mounted (root only); unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size_mib: u32) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(dir.path())
            .output();
        match mounted {
            Ok(output) if output.status.success() => Some(Tmpfs { dir }),
            Ok(output) => {
                eprintln!(
                    "cannot mount a tmpfs (root only): {}",
                    String::from_utf8_lossy(&output.stderr)
                );
                None
            }
            Err(error) => {
                eprintln!("cannot mount a tmpfs: {error}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the file system to the last byte; returns the file that does it.
    fn fill(&self) -> PathBuf {
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut size = chunk.len();
        loop {
            match file.write(&chunk[..size]) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) if size > 1 => size /= 2,
                Err(_) => break,
            }
        }
        let _ = file.sync_all();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A turn posted in delta mode, read to its end (in a task of its own: while the disk is
/// full its end comes only once space is freed).
struct PostedTurn {
    session: String,
    turn: String,
    frames: tokio::task::JoinHandle<Vec<Frame>>,
}

/// How a write the database could not take is refused: 507 (full) or 503, with a JSON
/// error and `Retry-After`.
async fn assert_refused_as_unstored(reply: reqwest::Response) {
    let status = reply.status();
    assert!(
        status == StatusCode::INSUFFICIENT_STORAGE || status == StatusCode::SERVICE_UNAVAILABLE,
        "{status}"
    );
    assert!(reply.headers().contains_key("retry-after"));
    let body: Value = reply.json().await.unwrap();
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        code == "insufficient_storage" || code == "database_unavailable",
        "{body}"
    );
}

async fn post_turn(
    server: &ServerProcess,
    token: &str,
    session: &str,
    text: &str,
) -> Result<PostedTurn, reqwest::Response> {
    let reply = reqwest::Client::new()
        .post(server.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(token)
        .json(&json!({"stream": "delta", "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    if reply.status() != StatusCode::OK {
        return Err(reply);
    }
    let mut stream = SseReader::new(reply);
    let turn = turn_id(&stream);
    let frames = tokio::spawn(async move { stream.until_turn_stop().await });
    Ok(PostedTurn {
        session: session.to_owned(),
        turn,
        frames,
    })
}

async fn create_session(server: &ServerProcess, token: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(server.url("/sessions"))
        .bearer_auth(token)
        .json(&json!({"agent": {"name": "slow"}}))
        .send()
        .await
        .unwrap()
}

async fn status_of(server: &ServerProcess, token: &str, path: &str) -> StatusCode {
    reqwest::Client::new()
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn a_full_disk_acknowledges_nothing_unstored_and_writes_resume_once_space_is_freed() {
    if std::env::var("TEST_POSTGRES_URL").is_ok_and(|url| !url.is_empty()) {
        eprintln!("a full disk under SQLite: runs without TEST_POSTGRES_URL");
        return;
    }
    let Some(fs) = Tmpfs::mount(24) else {
        return;
    };
    let db = TestDb::Sqlite {
        _dir: tempfile::tempdir().unwrap(),
        url: format!("sqlite://{}", fs.path().join("agentry.db").display()),
    };
    fill_and_free(db, &fs, Readiness::AtSomePoint).await;
}

/// The same on PostgreSQL: a cluster of the test's own whose database lives in a tablespace
/// on the small file system (its write-ahead log elsewhere), so a full disk fails the
/// database's writes (`53100 disk_full`) without stopping the server.
#[tokio::test]
async fn a_full_disk_under_postgresql_acknowledges_nothing_unstored_and_writes_resume() {
    use sqlx::Connection;
    if std::env::var("TEST_POSTGRES_URL").is_err() {
        eprintln!("a full PostgreSQL tablespace: set TEST_POSTGRES_URL");
        return;
    }
    // Declared first, dropped last: the cluster stops before the file system goes.
    let Some(fs) = Tmpfs::mount(24) else {
        return;
    };
    let Some(cluster) = crate::own_postgres::OwnPostgres::start() else {
        return;
    };
    let space = fs.path().join("tablespace");
    std::fs::create_dir(&space).unwrap();
    let owned = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(fs.path())
        .status()
        .unwrap();
    assert!(owned.success());
    let name = format!("agentry_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&cluster.url("postgres"))
        .await
        .unwrap();
    for statement in [
        format!("CREATE TABLESPACE small LOCATION '{}'", space.display()),
        format!("CREATE DATABASE \"{name}\" TABLESPACE small"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&mut admin)
            .await
            .unwrap();
    }
    admin.close().await.unwrap();
    let db = TestDb::Postgres {
        server_url: cluster.url("postgres"),
        url: cluster.url(&name),
        name,
    };
    // The renewal `/readyz` makes is an update PostgreSQL can make in place (its log is
    // elsewhere): after a refused write, `/readyz` also needs a write that takes new space.
    fill_and_free(db, &fs, Readiness::AfterEveryRefusal).await;
}

/// What `/readyz` must say while the disk is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readiness {
    /// 503 at some point (SQLite's log may reuse space its file already holds).
    AtSomePoint,
    /// 503 after every refused write, until space is freed.
    AfterEveryRefusal,
}

/// Fills `fs`, where `db` keeps its data, under a running process; then frees it.
/// `/readyz` must say 503 while writes fail as `readiness` says, and 200 once space is
/// freed.
async fn fill_and_free(db: TestDb, fs: &Tmpfs, readiness: Readiness) {
    let deployment = Deployment::on(db, SLOW_AGENT);
    let (_, token) = deployment.tenant_token("acme");
    let server = deployment.start(&[]);

    let mut sessions = Vec::new();
    let mut turns = Vec::new();
    // A turn that runs while the disk fills (400 characters at 50 ms each).
    let session = server.create_session(&token, "slow").await;
    let long = post_turn(&server, &token, &session, &"k".repeat(400))
        .await
        .unwrap();
    sessions.push(session);
    turns.push(long);

    // Idle sessions that take turns while the disk is full.
    let mut idle = Vec::new();
    for _ in 0..6 {
        idle.push(server.create_session(&token, "slow").await);
    }
    sessions.extend(idle.iter().cloned());

    let filler = fs.fill();
    let mut refused_sessions = 0;
    let mut refused_turns = 0;
    let mut not_ready = 0;
    for _ in 0..400 {
        if let Some(session) = idle.pop() {
            match post_turn(&server, &token, &session, "while full").await {
                Ok(turn) => turns.push(turn),
                Err(reply) => {
                    refused_turns += 1;
                    assert_refused_as_unstored(reply).await;
                }
            }
        }
        let reply = create_session(&server, &token).await;
        if reply.status() == StatusCode::CREATED {
            let body: Value = reply.json().await.unwrap();
            let session = body["sessionId"].as_str().unwrap().to_owned();
            match post_turn(&server, &token, &session, "hello").await {
                Ok(turn) => turns.push(turn),
                Err(reply) => {
                    refused_turns += 1;
                    assert_refused_as_unstored(reply).await;
                }
            }
            sessions.push(session);
            continue;
        }
        refused_sessions += 1;
        assert_refused_as_unstored(reply).await;
        let ready = status_of(&server, &token, "/readyz").await;
        if ready == StatusCode::SERVICE_UNAVAILABLE {
            not_ready += 1;
        } else {
            assert!(
                readiness != Readiness::AfterEveryRefusal,
                "/readyz said {ready} after a write was refused for a full disk"
            );
        }
        if refused_sessions >= 5 && idle.is_empty() {
            break;
        }
    }
    assert!(refused_sessions >= 5, "the full disk refused no session");
    assert!(not_ready > 0, "/readyz never said 503 while writes failed");
    if readiness == Readiness::AfterEveryRefusal {
        assert_eq!(
            status_of(&server, &token, "/readyz").await,
            StatusCode::SERVICE_UNAVAILABLE,
            "/readyz while the disk is still full"
        );
    }
    assert_eq!(status_of(&server, &token, "/healthz").await, StatusCode::OK);
    eprintln!(
        "refused: {refused_sessions} sessions, {refused_turns} turns; {} turns admitted; \
         /readyz 503 {not_ready} times",
        turns.len()
    );

    std::fs::remove_file(filler).unwrap();

    // Without a restart: writes work again, and readiness says so.
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of(&server, &token, "/readyz").await != StatusCode::OK {
        assert!(
            Instant::now() < deadline,
            "/readyz stayed 503 after space was freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reply = create_session(&server, &token).await;
    assert_eq!(reply.status(), StatusCode::CREATED);
    let body: Value = reply.json().await.unwrap();
    let session = body["sessionId"].as_str().unwrap().to_owned();
    let after = post_turn(&server, &token, &session, "again").await.unwrap();
    sessions.push(session);
    let frames = after.frames.await.unwrap();
    assert_eq!(frames.last().unwrap().data["stopReason"], "end_turn");

    // Every turn a client saw start ends, once; what the client saw is what is stored.
    let mut ended_unstored = 0;
    for turn in turns {
        let live = turn.frames.await.unwrap();
        let stop = &live.last().unwrap().data;
        if stop["error"]["code"] == "insufficient_storage"
            || stop["error"]["code"] == "database_unavailable"
        {
            ended_unstored += 1;
        }
        assert_one_terminal_event_last(&deployment.db, &turn.turn).await;
        let replay = server
            .follow_turn(&token, &turn.session, &turn.turn, None)
            .await
            .until_turn_stop()
            .await;
        // (Deltas of a message a failure left open are stored singly: compare runs.)
        assert_eq!(
            coalesced(&live),
            coalesced(&replay),
            "turn {}: no event a client saw is lost",
            turn.turn
        );
    }
    assert!(ended_unstored > 0, "no turn was ended for storage");
    deployment.db.wait_for_no_unfinished_turns().await;

    // Every session answered 201 is there, now and after a restart.
    for session in &sessions {
        assert_eq!(
            status_of(&server, &token, &format!("/sessions/{session}")).await,
            StatusCode::OK
        );
    }
    server.terminate();
    assert!(server.wait_exit(Duration::from_secs(30)).success());
    let server = deployment.start(&[]);
    for session in &sessions {
        assert_eq!(
            status_of(&server, &token, &format!("/sessions/{session}")).await,
            StatusCode::OK,
            "session {session} was answered 201"
        );
    }
}
