//! A load generator for a running agentry server (it starts nothing by itself).
//!
//!     AGENTRY__AUTH__ADMIN_SECRET=bench AGENTRY__LOG__LEVEL=warn cargo run --release -- serve
//!     cargo bench --bench load -- --url http://127.0.0.1:8080 --admin-secret bench
//!
//! It creates tenants, tokens and sessions on the default `echo` agent (8 characters per
//! delta), then prints one line per figure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Mutex;

#[derive(Debug, Parser)]
#[command(about = "Drives a running agentry server and prints throughput and latency figures")]
struct Args {
    /// The server's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The server's `auth.admin_secret`.
    #[arg(long, env = "AGENTRY_BENCH_ADMIN_SECRET")]
    admin_secret: String,
    /// Seconds each throughput figure runs for.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Concurrent clients of the throughput figures.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Concurrent clients of the latency figure.
    #[arg(long, default_value_t = 8)]
    latency_clients: usize,
    /// Subscribers of the fan-out figure.
    #[arg(long, default_value_t = 1000)]
    subscribers: usize,
    /// Events of the replay figure.
    #[arg(long, default_value_t = 10_000)]
    replay_events: usize,
    /// Ignored: `cargo bench` passes it.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Tenants share the load so per-tenant limits do not cap the figures.
const CLIENTS_PER_TENANT: usize = 8;
/// 20 deltas of 8 characters.
const TWENTY_DELTAS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ";

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

    /// One session per client, spread over tenants.
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
        assert!(response.status().is_success(), "{}", response.status());
        SseFrames {
            body: response.bytes_stream().boxed(),
            buffer: Vec::new(),
        }
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
}

/// Just enough SSE parsing: the event name of each frame, and its id.
struct SseFrames {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: Vec<u8>,
}

impl SseFrames {
    async fn next(&mut self) -> Option<(i64, String)> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = String::from_utf8_lossy(&block);
                let mut id = None;
                let mut event = None;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.parse().ok();
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        event = Some(v.to_owned());
                    }
                }
                if let (Some(id), Some(event)) = (id, event) {
                    return Some((id, event));
                }
                continue;
            }
            let chunk = self.body.next().await?.ok()?;
            self.buffer.extend_from_slice(&chunk);
        }
    }
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

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(4096)
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
    let clients = bench.clients(args.concurrency).await;

    // (a) non-streaming turns
    let (turns, secs) = throughput(
        &bench,
        &clients,
        args.duration,
        |bench, token, session| async move {
            let reply = bench
                .turn_request(&token, &session, "none", "hello")
                .send()
                .await
                .expect("turn");
            assert!(reply.status().is_success(), "{}", reply.status());
            let _ = reply.bytes().await;
        },
    )
    .await;
    println!(
        "non-streaming turns: {:.0} turns/s ({turns} turns, {} clients, {secs:.1} s)",
        turns as f64 / secs,
        clients.len()
    );

    // (b) delta-streaming turns, 20 deltas each, on fresh sessions
    let clients = bench.clients(args.concurrency).await;
    let (turns, secs) = throughput(
        &bench,
        &clients,
        args.duration,
        |bench, token, session| async move {
            let mut frames = bench
                .stream(bench.turn_request(&token, &session, "delta", TWENTY_DELTAS))
                .await;
            let mut deltas = 0;
            while let Some((_, event)) = frames.next().await {
                if event == "text_delta" {
                    deltas += 1;
                }
                if event == "turn_stop" {
                    break;
                }
            }
            assert_eq!(deltas, 20);
        },
    )
    .await;
    println!(
        "delta-streaming turns (20 deltas): {:.0} turns/s ({turns} turns, {} clients, {secs:.1} s)",
        turns as f64 / secs,
        clients.len()
    );

    // (c) latency at a few concurrent clients
    let latency_clients = bench.clients(args.latency_clients).await;
    let samples = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let recorder = samples.clone();
    throughput(
        &bench,
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
