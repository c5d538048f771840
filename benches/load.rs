//! A load generator for a running agentry server (it starts nothing by itself).
//!
//! Pinned recipe: the server on one core, the generator on the other, so neither steals
//! the other's CPU (the figures of an unpinned run on a small machine mostly measure the
//! scheduler):
//!
//! ```text
//! AGENTRY__AUTH__ADMIN_SECRET=bench AGENTRY__LOG__LEVEL=warn AGENTRY__DATABASE__URL=sqlite:///tmp/agentry-bench.db taskset -c 0 target/release/agentry serve & echo $! > /tmp/agentry.pid
//! taskset -c 1 cargo bench --bench load -- --admin-secret bench --mode all-modes --connections 8 --database-url sqlite:///tmp/agentry-bench.db --pid-file /tmp/agentry.pid
//! ```
//!
//! Use a fresh database file per run; the server listens on `server.bind`
//! (`AGENTRY__SERVER__BIND`, default `127.0.0.1:8080`), which `--url` must name.
//!
//! It logs in as `admin` with `--admin-secret`, creates tenants, tokens and sessions on the
//! default `echo` agent (8 characters per delta, 8 sessions per tenant so per-tenant limits
//! do not cap the figures), then prints one line per figure.
//!
//! `--mode` chooses what runs:
//!
//! - `none`, `delta`, `message`: AAP turns (`POST /sessions/{id}/turns`) of the 160-character
//!   prompt (20 deltas) with that `stream` value; an SSE turn counts once its `turn_stop`
//!   frame arrived (delta mode) or its stream ended after one (message mode).
//! - `agentscope`: `POST /agentscope/process` of a 16-character text on the same kind of
//!   sessions (`session_id` = the AAP session's id): 8 SSE frames per response (created,
//!   in progress, message, 2 deltas, content completed, message completed, response
//!   completed), read to the end of the stream; the line reports the count seen.
//! - `all-modes`: the four above in sequence; `full` (the default): the four, then the
//!   latency, replay and fan-out figures below.
//! - `long`: `none` turns on fresh sessions and on sessions that start with `--history`
//!   messages, in `--rounds` rounds, and the ratio of their turns/s (`load/long.rs`).
//!
//! Each of the four throughput modes creates `--sessions` sessions of its own, then runs
//! `--connections` tasks on one pooled HTTP client (each task keeps its keep-alive
//! connection); each task takes the next session round robin from a shared counter, posts a
//! turn and waits for it to end, `--warmup` seconds unmeasured and then `--duration`
//! seconds measured. A turn counts when its response is 2xx and complete and the turn did
//! not end in error; anything else is an error, counted by kind (409 or an AgentScope
//! `session_busy` frame, 429, other 4xx, 5xx, transport failure or 30 s timeout, a stream
//! cut short, a turn ended in error) over warm-up and measurement together, and never
//! stops the run. The line `mode=...` gives turns per second and whole-request latency
//! percentiles of the turns that ended in the measured window, plus for SSE modes the time
//! from sending the request to its `turn_start` frame (AgentScope: to its first frame) and
//! to its first `text_delta` (message mode: the first whole-message frame, `text`,
//! `thinking` or `tool_call`; AgentScope: the first delta).
//!
//! With `--database-url` (the server's own database URL) each mode also reports the bytes
//! stored per turn: the database's size after the mode minus its size before (after the
//! mode's sessions were created), divided by every turn completed, warm-up included (its
//! turns are stored too). SQLite: a read-write connection of the generator's own, opened
//! only for the measurement, runs `PRAGMA wal_checkpoint(TRUNCATE)` and counts
//! `page_count * page_size - freelist_count * page_size`. PostgreSQL:
//! `pg_database_size(current_database())`, which counts whole files of 8 kB pages grown in
//! steps and leaves out the WAL: coarse, meaningful only over many turns.
//!
//! With `--server-pid` or `--pid-file` it reports the server's resident memory (VmRSS of
//! `/proc/PID/status`, in MB) before the first mode and after each one.
//!
//! `--concurrency` is an alias of `--connections` (whose default is 8).
//!
//! `full` then runs the earlier figures: POST→`turn_start` and POST→first-delta latency at
//! `--latency-clients` clients for `--duration` seconds, the replay of a turn of
//! `--replay-events` deltas, and the lag of `--subscribers` live subscribers of one session.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use futures_util::StreamExt;
use serde_json::{Value, json};
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};
use tokio::sync::Mutex;

#[path = "common/failures.rs"]
mod failures;
#[path = "load/long.rs"]
mod long;

use failures::{Errors, Failure};

#[derive(Debug, Parser)]
#[command(about = "Drives a running agentry server and prints throughput and latency figures")]
struct Args {
    /// The server's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The server's `auth.admin_secret`.
    #[arg(long, env = "AGENTRY_BENCH_ADMIN_SECRET")]
    admin_secret: String,
    /// What runs: one throughput mode (none, delta, message, agentscope), all four in
    /// sequence (all-modes), the four and then the latency, replay and fan-out figures
    /// (full), or `none` turns on fresh and on long sessions compared (long).
    #[arg(long, value_enum, default_value_t = Mode::Full)]
    mode: Mode,
    /// Concurrent connections (one task each) of the throughput modes.
    #[arg(long, visible_alias = "concurrency", default_value_t = 8)]
    connections: usize,
    /// Sessions each throughput mode creates and posts to round robin.
    #[arg(long, default_value_t = 256)]
    sessions: usize,
    /// Unmeasured seconds at the start of each throughput mode.
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Measured seconds of each throughput mode, and seconds of the latency figure.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// The server's database URL (`sqlite:///path` or `postgres://...`): reports the bytes
    /// stored per turn of each throughput mode.
    #[arg(long)]
    database_url: Option<String>,
    /// The server's process id: reports its resident memory (VmRSS) before the first mode
    /// and after each one.
    #[arg(long, conflicts_with = "pid_file")]
    server_pid: Option<u32>,
    /// A file holding the server's process id (as `--server-pid`).
    #[arg(long)]
    pid_file: Option<PathBuf>,
    /// The server's log file, written with `RUST_LOG=warn,sqlx::query=debug,agentry::engine::writer=debug`:
    /// reports the statements and the writer's committed batches per turn of each mode
    /// (logging them costs the server throughput: count in a run of its own).
    #[arg(long)]
    server_log: Option<PathBuf>,
    /// Concurrent clients of the latency figure (`full` only).
    #[arg(long, default_value_t = 8)]
    latency_clients: usize,
    /// Subscribers of the fan-out figure (`full` only).
    #[arg(long, default_value_t = 1000)]
    subscribers: usize,
    /// Events of the replay figure (`full` only).
    #[arg(long, default_value_t = 10_000)]
    replay_events: usize,
    /// Messages of history each long session starts with (`long` only).
    #[arg(long, default_value_t = 1000)]
    history: usize,
    /// Rounds of a fresh and a long phase (`long` only).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Ignored: `cargo bench` passes it.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    None,
    Delta,
    Message,
    Agentscope,
    AllModes,
    Full,
    Long,
}

impl Mode {
    fn kinds(self) -> Vec<Kind> {
        match self {
            Mode::None => vec![Kind::None],
            Mode::Delta => vec![Kind::Delta],
            Mode::Message => vec![Kind::Message],
            Mode::Agentscope => vec![Kind::AgentScope],
            Mode::AllModes | Mode::Full => {
                vec![Kind::None, Kind::Delta, Kind::Message, Kind::AgentScope]
            }
            Mode::Long => Vec::new(),
        }
    }
}

/// One throughput mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    None,
    Delta,
    Message,
    AgentScope,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::None => "none",
            Kind::Delta => "delta",
            Kind::Message => "message",
            Kind::AgentScope => "agentscope",
        }
    }

    /// Keys of the two partial latencies of an SSE mode.
    fn partial_keys(self) -> Option<(&'static str, &'static str)> {
        match self {
            Kind::None => None,
            Kind::Delta => Some(("turn_start", "first_delta")),
            Kind::Message => Some(("turn_start", "first_message")),
            Kind::AgentScope => Some(("first_frame", "first_delta")),
        }
    }
}

/// Tenants share the load so per-tenant limits do not cap the figures.
const CLIENTS_PER_TENANT: usize = 8;
/// 20 deltas of 8 characters.
const TWENTY_DELTAS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ";
/// 2 deltas, hence 8 AgentScope frames.
const AGENTSCOPE_TEXT: &str = "abcdefghijklmnop";
/// The longest a throughput turn may take before it counts as a transport failure.
const TURN_TIMEOUT: Duration = Duration::from_secs(30);

struct Bench {
    http: reqwest::Client,
    url: String,
    admin: String,
}

impl Bench {
    async fn post(&self, path: &str, token: &str, body: Value) -> Value {
        let response = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("the server answers");
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "POST {path}: {status} {body}");
        body
    }

    async fn tenant_token(&self) -> String {
        let name = format!("bench-{}", uuid::Uuid::new_v4().simple());
        let tenant = self
            .post("/admin/tenants", &self.admin, json!({"name": name}))
            .await;
        let id = tenant["id"].as_str().unwrap();
        let token = self
            .post(
                &format!("/admin/tenants/{id}/tokens"),
                &self.admin,
                json!({}),
            )
            .await;
        token["token"].as_str().unwrap().to_owned()
    }

    async fn session(&self, token: &str) -> String {
        let session = self
            .post("/sessions", token, json!({"agent": {"name": "echo"}}))
            .await;
        session["sessionId"].as_str().unwrap().to_owned()
    }

    /// `count` sessions as (token, session id), spread over tenants.
    async fn clients(&self, count: usize) -> Vec<(String, String)> {
        let mut clients = Vec::with_capacity(count);
        let mut token = String::new();
        for i in 0..count {
            if i % CLIENTS_PER_TENANT == 0 {
                token = self.tenant_token().await;
            }
            clients.push((token.clone(), self.session(&token).await));
        }
        clients
    }

    async fn stream(&self, request: reqwest::RequestBuilder) -> SseFrames {
        let response = request.send().await.expect("the server answers");
        assert!(
            response.status() != reqwest::StatusCode::TOO_MANY_REQUESTS,
            "429: more open streams than the server allows (start it for --subscribers with \
             AGENTRY__LIMITS__MAX_STREAMS_PER_TENANT and AGENTRY__LIMITS__MAX_STREAMS_PER_ADDRESS \
             above that number)"
        );
        assert!(response.status().is_success(), "{}", response.status());
        SseFrames::new(response)
    }

    fn turn_request(
        &self,
        token: &str,
        session: &str,
        stream: &str,
        text: &str,
    ) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/sessions/{session}/turns", self.url))
            .bearer_auth(token)
            .json(&json!({"stream": stream, "messages": [{"role": "user", "content": text}]}))
    }

    fn agentscope_request(&self, token: &str, session: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/agentscope/process", self.url))
            .bearer_auth(token)
            .json(&json!({
                "model": "echo",
                "session_id": session,
                "input": [{"role": "user", "content": [{"type": "text", "text": AGENTSCOPE_TEXT}]}],
            }))
    }
}

/// One SSE frame: its id, event name and data (lines joined by `\n`).
struct Frame {
    id: Option<i64>,
    event: Option<String>,
    data: String,
}

/// Just enough SSE parsing for agentry's frames (`\n` line ends, one space after colons).
struct SseFrames {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
    /// Where the unread part of `buffer` starts.
    read: usize,
}

impl SseFrames {
    fn new(response: reqwest::Response) -> Self {
        SseFrames {
            body: response.bytes_stream().boxed(),
            buffer: Vec::new(),
            read: 0,
        }
    }

    /// The next frame (comments skipped); `Ok(None)` at the end of the body.
    async fn next_frame(&mut self) -> reqwest::Result<Option<Frame>> {
        let mut scanned = self.read;
        loop {
            let from = scanned.saturating_sub(1).max(self.read);
            if let Some(at) = self.buffer[from..].windows(2).position(|w| w == b"\n\n") {
                let end = from + at;
                let frame = parse_frame(&self.buffer[self.read..end]);
                self.read = end + 2;
                scanned = self.read;
                match frame {
                    Some(frame) => return Ok(Some(frame)),
                    None => continue,
                }
            }
            self.buffer.drain(..self.read);
            self.read = 0;
            scanned = self.buffer.len();
            match self.body.next().await {
                Some(chunk) => self.buffer.extend_from_slice(&chunk?),
                None => return Ok(None),
            }
        }
    }

    /// The next frame with an id and an event name; `None` at the end or on a failure.
    async fn next(&mut self) -> Option<(i64, String)> {
        loop {
            let frame = self.next_frame().await.ok()??;
            if let (Some(id), Some(event)) = (frame.id, frame.event) {
                return Some((id, event));
            }
        }
    }

    /// Reads what is left of the body so the connection goes back to the pool.
    async fn drain(mut self) {
        let rest = async { while let Some(Ok(_)) = self.body.next().await {} };
        let _ = tokio::time::timeout(Duration::from_secs(1), rest).await;
    }
}

/// A frame's fields; `None` for a block of comments only.
fn parse_frame(block: &[u8]) -> Option<Frame> {
    let mut frame = Frame {
        id: None,
        event: None,
        data: String::new(),
    };
    let (mut fields, mut data_lines) = (false, 0);
    for line in block.split(|b| *b == b'\n') {
        let line = String::from_utf8_lossy(line);
        if let Some(v) = line.strip_prefix("id: ") {
            frame.id = v.parse().ok();
            fields = true;
        } else if let Some(v) = line.strip_prefix("event: ") {
            frame.event = Some(v.to_owned());
            fields = true;
        } else if let Some(v) = line.strip_prefix("data: ") {
            if data_lines > 0 {
                frame.data.push('\n');
            }
            frame.data.push_str(v);
            data_lines += 1;
            fields = true;
        }
    }
    fields.then_some(frame)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Milliseconds with 3 decimals, for `key=value` fields.
fn msv(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// Runs `work` on every client until the deadline; returns completed turns and seconds.
async fn throughput<F, Fut>(
    bench: &Arc<Bench>,
    clients: &[(String, String)],
    seconds: u64,
    work: F,
) -> (usize, f64)
where
    F: Fn(Arc<Bench>, String, String) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for (token, session) in clients {
        let (token, session) = (token.clone(), session.clone());
        let bench = bench.clone();
        let work = work.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0usize;
            while Instant::now() < deadline {
                work(bench.clone(), token.clone(), session.clone()).await;
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    (total, started.elapsed().as_secs_f64())
}

/// A completed turn's timings, from just before its request was sent.
#[derive(Debug, Clone, Copy)]
struct Sample {
    total: Duration,
    /// `turn_start` (AgentScope: the first frame).
    start: Option<Duration>,
    /// The first delta (message mode: the first whole-message frame).
    first: Option<Duration>,
    /// SSE frames the response carried.
    frames: usize,
}

/// What one task of a throughput mode saw.
#[derive(Default)]
struct Tally {
    /// Turns that ended in the measured window.
    measured: Vec<Sample>,
    /// Every completed turn, warm-up and stragglers included.
    completed: usize,
    errors: Errors,
}

/// One AAP turn on `session`.
async fn aap_turn(
    bench: &Bench,
    kind: Kind,
    token: &str,
    session: &str,
) -> Result<Sample, Failure> {
    let sent = Instant::now();
    let response = bench
        .turn_request(token, session, kind.name(), TWENTY_DELTAS)
        .send()
        .await
        .map_err(|_| Failure::Io)?;
    let status = response.status();
    if !status.is_success() {
        let _ = response.bytes().await;
        return Err(Failure::of_status(status));
    }
    if kind == Kind::None {
        let body = response.bytes().await.map_err(|_| Failure::Io)?;
        let total = sent.elapsed();
        let reply: Value = serde_json::from_slice(&body).map_err(|_| Failure::Incomplete)?;
        if !reply["error"].is_null() || reply["stopReason"] == "error" {
            return Err(Failure::Turn);
        }
        return Ok(Sample {
            total,
            start: None,
            first: None,
            frames: 0,
        });
    }
    let mut frames = SseFrames::new(response);
    let (mut start, mut first, mut count, mut stop) = (None, None, 0, None);
    while let Some(frame) = frames.next_frame().await.map_err(|_| Failure::Io)? {
        count += 1;
        match frame.event.as_deref() {
            Some("turn_start") => {
                start.get_or_insert(sent.elapsed());
            }
            Some("text_delta") if kind == Kind::Delta => {
                first.get_or_insert(sent.elapsed());
            }
            Some("text" | "thinking" | "tool_call") if kind == Kind::Message => {
                first.get_or_insert(sent.elapsed());
            }
            Some("turn_stop") => {
                stop = Some((sent.elapsed(), frame.data.contains("\"error\"")));
                if kind == Kind::Delta {
                    break;
                }
            }
            _ => {}
        }
    }
    if kind == Kind::Delta {
        frames.drain().await;
    }
    match stop {
        None => Err(Failure::Incomplete),
        Some((_, true)) => Err(Failure::Turn),
        Some((at_stop, false)) => Ok(Sample {
            total: if kind == Kind::Delta {
                at_stop
            } else {
                sent.elapsed()
            },
            start,
            first,
            frames: count,
        }),
    }
}

/// One `POST /agentscope/process` on `session`, read to the end of its stream.
async fn agentscope_turn(bench: &Bench, token: &str, session: &str) -> Result<Sample, Failure> {
    let sent = Instant::now();
    let response = bench
        .agentscope_request(token, session)
        .send()
        .await
        .map_err(|_| Failure::Io)?;
    let status = response.status();
    if !status.is_success() {
        let _ = response.bytes().await;
        return Err(Failure::of_status(status));
    }
    let mut frames = SseFrames::new(response);
    let (mut start, mut first, mut count, mut last) = (None, None, 0, String::new());
    while let Some(frame) = frames.next_frame().await.map_err(|_| Failure::Io)? {
        if frame.data.is_empty() {
            continue;
        }
        count += 1;
        start.get_or_insert(sent.elapsed());
        if first.is_none() && frame.data.contains("\"delta\":true") {
            first = Some(sent.elapsed());
        }
        last = frame.data;
    }
    let total = sent.elapsed();
    if last.contains("\"object\":\"response\",\"status\":\"completed\"") {
        Ok(Sample {
            total,
            start,
            first,
            frames: count,
        })
    } else if last.contains("session_busy") {
        Err(Failure::Busy)
    } else if last.contains("\"object\":\"response\"") {
        Err(Failure::Turn)
    } else if count == 1 && last.starts_with("{\"error\"") {
        Err(Failure::Client)
    } else {
        Err(Failure::Incomplete)
    }
}

/// The server's database, measured before and after each throughput mode.
enum Storage {
    Sqlite(SqliteConnectOptions),
    Postgres(PgConnectOptions),
}

impl Storage {
    fn new(url: &str) -> Result<Storage, sqlx::Error> {
        if url.starts_with("sqlite:") {
            Ok(Storage::Sqlite(
                SqliteConnectOptions::from_str(url)?
                    .read_only(false)
                    .create_if_missing(false)
                    .busy_timeout(Duration::from_secs(10)),
            ))
        } else {
            Ok(Storage::Postgres(PgConnectOptions::from_str(url)?))
        }
    }

    /// Bytes the database holds now, on a connection opened for the measurement only.
    async fn bytes(&self) -> Result<i64, sqlx::Error> {
        match self {
            Storage::Sqlite(options) => {
                let mut db = options.connect().await?;
                let (busy, _, _): (i64, i64, i64) =
                    sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
                        .fetch_one(&mut db)
                        .await?;
                if busy != 0 {
                    eprintln!("warning: the WAL checkpoint was blocked; the size is approximate");
                }
                let mut pragma = async |name: &'static str| -> Result<i64, sqlx::Error> {
                    sqlx::query_scalar(name).fetch_one(&mut db).await
                };
                let pages = pragma("PRAGMA page_count").await?;
                let page_size = pragma("PRAGMA page_size").await?;
                let free = pragma("PRAGMA freelist_count").await?;
                db.close().await?;
                Ok((pages - free) * page_size)
            }
            Storage::Postgres(options) => {
                let mut db = options.connect().await?;
                let size: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
                    .fetch_one(&mut db)
                    .await?;
                db.close().await?;
                Ok(size)
            }
        }
    }

    /// `bytes`, or `None` with a warning.
    async fn measure(&self) -> Option<i64> {
        self.bytes()
            .await
            .inspect_err(|error| eprintln!("warning: measuring the database failed: {error}"))
            .ok()
    }
}

/// What the server logged during a mode: statements sqlx ran, batches the writer committed.
#[derive(Debug, Clone, Copy)]
struct Logged {
    statements: usize,
    batches: usize,
}

fn log_length(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Counts the records of the server's log after byte `from` (only that part is read).
fn count_logged(path: &std::path::Path, from: u64) -> Logged {
    use std::io::{BufRead, Seek};
    let mut logged = Logged {
        statements: 0,
        batches: 0,
    };
    let file = std::fs::File::open(path).and_then(|mut file| {
        file.seek(std::io::SeekFrom::Start(from))?;
        Ok(file)
    });
    let file = match file {
        Ok(file) => file,
        Err(error) => {
            eprintln!("warning: reading the server's log failed: {error}");
            return logged;
        }
    };
    for line in std::io::BufReader::new(file)
        .split(b'\n')
        .map_while(Result::ok)
    {
        let line = String::from_utf8_lossy(&line);
        if line.contains("sqlx::query") {
            logged.statements += 1;
        } else if line.contains("batch committed") {
            logged.batches += 1;
        }
    }
    logged
}

/// The server's resident memory in MB (VmRSS of /proc/PID/status).
fn rss_mb(pid: Option<u32>) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?))
        .inspect_err(|error| eprintln!("warning: reading the server's memory failed: {error}"))
        .ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Posts turns of `kind` to `sessions` round robin over `connections` tasks, `warmup`
/// unmeasured and then `duration` measured: the samples of the turns that ended in the
/// measured window, every completed turn (warm-up included) and the failures.
async fn drive(
    bench: &Arc<Bench>,
    sessions: Arc<Vec<(String, String)>>,
    kind: Kind,
    connections: usize,
    warmup: Duration,
    duration: Duration,
) -> (Vec<Sample>, usize, Errors) {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let measured_from = started + warmup;
    let deadline = measured_from + duration;
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (bench, sessions, next) = (bench.clone(), sessions.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            while Instant::now() < deadline {
                let (token, session) =
                    &sessions[next.fetch_add(1, Ordering::Relaxed) % sessions.len()];
                let turn = async {
                    match kind {
                        Kind::AgentScope => agentscope_turn(&bench, token, session).await,
                        _ => aap_turn(&bench, kind, token, session).await,
                    }
                };
                let outcome = tokio::time::timeout(TURN_TIMEOUT, turn)
                    .await
                    .unwrap_or(Err(Failure::Io));
                let ended = Instant::now();
                match outcome {
                    Ok(sample) => {
                        tally.completed += 1;
                        if ended >= measured_from && ended <= deadline {
                            tally.measured.push(sample);
                        }
                    }
                    Err(failure) => {
                        tally.errors.failed(failure).await;
                    }
                }
            }
            tally
        }));
    }
    let mut samples = Vec::new();
    let mut completed = 0;
    let mut errors = Errors::default();
    for task in tasks {
        let tally = task.await.expect("a connection's task");
        samples.extend(tally.measured);
        completed += tally.completed;
        errors.add(&tally.errors);
    }

    (samples, completed, errors)
}

/// Runs one throughput mode and prints its line.
async fn run_mode(
    bench: &Arc<Bench>,
    args: &Args,
    kind: Kind,
    storage: Option<&Storage>,
    pid: Option<u32>,
) {
    let sessions = Arc::new(bench.clients(args.sessions).await);
    let stored_before = match storage {
        Some(storage) => storage.measure().await,
        None => None,
    };
    let rss_before = rss_mb(pid);
    let log_before = args.server_log.as_deref().map(log_length);

    let (samples, completed, errors) = drive(
        bench,
        sessions,
        kind,
        args.connections,
        Duration::from_secs(args.warmup),
        Duration::from_secs(args.duration),
    )
    .await;

    let stored_after = match (storage, stored_before) {
        (Some(storage), Some(_)) => storage.measure().await,
        _ => None,
    };
    let rss_after = rss_mb(pid);
    let logged = match (&args.server_log, log_before) {
        (Some(path), Some(from)) => Some(count_logged(path, from)),
        _ => None,
    };
    report(ReportInput {
        kind,
        args,
        samples,
        completed,
        errors,
        stored: stored_before.zip(stored_after),
        rss: (rss_before, rss_after),
        logged,
    });
}

struct ReportInput<'a> {
    kind: Kind,
    args: &'a Args,
    samples: Vec<Sample>,
    completed: usize,
    errors: Errors,
    stored: Option<(i64, i64)>,
    rss: (Option<f64>, Option<f64>),
    logged: Option<Logged>,
}

/// Prints a mode's `key=value` line, then the same in words.
fn report(input: ReportInput<'_>) {
    let ReportInput {
        kind,
        args,
        samples,
        completed,
        errors,
        stored,
        rss,
        logged,
    } = input;
    let seconds = args.duration as f64;
    let mut totals: Vec<Duration> = samples.iter().map(|s| s.total).collect();
    totals.sort();
    let rate = totals.len() as f64 / seconds;
    let max = totals.last().copied().unwrap_or_default();
    let mut fields = vec![
        format!("mode={}", kind.name()),
        format!("connections={}", args.connections),
        format!("sessions={}", args.sessions),
        format!("duration_s={}", args.duration),
        format!("turns={}", totals.len()),
        format!("turns_per_s={rate:.1}"),
        format!("p50_ms={}", msv(percentile(&totals, 50.0))),
        format!("p90_ms={}", msv(percentile(&totals, 90.0))),
        format!("p99_ms={}", msv(percentile(&totals, 99.0))),
        format!("max_ms={}", msv(max)),
    ];
    let mut words = format!(
        "{}: {rate:.0} turns/s at {} connections; request p50 {}, p99 {}",
        kind.name(),
        args.connections,
        ms(percentile(&totals, 50.0)),
        ms(percentile(&totals, 99.0)),
    );
    if let Some((start_key, first_key)) = kind.partial_keys() {
        let mut starts: Vec<Duration> = samples.iter().filter_map(|s| s.start).collect();
        let mut firsts: Vec<Duration> = samples.iter().filter_map(|s| s.first).collect();
        starts.sort();
        firsts.sort();
        for (key, sorted) in [(start_key, &starts), (first_key, &firsts)] {
            fields.push(format!("{key}_p50_ms={}", msv(percentile(sorted, 50.0))));
            fields.push(format!("{key}_p99_ms={}", msv(percentile(sorted, 99.0))));
            words.push_str(&format!(
                "; POST -> {} p50 {}, p99 {}",
                key.replace('_', " "),
                ms(percentile(sorted, 50.0)),
                ms(percentile(sorted, 99.0))
            ));
        }
        if kind == Kind::AgentScope {
            let counts = samples.iter().map(|s| s.frames);
            let (least, most) = (counts.clone().min().unwrap_or(0), counts.max().unwrap_or(0));
            let events = if least == most {
                least.to_string()
            } else {
                format!("{least}-{most}")
            };
            fields.push(format!("events_per_response={events}"));
            words.push_str(&format!("; {events} events per response"));
        }
    }
    fields.extend([
        format!("errors={}", errors.total()),
        format!("errors_409={}", errors.busy),
        format!("errors_429={}", errors.too_many),
        format!("errors_4xx={}", errors.client),
        format!("errors_5xx={}", errors.server),
        format!("errors_io={}", errors.io),
        format!("errors_incomplete={}", errors.incomplete),
        format!("errors_turn={}", errors.turn),
        format!("completed_with_warmup={completed}"),
    ]);
    words.push_str(&format!("; {} errors", errors.total()));
    if let Some((before, after)) = stored
        && completed > 0
    {
        let per_turn = (after - before) as f64 / completed as f64;
        fields.push(format!("bytes_per_turn={per_turn:.0}"));
        words.push_str(&format!(
            "; stored bytes per turn: {per_turn:.0} ({} bytes over {completed} turns)",
            after - before
        ));
    }
    if let (Some(before), Some(after)) = rss {
        fields.push(format!("rss_mb_before={before:.1}"));
        fields.push(format!("rss_mb_after={after:.1}"));
        words.push_str(&format!("; server RSS {before:.1} -> {after:.1} MB"));
    }
    if let Some(logged) = logged
        && completed > 0
    {
        let statements = logged.statements as f64 / completed as f64;
        let batches = logged.batches as f64 / completed as f64;
        fields.push(format!("statements_per_turn={statements:.2}"));
        fields.push(format!("writer_batches_per_turn={batches:.2}"));
        words.push_str(&format!(
            "; {statements:.2} statements and {batches:.2} writer batches per turn"
        ));
    }
    println!("{}", fields.join(" "));
    println!("  {words}");
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    assert!(
        args.connections > 0 && args.sessions > 0,
        "--connections and --sessions must be at least 1"
    );
    if args.connections > args.sessions {
        eprintln!(
            "warning: more connections than sessions: sessions will get two turns at once (409)"
        );
    }
    let pid = args.server_pid.or_else(|| {
        let path = args.pid_file.as_ref()?;
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|error| panic!("--pid-file {}: {error}", path.display()));
        Some(
            text.trim()
                .parse()
                .unwrap_or_else(|_| panic!("--pid-file {}: not a process id", path.display())),
        )
    });
    let storage = args
        .database_url
        .as_deref()
        .map(|url| Storage::new(url).unwrap_or_else(|error| panic!("--database-url: {error}")));

    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
        // Below the server's keep-alive (5 s by default), so an idle connection is never
        // reused just as the server closes it.
        .pool_idle_timeout(Duration::from_secs(4))
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let login: Value = http
        .post(format!("{}/auth/token", args.url))
        .json(&json!({"client_id": "admin", "client_secret": args.admin_secret}))
        .send()
        .await
        .expect("the server answers")
        .json()
        .await
        .unwrap();
    let admin = login["access_token"]
        .as_str()
        .expect("admin login (is --admin-secret the server's auth.admin_secret?)")
        .to_owned();
    let bench = Arc::new(Bench {
        http,
        url: args.url.clone(),
        admin,
    });

    let kinds = args.mode.kinds();
    println!(
        "config mode={} connections={} sessions={} warmup_s={} duration_s={} url={}",
        args.mode
            .to_possible_value()
            .expect("a named mode")
            .get_name(),
        args.connections,
        args.sessions,
        args.warmup,
        args.duration,
        args.url
    );
    if storage.is_none() {
        println!("stored bytes per turn: skipped (no --database-url)");
    }
    match rss_mb(pid) {
        Some(rss) => println!("rss_mb={rss:.1} at=start"),
        None if pid.is_none() => {
            println!("server RSS: skipped (neither --server-pid nor --pid-file given)")
        }
        None => {}
    }
    for kind in kinds {
        run_mode(&bench, &args, kind, storage.as_ref(), pid).await;
    }
    if args.mode == Mode::Long {
        long::run(&bench, &args).await;
    }
    if args.mode == Mode::Full {
        classic_figures(&bench, &args).await;
        if let Some(rss) = rss_mb(pid) {
            println!("rss_mb={rss:.1} at=end");
        }
    }
}

/// Latency at a few clients, replay of a long turn, fan-out to many subscribers.
async fn classic_figures(bench: &Arc<Bench>, args: &Args) {
    // (c) latency at a few concurrent clients
    let latency_clients = bench.clients(args.latency_clients).await;
    let samples = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let recorder = samples.clone();
    throughput(
        bench,
        &latency_clients,
        args.duration,
        move |bench, token, session| {
            let recorder = recorder.clone();
            async move {
                let sent = Instant::now();
                let mut frames = bench
                    .stream(bench.turn_request(&token, &session, "delta", TWENTY_DELTAS))
                    .await;
                let mut start = None;
                let mut first_delta = None;
                while let Some((_, event)) = frames.next().await {
                    match event.as_str() {
                        "turn_start" => start = Some(sent.elapsed()),
                        "text_delta" if first_delta.is_none() => first_delta = Some(sent.elapsed()),
                        "turn_stop" => break,
                        _ => {}
                    }
                }
                frames.drain().await;
                let mut samples = recorder.lock().await;
                samples.0.push(start.expect("turn_start"));
                samples.1.push(first_delta.expect("a delta"));
            }
        },
    )
    .await;
    let (mut starts, mut firsts) = Arc::try_unwrap(samples).unwrap().into_inner();
    starts.sort();
    firsts.sort();
    println!(
        "POST -> turn_start ({} clients): p50 {}, p99 {}, max {} ({} turns)",
        latency_clients.len(),
        ms(percentile(&starts, 50.0)),
        ms(percentile(&starts, 99.0)),
        ms(*starts.last().unwrap()),
        starts.len()
    );
    println!(
        "POST -> first delta ({} clients): p50 {}, p99 {}, max {}",
        latency_clients.len(),
        ms(percentile(&firsts, 50.0)),
        ms(percentile(&firsts, 99.0)),
        ms(*firsts.last().unwrap())
    );

    // (d) replay of a long turn
    let token = bench.tenant_token().await;
    let session = bench.session(&token).await;
    let text = "x".repeat(args.replay_events * 8);
    let reply = bench
        .turn_request(&token, &session, "none", &text)
        .send()
        .await
        .expect("long turn");
    let turn = reply.headers()["agentry-turn-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = reply.bytes().await;
    let mut replays = Vec::new();
    let mut count = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let mut frames = bench
            .stream(
                bench
                    .http
                    .get(format!(
                        "{}/sessions/{session}/turns/{turn}/events",
                        bench.url
                    ))
                    .bearer_auth(&token),
            )
            .await;
        count = 0;
        while frames.next().await.is_some() {
            count += 1;
        }
        replays.push(started.elapsed());
    }
    replays.sort();
    println!(
        "replay of a {count}-frame turn: median {}, best {}",
        ms(replays[replays.len() / 2]),
        ms(replays[0])
    );

    // The AAP face replays a finished message's deltas as one; ACP sends them as streamed,
    // so the same kind of turn as an ACP run replays every delta from the coalesced log.
    let part = json!({"content_type": "text/plain", "content": text,
        "content_encoding": "plain", "content_url": null, "metadata": null, "name": null});
    let run = bench
        .post(
            "/acp/runs",
            &token,
            json!({"agent_name": "echo", "mode": "sync",
                   "input": [{"role": "user", "parts": [part]}]}),
        )
        .await;
    let run = run["run_id"].as_str().expect("a run id").to_owned();
    let mut replays = Vec::new();
    let mut frames = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let response = bench
            .http
            .get(format!("{}/acp/runs/{run}/events", bench.url))
            .bearer_auth(&token)
            .header("Accept", "text/event-stream")
            .send()
            .await
            .expect("the server answers");
        let body = response.bytes().await.expect("a replay");
        frames = body.windows(2).filter(|w| w == b"\n\n").count();
        replays.push(started.elapsed());
    }
    replays.sort();
    println!(
        "replay of a {frames}-frame ACP run (every delta): median {}, best {}",
        ms(replays[replays.len() / 2]),
        ms(replays[0])
    );

    // (e) fan-out to many live subscribers of one session
    let token = bench.tenant_token().await;
    let session = bench.session(&token).await;
    let mut subscribers = Vec::new();
    for _ in 0..args.subscribers {
        let request = bench
            .http
            .get(format!("{}/sessions/{session}/events", bench.url))
            .bearer_auth(&token);
        subscribers.push(bench.stream(request).await);
    }
    let mut readers = Vec::new();
    for mut frames in subscribers {
        readers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some((id, event)) = frames.next().await {
                seen.push((id, Instant::now()));
                if event == "turn_stop" {
                    break;
                }
            }
            seen
        }));
    }
    let reply = bench
        .turn_request(&token, &session, "none", TWENTY_DELTAS)
        .send()
        .await
        .expect("fan-out turn");
    let _ = reply.bytes().await;
    let mut received: Vec<Vec<(i64, Instant)>> = Vec::new();
    for reader in readers {
        received.push(reader.await.unwrap());
    }
    // Lag of a delivery: how long after the first subscriber got the same event.
    let mut first: std::collections::HashMap<i64, Instant> = std::collections::HashMap::new();
    for seen in &received {
        for (id, at) in seen {
            first
                .entry(*id)
                .and_modify(|f| *f = (*f).min(*at))
                .or_insert(*at);
        }
    }
    let mut lags: Vec<Duration> = received
        .iter()
        .flatten()
        .map(|(id, at)| at.duration_since(first[id]))
        .collect();
    lags.sort();
    println!(
        "fan-out to {} subscribers: lag behind the first delivery p50 {}, p99 {}, max {} ({} deliveries)",
        received.len(),
        ms(percentile(&lags, 50.0)),
        ms(percentile(&lags, 99.0)),
        ms(*lags.last().unwrap()),
        lags.len()
    );
}
