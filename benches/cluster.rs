//! A load generator for several `agentry serve` processes sharing one PostgreSQL database
//! (it starts nothing by itself: `benches/cluster.sh N` creates a database, starts N
//! processes and runs it). By hand, against processes already running:
//!
//! ```text
//! cargo bench --bench cluster -- --urls http://127.0.0.1:18081,http://127.0.0.1:18082 --admin-secret bench
//! ```
//!
//! It logs in as `admin` on the first URL with `--admin-secret`, creates tenants (at most 8
//! tasks each, so per-tenant limits do not cap the figures), tokens and sessions, then
//! measures two figures at once:
//!
//! - Throughput: `--connections` tasks, task i posting to process i % n, each round robin
//!   over `--sessions-per-connection` sessions of its own (on `--agent`), post
//!   `stream: "delta"` turns of `--turn-chars` characters and read each SSE response to its
//!   `turn_stop`, `--warmup` seconds unmeasured and then `--duration` seconds measured. A
//!   turn counts when its `turn_stop` arrived in the measured window and the turn did not end
//!   in error; anything else is counted as an error by kind (409, 429, other 4xx, 5xx,
//!   transport failure or 30 s timeout, a stream cut short, a turn ended in error).
//! - Cross-process delivery lag: during the measured window, `--lag-probes` tasks, each on a
//!   session of its own (on `--probe-agent`), loop over turns: probe k posts a delta turn of
//!   `--probe-chars` characters to process A = k % n and, once the response's head names the
//!   turn (`Agentry-Turn-Id`), follows it through process B = (k + 1) % n with
//!   `GET /sessions/{id}/turns/{turn}/events`. With one process B = A: the same-process
//!   baseline. Both streams are read here and every frame is stamped with the instant its
//!   bytes arrived (one monotonic clock); for each event id seen on both streams,
//!   lag = arrival on B - arrival on A.
//!
//! An event that reached A before B's response head arrived was committed before B
//! followed the turn: B replays it from the log, and its lag measures the time B took to
//! answer the follow request rather than a delivery. Such samples are counted apart
//! (`replayed=`); the `lag_*` figures are of the others, delivered live to a follower that
//! was already connected, and `all_lag_*` of both together.
//!
//! Each figure prints one `key=value` line (`figure=throughput`, `figure=lag`), then a
//! `summary` line with the headline numbers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};

#[path = "common/failures.rs"]
mod failures;

use failures::{Errors, Failure};

#[derive(Debug, Parser)]
#[command(
    about = "Drives several agentry processes on one database: throughput and cross-process lag"
)]
struct Args {
    /// The processes' base URLs, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    urls: Vec<String>,
    /// The processes' `auth.admin_secret`.
    #[arg(long, env = "AGENTRY_BENCH_ADMIN_SECRET")]
    admin_secret: String,
    /// Throughput tasks (one turn at a time each); 0 runs the lag probes alone.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Sessions of each throughput task, posted to round robin.
    #[arg(long, default_value_t = 8)]
    sessions_per_connection: usize,
    /// Unmeasured seconds before the measured window.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Seconds of the measured window.
    #[arg(long, default_value_t = 8)]
    duration: u64,
    /// Lag probes (one session and one turn at a time each).
    #[arg(long, default_value_t = 4)]
    lag_probes: usize,
    /// Agent of the throughput sessions.
    #[arg(long, default_value = "echo")]
    agent: String,
    /// Agent of the probes' sessions.
    #[arg(long, default_value = "echo")]
    probe_agent: String,
    /// Characters of a throughput turn's prompt (the echo agent answers with them: 20
    /// deltas of 8 characters by default).
    #[arg(long, default_value_t = 160)]
    turn_chars: usize,
    /// Characters of a probe turn's prompt (40 deltas of 8 characters by default).
    #[arg(long, default_value_t = 320)]
    probe_chars: usize,
    /// Ignored: `cargo bench` passes it.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Tasks sharing one tenant: below the default per-tenant limit of concurrent turns.
const TASKS_PER_TENANT: usize = 8;
/// The longest a turn may take before it counts as a transport failure.
const TURN_TIMEOUT: Duration = Duration::from_secs(30);
/// The turn id header of `POST /sessions/{id}/turns`.
const TURN_ID_HEADER: &str = "agentry-turn-id";

struct Client {
    http: reqwest::Client,
    admin: String,
    /// The first URL: where tenants and tokens are created.
    admin_url: String,
}

impl Client {
    async fn post(&self, url: &str, path: &str, token: &str, body: Value) -> Value {
        let response = self
            .http
            .post(format!("{url}{path}"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|error| panic!("POST {url}{path}: {error}"));
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "POST {url}{path}: {status} {body}");
        body
    }

    /// A new tenant's token.
    async fn tenant_token(&self) -> String {
        let name = format!("cluster-bench-{}", uuid::Uuid::new_v4().simple());
        let tenant = self
            .post(
                &self.admin_url,
                "/admin/tenants",
                &self.admin,
                json!({"name": name}),
            )
            .await;
        let id = tenant["id"].as_str().expect("a tenant id");
        let token = self
            .post(
                &self.admin_url,
                &format!("/admin/tenants/{id}/tokens"),
                &self.admin,
                json!({}),
            )
            .await;
        token["token"].as_str().expect("a token").to_owned()
    }

    /// A new session on `agent`, created through `url`.
    async fn session(&self, url: &str, token: &str, agent: &str) -> String {
        let session = self
            .post(url, "/sessions", token, json!({"agent": {"name": agent}}))
            .await;
        session["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned()
    }

    fn turn_request(
        &self,
        url: &str,
        token: &str,
        session: &str,
        text: &str,
    ) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{url}/sessions/{session}/turns"))
            .bearer_auth(token)
            .json(&json!({"stream": "delta", "messages": [{"role": "user", "content": text}]}))
    }
}

/// One SSE frame, stamped with the arrival of the bytes that completed it.
struct Frame {
    id: Option<i64>,
    event: Option<String>,
    data: String,
    at: Instant,
}

/// Just enough SSE parsing for agentry's frames (`\n` line ends, one space after colons).
struct Sse {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
    /// When the last chunk arrived.
    at: Instant,
}

impl Sse {
    fn new(response: reqwest::Response) -> Self {
        Sse {
            body: response.bytes_stream().boxed(),
            buffer: Vec::new(),
            at: Instant::now(),
        }
    }

    /// The next frame (comment-only blocks skipped); `Ok(None)` at the end of the body.
    async fn next(&mut self) -> reqwest::Result<Option<Frame>> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let frame = parse_block(&self.buffer[..end], self.at);
                self.buffer.drain(..end + 2);
                match frame {
                    Some(frame) => return Ok(Some(frame)),
                    None => continue,
                }
            }
            match self.body.next().await {
                Some(chunk) => {
                    let chunk = chunk?;
                    self.at = Instant::now();
                    self.buffer.extend_from_slice(&chunk);
                }
                None => return Ok(None),
            }
        }
    }

    /// Reads what is left of the body, so the connection goes back to the pool.
    async fn finish(mut self) {
        let rest = async { while let Some(Ok(_)) = self.body.next().await {} };
        let _ = tokio::time::timeout(Duration::from_secs(1), rest).await;
    }
}

/// A block's fields; `None` for a block of comments only.
fn parse_block(block: &[u8], at: Instant) -> Option<Frame> {
    let mut frame = Frame {
        id: None,
        event: None,
        data: String::new(),
        at,
    };
    let mut fields = false;
    for line in String::from_utf8_lossy(block).split('\n') {
        if let Some(value) = line.strip_prefix("id: ") {
            frame.id = value.parse().ok();
        } else if let Some(value) = line.strip_prefix("event: ") {
            frame.event = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("data: ") {
            if !frame.data.is_empty() {
                frame.data.push('\n');
            }
            frame.data.push_str(value);
        } else {
            continue;
        }
        fields = true;
    }
    fields.then_some(frame)
}

/// Whether a `turn_stop` frame's data says the turn ended in error.
fn stopped_in_error(data: &str) -> bool {
    match serde_json::from_str::<Value>(data) {
        Ok(stop) => !stop["error"].is_null() || stop["stopReason"] == "error",
        Err(_) => true,
    }
}

impl Errors {
    fn fields(&self, prefix: &str) -> Vec<String> {
        vec![
            format!("{prefix}errors={}", self.total()),
            format!("{prefix}errors_409={}", self.busy),
            format!("{prefix}errors_429={}", self.too_many),
            format!("{prefix}errors_4xx={}", self.client),
            format!("{prefix}errors_5xx={}", self.server),
            format!("{prefix}errors_io={}", self.io),
            format!("{prefix}errors_incomplete={}", self.incomplete),
            format!("{prefix}errors_turn={}", self.turn),
        ]
    }
}

/// Reads a turn's SSE response to its `turn_stop`: the id and arrival of every frame with
/// an id, or why the turn does not count.
async fn read_turn(mut sse: Sse) -> Result<Vec<(i64, Instant)>, Failure> {
    let mut seen = Vec::new();
    loop {
        let frame = sse
            .next()
            .await
            .map_err(|_| Failure::Io)?
            .ok_or(Failure::Incomplete)?;
        if let Some(id) = frame.id {
            seen.push((id, frame.at));
        }
        if frame.event.as_deref() == Some("turn_stop") {
            sse.finish().await;
            return if stopped_in_error(&frame.data) {
                Err(Failure::Turn)
            } else {
                Ok(seen)
            };
        }
    }
}

/// A response's status as a failure, its body read so the connection can be reused.
async fn refused(response: reqwest::Response) -> Failure {
    let failure = Failure::of_status(response.status());
    let _ = response.bytes().await;
    failure
}

/// One throughput turn: the time from sending it to its `turn_stop`.
async fn throughput_turn(
    client: &Client,
    url: &str,
    token: &str,
    session: &str,
    text: &str,
) -> Result<Duration, Failure> {
    let sent = Instant::now();
    let response = client
        .turn_request(url, token, session, text)
        .send()
        .await
        .map_err(|_| Failure::Io)?;
    if !response.status().is_success() {
        return Err(refused(response).await);
    }
    let seen = read_turn(Sse::new(response)).await?;
    let stop = seen.last().map_or_else(Instant::now, |(_, at)| *at);
    Ok(stop.duration_since(sent))
}

/// What one probe turn saw on both processes.
struct ProbeTurn {
    on_a: Vec<(i64, Instant)>,
    on_b: Vec<(i64, Instant)>,
    /// When B's response head arrived: B follows the turn live from then on.
    b_following: Instant,
}

/// One probe turn: posted to `a`, followed through `b`.
async fn probe_turn(
    client: &Arc<Client>,
    a: &str,
    b: &str,
    token: &str,
    session: &str,
    text: &str,
) -> Result<ProbeTurn, Failure> {
    let response = client
        .turn_request(a, token, session, text)
        .send()
        .await
        .map_err(|_| Failure::Io)?;
    if !response.status().is_success() {
        return Err(refused(response).await);
    }
    let Some(turn) = response
        .headers()
        .get(TURN_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
    else {
        let _ = response.bytes().await;
        return Err(Failure::Incomplete);
    };
    // A's stream is read by a task of its own while B's request is made.
    let on_a = tokio::spawn(read_turn(Sse::new(response)));
    let followed = async {
        let response = client
            .http
            .get(format!("{b}/sessions/{session}/turns/{turn}/events"))
            .bearer_auth(token)
            .send()
            .await
            .map_err(|_| Failure::Io)?;
        let b_following = Instant::now();
        if !response.status().is_success() {
            return Err(refused(response).await);
        }
        Ok((read_turn(Sse::new(response)).await?, b_following))
    };
    let followed = followed.await;
    let on_a = on_a.await.map_err(|_| Failure::Io)??;
    let (on_b, b_following) = followed?;
    Ok(ProbeTurn {
        on_a,
        on_b,
        b_following,
    })
}

/// Milliseconds from `from` to `to`, negative when `to` came first.
fn signed_ms(from: Instant, to: Instant) -> f64 {
    if to >= from {
        to.duration_since(from).as_secs_f64() * 1000.0
    } else {
        -(from.duration_since(to).as_secs_f64() * 1000.0)
    }
}

/// The value at percentile `p` of sorted values (nearest rank); 0 when there are none.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// What one throughput task saw.
#[derive(Default)]
struct Tally {
    /// Durations of the turns that ended in the measured window.
    measured: Vec<Duration>,
    /// Every completed turn, warm-up included.
    completed: usize,
    errors: Errors,
}

/// What one probe saw.
#[derive(Default)]
struct ProbeTally {
    turns: usize,
    /// Lags (ms) of events B received while following the turn live.
    live: Vec<f64>,
    /// Lags (ms) of events A received before B followed the turn.
    replayed: Vec<f64>,
    errors: Errors,
}

/// The window every task shares.
#[derive(Clone, Copy)]
struct Window {
    measured_from: Instant,
    deadline: Instant,
}

/// Creates `count` sessions per task (task i on `urls[i % n]`), one tenant per
/// `TASKS_PER_TENANT` tasks: (url, token, sessions) per task.
async fn task_sessions(
    client: &Client,
    urls: &[String],
    tasks: usize,
    per_task: usize,
    agent: &str,
) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::with_capacity(tasks);
    let mut token = String::new();
    for i in 0..tasks {
        if i % TASKS_PER_TENANT == 0 {
            token = client.tenant_token().await;
        }
        let url = urls[i % urls.len()].clone();
        let mut sessions = Vec::with_capacity(per_task);
        for _ in 0..per_task {
            sessions.push(client.session(&url, &token, agent).await);
        }
        out.push((url, token.clone(), sessions));
    }
    out
}

fn throughput_task(
    client: Arc<Client>,
    (url, token, sessions): (String, String, Vec<String>),
    text: Arc<str>,
    window: Window,
) -> tokio::task::JoinHandle<Tally> {
    tokio::spawn(async move {
        let mut tally = Tally::default();
        let mut next = 0;
        while Instant::now() < window.deadline {
            let session = &sessions[next % sessions.len()];
            next += 1;
            let turn = throughput_turn(&client, &url, &token, session, &text);
            let outcome = tokio::time::timeout(TURN_TIMEOUT, turn)
                .await
                .unwrap_or(Err(Failure::Io));
            let ended = Instant::now();
            match outcome {
                Ok(took) => {
                    tally.completed += 1;
                    if ended >= window.measured_from && ended <= window.deadline {
                        tally.measured.push(took);
                    }
                }
                Err(failure) => {
                    tally.errors.failed(failure).await;
                }
            }
        }
        tally
    })
}

fn probe_task(
    client: Arc<Client>,
    (a, b): (String, String),
    (token, session): (String, String),
    text: Arc<str>,
    window: Window,
) -> tokio::task::JoinHandle<ProbeTally> {
    tokio::spawn(async move {
        let mut tally = ProbeTally::default();
        tokio::time::sleep_until(window.measured_from.into()).await;
        while Instant::now() < window.deadline {
            let turn = probe_turn(&client, &a, &b, &token, &session, &text);
            let outcome = tokio::time::timeout(TURN_TIMEOUT, turn)
                .await
                .unwrap_or(Err(Failure::Io));
            let seen = match outcome {
                Ok(seen) => seen,
                Err(failure) => {
                    tally.errors.count(failure);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            tally.turns += 1;
            let on_a: HashMap<i64, Instant> = seen.on_a.into_iter().collect();
            for (id, at_b) in seen.on_b {
                let Some(&at_a) = on_a.get(&id) else {
                    continue;
                };
                let lag = signed_ms(at_a, at_b);
                if at_a >= seen.b_following {
                    tally.live.push(lag);
                } else {
                    tally.replayed.push(lag);
                }
            }
        }
        tally
    })
}

fn f3(value: f64) -> String {
    format!("{value:.3}")
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let urls: Vec<String> = args
        .urls
        .iter()
        .map(|u| u.trim().trim_end_matches('/').to_owned())
        .filter(|u| !u.is_empty())
        .collect();
    assert!(!urls.is_empty(), "--urls names no process");
    assert!(
        args.connections > 0 || args.lag_probes > 0,
        "nothing to run: --connections and --lag-probes are both 0"
    );
    assert!(
        args.sessions_per_connection > 0 && args.duration > 0,
        "--sessions-per-connection and --duration must be at least 1"
    );
    let n = urls.len();

    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        // Below the server's keep-alive (5 s by default), so an idle connection is never
        // reused just as the server closes it.
        .pool_idle_timeout(Duration::from_secs(4))
        .tcp_nodelay(true)
        .build()
        .expect("an HTTP client");
    let login: Value = http
        .post(format!("{}/auth/token", urls[0]))
        .json(&json!({"client_id": "admin", "client_secret": args.admin_secret}))
        .send()
        .await
        .expect("the first process answers")
        .json()
        .await
        .unwrap_or(Value::Null);
    let admin = login["access_token"]
        .as_str()
        .expect("admin login (is --admin-secret the processes' auth.admin_secret?)")
        .to_owned();
    let client = Arc::new(Client {
        http,
        admin,
        admin_url: urls[0].clone(),
    });

    println!(
        "config processes={n} connections={} sessions_per_connection={} lag_probes={} \
         warmup_s={} duration_s={} agent={} probe_agent={} turn_chars={} probe_chars={} urls={}",
        args.connections,
        args.sessions_per_connection,
        args.lag_probes,
        args.warmup,
        args.duration,
        args.agent,
        args.probe_agent,
        args.turn_chars,
        args.probe_chars,
        urls.join(","),
    );

    let workers = task_sessions(
        &client,
        &urls,
        args.connections,
        args.sessions_per_connection,
        &args.agent,
    )
    .await;
    let probes = task_sessions(&client, &urls, args.lag_probes, 1, &args.probe_agent).await;

    let turn_text: Arc<str> =
        "abcdefgh".repeat(args.turn_chars.div_ceil(8))[..args.turn_chars].into();
    let probe_text: Arc<str> =
        "ABCDEFGH".repeat(args.probe_chars.div_ceil(8))[..args.probe_chars].into();
    let started = Instant::now();
    let measured_from = started + Duration::from_secs(args.warmup);
    let window = Window {
        measured_from,
        deadline: measured_from + Duration::from_secs(args.duration),
    };

    let mut worker_tasks = Vec::with_capacity(workers.len());
    for worker in workers {
        worker_tasks.push(throughput_task(
            client.clone(),
            worker,
            turn_text.clone(),
            window,
        ));
    }
    let mut probe_tasks = Vec::with_capacity(probes.len());
    for (k, (_, token, sessions)) in probes.into_iter().enumerate() {
        let pair = (urls[k % n].clone(), urls[(k + 1) % n].clone());
        let session = sessions.into_iter().next().expect("a probe's session");
        probe_tasks.push(probe_task(
            client.clone(),
            pair,
            (token, session),
            probe_text.clone(),
            window,
        ));
    }

    let mut durations = Vec::new();
    let mut by_process = vec![0usize; n];
    let mut completed = 0;
    let mut errors = Errors::default();
    for (i, task) in worker_tasks.into_iter().enumerate() {
        let tally = task.await.expect("a throughput task");
        by_process[i % n] += tally.measured.len();
        durations.extend(tally.measured);
        completed += tally.completed;
        errors.add(&tally.errors);
    }
    let mut live = Vec::new();
    let mut replayed = Vec::new();
    let mut probe_turns = 0;
    let mut probe_errors = Errors::default();
    for task in probe_tasks {
        let tally = task.await.expect("a probe task");
        probe_turns += tally.turns;
        live.extend(tally.live);
        replayed.extend(tally.replayed);
        probe_errors.add(&tally.errors);
    }

    let seconds = args.duration as f64;
    let turns_per_s = durations.len() as f64 / seconds;
    let mut turn_ms: Vec<f64> = durations.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    turn_ms.sort_by(f64::total_cmp);
    let mut fields = vec![
        "figure=throughput".to_owned(),
        format!("processes={n}"),
        format!("connections={}", args.connections),
        format!("duration_s={}", args.duration),
        format!("turns={}", durations.len()),
        format!("turns_per_s={turns_per_s:.1}"),
        format!(
            "turns_by_process={}",
            by_process
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join("/")
        ),
        format!("turn_p50_ms={}", f3(percentile(&turn_ms, 50.0))),
        format!("turn_p99_ms={}", f3(percentile(&turn_ms, 99.0))),
        format!(
            "turn_max_ms={}",
            f3(turn_ms.last().copied().unwrap_or_default())
        ),
    ];
    fields.extend(errors.fields(""));
    fields.push(format!("completed_with_warmup={completed}"));
    println!("{}", fields.join(" "));

    let mut all: Vec<f64> = live.iter().chain(&replayed).copied().collect();
    live.sort_by(f64::total_cmp);
    all.sort_by(f64::total_cmp);
    let lag = |p: f64| f3(percentile(&live, p));
    let pairs = (0..args.lag_probes.min(n))
        .map(|k| format!("{}>{}", k % n, (k + 1) % n))
        .collect::<Vec<_>>()
        .join(",");
    let mut fields = vec![
        "figure=lag".to_owned(),
        format!("processes={n}"),
        format!("probes={}", args.lag_probes),
        format!("pairs={pairs}"),
        format!("probe_turns={probe_turns}"),
        format!("probe_turns_per_s={:.1}", probe_turns as f64 / seconds),
        format!("samples={}", live.len()),
        format!("lag_p50_ms={}", lag(50.0)),
        format!("lag_p90_ms={}", lag(90.0)),
        format!("lag_p99_ms={}", lag(99.0)),
        format!(
            "lag_max_ms={}",
            f3(live.last().copied().unwrap_or_default())
        ),
        format!(
            "lag_min_ms={}",
            f3(live.first().copied().unwrap_or_default())
        ),
        format!("replayed={}", replayed.len()),
        format!("all_samples={}", all.len()),
        format!("all_lag_p50_ms={}", f3(percentile(&all, 50.0))),
        format!("all_lag_p99_ms={}", f3(percentile(&all, 99.0))),
        format!(
            "all_lag_max_ms={}",
            f3(all.last().copied().unwrap_or_default())
        ),
    ];
    fields.extend(probe_errors.fields("probe_"));
    println!("{}", fields.join(" "));

    println!(
        "summary processes={n} connections={} turns_per_s={turns_per_s:.1} lag_p50_ms={} \
         lag_p90_ms={} lag_p99_ms={} lag_max_ms={} samples={} errors={}",
        args.connections,
        lag(50.0),
        lag(90.0),
        lag(99.0),
        f3(live.last().copied().unwrap_or_default()),
        live.len(),
        errors.total() + probe_errors.total(),
    );
}
