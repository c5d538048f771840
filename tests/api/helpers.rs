//! The test harness: the real application on a free port with a database of its own.
//!
//! Every test runs on SQLite (a temporary file) unless `TEST_POSTGRES_URL` is set, in
//! which case each app gets a fresh PostgreSQL database, dropped afterwards. An unreachable
//! PostgreSQL fails the test loudly. `TEST_LOG=1` echoes the application's logs.

use std::io::Write;
use std::sync::{Arc, Mutex, Once};

use agentry::config::{LogFormat, LogSettings};
use agentry::{App, AppState, Settings};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sqlx::Connection;

use crate::sse::SseReader;

pub const ADMIN_SECRET: &str = "test-admin-secret";

/// Agents every test app serves: the default echo agent and one with every kind of
/// option, exposed and internal server tools, and only the full history.
pub const TEST_AGENTS: &str = r#"
[[agents]]
name = "echo"
provider = "echo"
image_inputs = ["http", "data"]

[[agents.options]]
name = "api_key"
type = "secret"
default = ""

[[agents.options]]
name = "style"
type = "select"
options = ["plain", "upper"]
default = "plain"

[[agents]]
name = "tooly"
title = "Tooly"
version = "2.1.0"
description = "An agent with options and tools."
provider = "echo"
image_inputs = ["http"]

[[agents.options]]
name = "model"
type = "select"
options = ["small", "large"]
default = "small"

[[agents.options]]
name = "language"
type = "text"
default = "English"

[[agents.options]]
name = "api_key"
type = "secret"
default = "operator-default-key"

[[agents.tools]]
name = "clock"
description = "Tells the time."
parameters = { type = "object", properties = { zone = { type = "string" } } }

[[agents.tools]]
name = "calculator"
description = "Does arithmetic."

[[agents.tools]]
name = "memory"
description = "Internal notes."
expose = false

[agents.history]
types = ["full"]

[[agents]]
name = "slow"
provider = "echo"
chunk_size = 1
delay_ms = 40

[[agents]]
name = "thinker"
provider = "echo"
chunk_size = 4
thinking = true
"#;

/// A user message.
pub fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

// ---------------------------------------------------------------- log capture

static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());
static LOG_CAPTURE: Once = Once::new();

#[derive(Clone)]
struct CaptureWriter;

impl Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().unwrap().extend_from_slice(buf);
        if std::env::var_os("TEST_LOG").is_some() {
            std::io::stdout().write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn install_log_capture() {
    LOG_CAPTURE.call_once(|| {
        let settings = LogSettings {
            format: LogFormat::Json,
            level: "debug,h2=info,hyper=info,reqwest=info".to_owned(),
        };
        agentry::telemetry::init(&settings, || CaptureWriter);
    });
}

/// Everything every app in this test process has logged so far.
pub fn captured_logs() -> String {
    String::from_utf8_lossy(&LOGS.lock().unwrap()).into_owned()
}

// ---------------------------------------------------------------- databases

/// A database that lives as long as the test: a temp SQLite file or a PostgreSQL database.
pub enum TestDb {
    Sqlite {
        _dir: tempfile::TempDir,
        url: String,
    },
    Postgres {
        server_url: String,
        name: String,
        url: String,
    },
}

impl TestDb {
    pub async fn new() -> TestDb {
        match std::env::var("TEST_POSTGRES_URL") {
            Ok(server_url) if !server_url.is_empty() => {
                let name = format!("agentry_test_{}", uuid::Uuid::new_v4().simple());
                let mut conn = sqlx::PgConnection::connect(&server_url)
                    .await
                    .unwrap_or_else(|e| {
                        panic!("TEST_POSTGRES_URL is set but PostgreSQL is unreachable: {e}")
                    });
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
                    .execute(&mut conn)
                    .await
                    .expect("create the test database");
                let url = with_database(&server_url, &name);
                TestDb::Postgres {
                    server_url,
                    name,
                    url,
                }
            }
            _ => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("agentry.db").display());
                TestDb::Sqlite { _dir: dir, url }
            }
        }
    }

    /// An id (`prefix_` and 32 hex digits) as an SQL literal of the stored column.
    pub fn id(&self, id: &str) -> String {
        let (_, hex) = id.rsplit_once('_').expect("a prefixed id");
        if self.url().starts_with("sqlite:") {
            format!("x'{hex}'")
        } else {
            format!("'{hex}'::uuid")
        }
    }

    pub fn url(&self) -> &str {
        match self {
            TestDb::Sqlite { url, .. } | TestDb::Postgres { url, .. } => url,
        }
    }

    /// Runs statements on the test database directly (for fixtures of older schemas).
    pub async fn execute(&self, statements: &[String]) {
        use sqlx::Connection;
        if self.url().starts_with("sqlite:") {
            let mut db = sqlx::SqliteConnection::connect(self.url()).await.unwrap();
            for sql in statements {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                    .execute(&mut db)
                    .await
                    .unwrap();
            }
        } else {
            let mut db = sqlx::PgConnection::connect(self.url()).await.unwrap();
            for sql in statements {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                    .execute(&mut db)
                    .await
                    .unwrap();
            }
        }
    }

    /// The one text column of every row a query reads from the test database.
    pub async fn column(&self, sql: &str) -> Vec<String> {
        use sqlx::Connection;
        let sql = sql.to_owned();
        if self.url().starts_with("sqlite:") {
            let mut db = sqlx::SqliteConnection::connect(self.url()).await.unwrap();
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_all(&mut db)
                .await
                .unwrap()
        } else {
            let mut db = sqlx::PgConnection::connect(self.url()).await.unwrap();
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_all(&mut db)
                .await
                .unwrap()
        }
    }

    /// Waits (up to 30 s) until no turn is queued or running: after a kill, a restarted
    /// process on SQLite ends the dead one's turns at start; on PostgreSQL a living process
    /// does once the dead one's lease expires.
    pub async fn wait_for_no_unfinished_turns(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let unfinished = self
                .scalar("SELECT COUNT(*) FROM turns WHERE status IN ('queued', 'running')")
                .await;
            if unfinished == "0" {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{unfinished} turns stayed unfinished"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The one value a query reads from the test database directly, as text.
    pub async fn scalar(&self, sql: &str) -> String {
        use sqlx::Connection;
        let sql = format!("SELECT CAST(({sql}) AS TEXT)");
        if self.url().starts_with("sqlite:") {
            let mut db = sqlx::SqliteConnection::connect(self.url()).await.unwrap();
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(&mut db)
                .await
                .unwrap()
        } else {
            let mut db = sqlx::PgConnection::connect(self.url()).await.unwrap();
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .fetch_one(&mut db)
                .await
                .unwrap()
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let TestDb::Postgres {
            server_url, name, ..
        } = self
        {
            let (server_url, name) = (server_url.clone(), name.clone());
            // Drop runs inside the test's runtime; a thread of its own may block.
            let _ = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&server_url).await {
                        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                            "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                        )))
                        .execute(&mut conn)
                        .await;
                    }
                });
            })
            .join();
        }
    }
}

/// The server URL with its database name replaced.
fn with_database(server_url: &str, name: &str) -> String {
    let (base, query) = match server_url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (server_url, String::new()),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    format!("{base}/{name}{query}")
}

// ---------------------------------------------------------------- the app

pub struct TestApp {
    pub address: String,
    /// The address of the `/metrics` listener, when `metrics.bind` gives it one.
    pub metrics_address: Option<String>,
    pub client: reqwest::Client,
    pub admin_token: String,
    pub state: Arc<AppState>,
    pub db: Arc<TestDb>,
    stopper: tokio_util::sync::CancellationToken,
    running: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// The settings a test app runs with: port 0, the given database, extra TOML on top.
pub fn test_settings(db: &TestDb, extra: &str) -> Settings {
    let base = format!(
        "[server]\nbind = \"127.0.0.1:0\"\nworkers = 2\n\
         [database]\nurl = \"{}\"\nmax_connections = 8\n\
         [engine]\nlease_ms = 1000\nlease_sweep_ms = 200\n\
         [auth]\nadmin_secret = \"{ADMIN_SECRET}\"\n\
         {TEST_AGENTS}",
        db.url()
    );
    Settings::from_toml_layers(&[&base, extra]).expect("test settings are valid")
}

pub async fn spawn_app() -> TestApp {
    spawn_app_on(Arc::new(TestDb::new().await), "").await
}

/// Starts an app on an existing database (a restart, when one ran there before).
pub async fn spawn_app_on(db: Arc<TestDb>, extra: &str) -> TestApp {
    install_log_capture();
    let settings = test_settings(&db, extra);
    let app = App::build(settings).await.expect("the app builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    let metrics_address = app
        .metrics_port()
        .map(|port| format!("http://127.0.0.1:{port}"));
    let state = app.state();
    let stopper = app.stopper();
    let running = tokio::spawn(app.run_until_stopped());
    let client = reqwest::Client::new();
    let login: Value = client
        .post(format!("{address}/auth/token"))
        .json(&json!({"client_id": "admin", "client_secret": ADMIN_SECRET}))
        .send()
        .await
        .expect("the app answers")
        .json()
        .await
        .unwrap();
    let admin_token = login["access_token"]
        .as_str()
        .expect("admin login works")
        .to_owned();
    TestApp {
        address,
        metrics_address,
        client,
        admin_token,
        state,
        db,
        stopper,
        running,
    }
}

/// A response: its status and its body as JSON (`Null` when empty or not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    /// The error code of a JSON error body.
    pub fn code(&self) -> &str {
        self.body["error"]["code"]
            .as_str()
            .unwrap_or("<no error code>")
    }
}

impl TestApp {
    /// Shuts the app down as SIGTERM would, and waits until it has.
    pub async fn stop(self) -> Arc<TestDb> {
        self.stopper.cancel();
        self.running
            .await
            .expect("the app task")
            .expect("the app stops cleanly");
        self.db
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Reply {
        let mut request = self.client.request(method, self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.request(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Reply {
        self.request(Method::POST, path, Some(token), Some(&body))
            .await
    }

    pub async fn patch(&self, path: &str, token: &str, body: Value) -> Reply {
        self.request(Method::PATCH, path, Some(token), Some(&body))
            .await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Reply {
        self.request(Method::DELETE, path, Some(token), None).await
    }

    /// Creates a tenant through the admin API; returns its id.
    pub async fn create_tenant(&self, name: &str) -> String {
        let reply = self
            .post("/admin/tenants", &self.admin_token, json!({"name": name}))
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        reply.body["id"].as_str().unwrap().to_owned()
    }

    /// An API key for the tenant, minted by the admin.
    pub async fn token_for(&self, tenant: &str) -> String {
        let reply = self
            .post(
                &format!("/admin/tenants/{tenant}/tokens"),
                &self.admin_token,
                json!({}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        reply.body["token"].as_str().unwrap().to_owned()
    }

    /// A fresh tenant (uniquely named) and a token for it.
    pub async fn new_tenant(&self) -> (String, String) {
        let tenant = self
            .create_tenant(&format!("tenant-{}", uuid::Uuid::new_v4().simple()))
            .await;
        let token = self.token_for(&tenant).await;
        (tenant, token)
    }

    /// POSTs a turn and returns its SSE stream.
    pub async fn stream_turn(&self, token: &str, session: &str, body: Value) -> SseReader {
        let response = self
            .client
            .post(self.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("request sent");
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{:?}",
            response.headers()
        );
        SseReader::new(response)
    }

    /// GETs an SSE route, optionally resuming after `last_event_id`.
    pub async fn stream(&self, path: &str, token: &str, last_event_id: Option<i64>) -> SseReader {
        let mut request = self.client.get(self.url(path)).bearer_auth(token);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.expect("request sent");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        SseReader::new(response)
    }

    /// Creates a session; returns its id.
    pub async fn create_session(&self, token: &str, body: Value) -> String {
        let reply = self.post("/sessions", token, body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
        reply.body["sessionId"].as_str().unwrap().to_owned()
    }
}
