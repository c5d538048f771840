//! The real `agentry` binary as a child process, for tests of what only a process has:
//! the command line, start-up, signals, crashes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::helpers::TestDb;
use crate::sse::SseReader;

pub const BINARY: &str = env!("CARGO_BIN_EXE_agentry");

/// The binary the tests run: `AGENTRY_TEST_BINARY` names another build (a release build,
/// for fault runs against what ships), else the one built with the tests.
pub fn binary() -> String {
    std::env::var("AGENTRY_TEST_BINARY")
        .ok()
        .filter(|path| !path.is_empty())
        .unwrap_or_else(|| BINARY.to_owned())
}

/// An agent that streams one character every 50 ms: a turn of 60 characters takes 3 s.
pub const SLOW_AGENT: &str = r#"
[[agents]]
name = "slow"
provider = "echo"
chunk_size = 1
delay_ms = 50
"#;

/// The `auth.admin_secret` of a [`Deployment`]'s processes.
pub const DEPLOYMENT_ADMIN_SECRET: &str = "deployment-admin";

/// A database and a configuration file that a test's `agentry` commands and servers share.
pub struct Deployment {
    pub db: TestDb,
    _dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Deployment {
    /// On a fresh database, with `config` as the configuration file.
    pub async fn new(config: &str) -> Deployment {
        Deployment::on(TestDb::new().await, config)
    }

    pub fn on(db: TestDb, config: &str) -> Deployment {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentry.toml");
        std::fs::write(&path, config).unwrap();
        Deployment {
            db,
            _dir: dir,
            config: path,
        }
    }

    pub fn command(&self) -> Command {
        let mut command = agentry(self.db.url());
        command
            .arg("--config")
            .arg(&self.config)
            .env("AGENTRY__AUTH__ADMIN_SECRET", DEPLOYMENT_ADMIN_SECRET);
        command
    }

    /// `agentry serve` with extra environment.
    pub fn start(&self, env: &[(&str, &str)]) -> ServerProcess {
        let mut command = self.command();
        command.envs(env.iter().copied());
        ServerProcess::start(command)
    }

    /// A new tenant, made with the CLI, and a token of it: `(tenant, token)`.
    pub fn tenant_token(&self, name: &str) -> (String, String) {
        let tenant = run_ok(
            self.command()
                .args(["admin", "create-tenant", name, "--raw"]),
        );
        let tenant = tenant.trim().to_owned();
        let token = run_ok(
            self.command()
                .args(["admin", "issue-token", &tenant, "--raw"]),
        );
        (tenant, token.trim().to_owned())
    }
}

/// A command of the binary with the environment a test controls.
pub fn agentry(database_url: &str) -> Command {
    let mut command = Command::new(binary());
    command
        .env_remove("AGENTRY_CONFIG")
        .env_remove("RUST_LOG")
        .env("AGENTRY__DATABASE__URL", database_url)
        .env("AGENTRY__LOG__FORMAT", "json")
        .env("AGENTRY__LOG__LEVEL", "info")
        // A killed process's turns are taken over within a second and a half.
        .env("AGENTRY__ENGINE__LEASE_MS", "1000")
        .env("AGENTRY__ENGINE__LEASE_SWEEP_MS", "200");
    command
}

/// Runs a command to completion and returns its standard output; panics on failure.
pub fn run_ok(command: &mut Command) -> String {
    let output = command.output().expect("the binary runs");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `agentry serve` on a free port.
pub struct ServerProcess {
    child: Child,
    pub address: String,
    pub logs: Arc<Mutex<Vec<String>>>,
}

impl ServerProcess {
    pub fn start(mut command: Command) -> ServerProcess {
        command
            .arg("serve")
            .env("AGENTRY__SERVER__BIND", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("agentry serve starts");
        let stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (port_tx, port_rx) = mpsc::channel();
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(event) = serde_json::from_str::<serde_json::Value>(&line)
                    && event["fields"]["message"] == "agentry is listening"
                {
                    let _ = port_tx.send(event["fields"]["port"].as_u64().unwrap());
                }
                sink.lock().unwrap().push(line);
            }
        });
        let port = match port_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                panic!("agentry serve did not start: {:?}", logs.lock().unwrap());
            }
        };
        ServerProcess {
            child,
            address: format!("http://127.0.0.1:{port}"),
            logs,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// The server's process id (its memory is read from `/proc`, signals are sent to it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Creates a session of `agent` for `token`; returns its id.
    pub async fn create_session(&self, token: &str, agent: &str) -> String {
        let reply = reqwest::Client::new()
            .post(self.url("/sessions"))
            .bearer_auth(token)
            .json(&serde_json::json!({"agent": {"name": agent}}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), reqwest::StatusCode::CREATED);
        let body: serde_json::Value = reply.json().await.unwrap();
        body["sessionId"].as_str().unwrap().to_owned()
    }

    /// Posts a turn of `text` in delta mode and returns its stream.
    pub async fn stream_turn(&self, token: &str, session: &str, text: &str) -> SseReader {
        let response = reqwest::Client::new()
            .post(self.url(&format!("/sessions/{session}/turns")))
            .bearer_auth(token)
            .json(&serde_json::json!({"stream": "delta", "messages": [{"role": "user", "content": text}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::OK);
        SseReader::new(response)
    }

    /// A turn's events from the log, after `after` if given (`Last-Event-ID`).
    pub async fn follow_turn(
        &self,
        token: &str,
        session: &str,
        turn: &str,
        after: Option<i64>,
    ) -> SseReader {
        let mut request = reqwest::Client::new()
            .get(self.url(&format!("/sessions/{session}/turns/{turn}/events")))
            .bearer_auth(token);
        if let Some(after) = after {
            request = request.header("Last-Event-ID", after.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::OK);
        SseReader::new(response)
    }

    /// The JSON body of a GET.
    pub async fn get_json(&self, token: &str, path: &str) -> serde_json::Value {
        reqwest::Client::new()
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Waits (up to 60 s) until the server has logged a line containing `needle`.
    pub async fn logged(&self, needle: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !self.logs.lock().unwrap().iter().any(|l| l.contains(needle)) {
            assert!(
                std::time::Instant::now() < deadline,
                "the server never logged {needle:?}: {:?}",
                self.logs.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("reap");
    }

    /// SIGTERM: a graceful shutdown.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill -TERM runs");
        assert!(status.success());
    }

    /// Waits for the process to exit on its own.
    pub fn wait_exit(mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "agentry did not exit within {limit:?}: {:?}",
                self.logs.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test shows what its server warned of: the cause of a failure under load
        // (a lease not renewed in time, a database call past its timeout) is in these lines.
        if std::thread::panicking() {
            let logs = self
                .logs
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let warnings: Vec<&String> = logs
                .iter()
                .filter(|line| {
                    line.contains("\"level\":\"WARN\"") || line.contains("\"level\":\"ERROR\"")
                })
                .collect();
            let shown = &warnings[warnings.len().saturating_sub(40)..];
            eprintln!(
                "server {} logged {} warnings and errors; the last {}:",
                self.address,
                warnings.len(),
                shown.len()
            );
            for line in shown {
                eprintln!("  {line}");
            }
        }
    }
}
