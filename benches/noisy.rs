//! The noisy-neighbour benchmark: does one tenant far over its quotas slow the others?
//!
//! ```text
//! taskset -c 0 target/release/agentry serve   # with AGENTRY__AUTH__ADMIN_SECRET=bench
//! taskset -c 1 cargo bench --bench noisy -- --admin-secret bench
//! ```
//!
//! It logs in as `admin`, creates `--quiet-tenants` tenants with quotas they never reach
//! and one noisy tenant with `requests_per_minute` and `turns_per_minute` set to `--quota`,
//! then runs phases of `--warmup` + `--duration` seconds each, of two kinds:
//!
//! - **baseline**: `--connections` tasks spread over the quiet tenants, each posting turns
//!   (`stream: "none"`, on the echo agent) to sessions of its own, one at a time, while the
//!   noisy tenant posts turns at its quota (open loop, evenly spaced);
//! - **noisy**: the same, with the noisy tenant at `--overload` times its quota: what its
//!   quota admits runs, the rest is refused with 429.
//!
//! The phases run in the order baseline, noisy, noisy, baseline, and each kind's figures pool
//! its two phases: the server slows down as its database grows, and this order cancels that
//! drift (back-to-back phases at the same load differed by 26–31 % in throughput on a fresh
//! SQLite database). The difference between the kinds is the cost of the refused excess
//! alone: the quotas are paced, so the noisy tenant's admitted turns come at its quota in both
//! (after a burst of `quotas.burst_seconds`' worth at the start of the first noisy phase, in
//! its warmup).
//!
//! It prints, per kind, the quiet tenants' turns per second and turn latency (p50, p99),
//! what the noisy tenant got (admitted, refused, other), and the rise of the quiet p99.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(about = "Measures whether a tenant over its quotas slows the other tenants")]
struct Args {
    /// The server's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The server's `auth.admin_secret`.
    #[arg(long, env = "AGENTRY_BENCH_ADMIN_SECRET")]
    admin_secret: String,
    /// Tenants whose latency is measured.
    #[arg(long, default_value_t = 4)]
    quiet_tenants: usize,
    /// Turn tasks of the quiet tenants (one turn at a time each).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// The noisy tenant's requests and turns per minute.
    #[arg(long, default_value_t = 600)]
    quota: u64,
    /// How many times its quota the noisy tenant sends.
    #[arg(long, default_value_t = 10)]
    overload: u64,
    /// Unmeasured seconds at the start of each phase.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Measured seconds of each phase (two phases of each kind).
    #[arg(long, default_value_t = 6)]
    duration: u64,
}

/// Turns a task posts to one session before it takes a new one.
const TURNS_PER_SESSION: usize = 20;

/// The noisy tenant's sessions per phase, posted to round robin (so each takes a few tens
/// of turns at most, as the quiet ones do).
const NOISY_SESSIONS: usize = 64;

struct Client {
    http: reqwest::Client,
    url: String,
}

impl Client {
    async fn call(&self, method: reqwest::Method, path: &str, token: &str, body: Value) -> Value {
        let response = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response.json().await.unwrap_or(Value::Null)
    }

    /// A new tenant with `quotas`: its id and a token of it.
    async fn tenant(&self, admin: &str, name: String, quotas: Value) -> (String, String) {
        let post = reqwest::Method::POST;
        let tenant = self
            .call(
                post.clone(),
                "/admin/tenants",
                admin,
                json!({ "name": name }),
            )
            .await;
        let id = tenant["id"].as_str().unwrap();
        self.quotas(admin, id, quotas).await;
        let token = self
            .call(
                post,
                &format!("/admin/tenants/{id}/tokens"),
                admin,
                json!({}),
            )
            .await;
        (id.to_owned(), token["token"].as_str().unwrap().to_owned())
    }

    async fn quotas(&self, admin: &str, tenant: &str, quotas: Value) {
        self.call(
            reqwest::Method::PATCH,
            &format!("/admin/tenants/{tenant}/quotas"),
            admin,
            quotas,
        )
        .await;
    }

    async fn session(&self, token: &str) -> String {
        let session = self
            .call(
                reqwest::Method::POST,
                "/sessions",
                token,
                json!({"agent": {"name": "echo"}}),
            )
            .await;
        session["sessionId"].as_str().unwrap().to_owned()
    }

    /// Posts one turn; its status (0 when the request failed).
    async fn turn(&self, token: &str, session: &str) -> u16 {
        let sent = self
            .http
            .post(format!("{}/sessions/{session}/turns", self.url))
            .bearer_auth(token)
            .json(&json!({"messages": [{"role": "user", "content": "a short question"}]}))
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                let _ = response.bytes().await;
                status
            }
            Err(_) => 0,
        }
    }
}

#[derive(Default)]
struct Noise {
    admitted: AtomicUsize,
    refused: AtomicUsize,
    other: AtomicUsize,
}

/// What the quiet tenants got in one or more phases.
#[derive(Default)]
struct Phase {
    /// Latencies of the measured turns.
    latencies: Vec<Duration>,
    failed: usize,
    /// Measured seconds.
    seconds: u64,
}

impl Phase {
    fn add(&mut self, other: Phase) {
        self.latencies.extend(other.latencies);
        self.failed += other.failed;
        self.seconds += other.seconds;
    }

    fn turns_per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.seconds.max(1) as f64
    }

    /// The `q` quantile of the latencies, in milliseconds.
    fn quantile_ms(&mut self, q: f64) -> f64 {
        self.latencies.sort();
        let last = self.latencies.len().saturating_sub(1);
        self.latencies
            .get(((self.latencies.len() as f64 * q) as usize).min(last))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
}

/// Runs the quiet tenants' turns (and the noise, if given) for one phase.
async fn phase(
    client: &Arc<Client>,
    quiet: &[(String, String)],
    noisy: Option<(String, Vec<String>, Duration)>,
    args: &Args,
) -> (Phase, Arc<Noise>) {
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(args.warmup);
    let end = measure_from + Duration::from_secs(args.duration);
    let noise = Arc::new(Noise::default());
    let mut noise_task = None;
    if let Some((token, sessions, every)) = noisy {
        let client = client.clone();
        let noise = noise.clone();
        noise_task = Some(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            let mut i = 0;
            while Instant::now() < end {
                ticks.tick().await;
                let (client, noise, token) = (client.clone(), noise.clone(), token.clone());
                let session = sessions[i % sessions.len()].clone();
                i += 1;
                tokio::spawn(async move {
                    let counter = match client.turn(&token, &session).await {
                        200 => &noise.admitted,
                        429 => &noise.refused,
                        _ => &noise.other,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                });
            }
        }));
    }
    let tasks: Vec<_> = quiet
        .iter()
        .cloned()
        .map(|(token, session)| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut failed = 0;
                let mut session = session;
                let mut turns = 0;
                while Instant::now() < end {
                    // Histories stay short: a turn's cost grows with its session's history.
                    if turns > 0 && turns % TURNS_PER_SESSION == 0 {
                        session = client.session(&token).await;
                    }
                    turns += 1;
                    let began = Instant::now();
                    let status = client.turn(&token, &session).await;
                    if began >= measure_from && Instant::now() <= end {
                        match status {
                            200 => latencies.push(began.elapsed()),
                            _ => failed += 1,
                        }
                    }
                }
                (latencies, failed)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut failed = 0;
    for task in tasks {
        let (mine, mine_failed) = task.await.expect("a quiet task");
        latencies.extend(mine);
        failed += mine_failed;
    }
    if let Some(task) = noise_task {
        task.await.expect("the noise task");
    }
    let result = Phase {
        latencies,
        failed,
        seconds: args.duration,
    };
    (result, noise)
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    assert!(args.quiet_tenants >= 1 && args.connections >= 1 && args.quota >= 1);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.connections * 4)
        .build()
        .unwrap();
    let client = Arc::new(Client {
        http,
        url: args.url.trim_end_matches('/').to_owned(),
    });
    let login: Value = client
        .http
        .post(format!("{}/auth/token", client.url))
        .json(&json!({"client_id": "admin", "client_secret": args.admin_secret}))
        .send()
        .await
        .expect("the server answers")
        .json()
        .await
        .unwrap_or(Value::Null);
    let admin = login["access_token"]
        .as_str()
        .expect("admin login (is --admin-secret the server's auth.admin_secret?)")
        .to_owned();
    let run = uuid::Uuid::new_v4().simple().to_string();
    // Quiet tenants are held to quotas they never reach, so they pay the same counting.
    let roomy = json!({"requests_per_minute": 100_000_000, "turns_per_minute": 100_000_000});
    let mut quiet_tokens = Vec::new();
    for i in 0..args.quiet_tenants {
        let name = format!("quiet-{run}-{i}");
        quiet_tokens.push(client.tenant(&admin, name, roomy.clone()).await.1);
    }
    let mut quiet = Vec::new();
    for i in 0..args.connections {
        let token = quiet_tokens[i % quiet_tokens.len()].clone();
        let session = client.session(&token).await;
        quiet.push((token, session));
    }
    // The noisy tenant's sessions are made before it gets its quotas, which then bound its
    // turns alone.
    let (noisy, noisy_token) = client
        .tenant(&admin, format!("noisy-{run}"), roomy.clone())
        .await;
    // Baseline, noisy, noisy, baseline: the drift of a growing database cancels out.
    let order = [false, true, true, false];
    let mut sessions_of_phase = Vec::new();
    for _ in order {
        let mut sessions = Vec::new();
        for _ in 0..NOISY_SESSIONS {
            sessions.push(client.session(&noisy_token).await);
        }
        sessions_of_phase.push(sessions);
    }
    let noisy_quotas = json!({"requests_per_minute": args.quota, "turns_per_minute": args.quota});
    client.quotas(&admin, &noisy, noisy_quotas).await;
    let rate = args.quota as f64 * args.overload as f64 / 60.0;
    let every = Duration::from_secs_f64(1.0 / rate);
    let at_quota = Duration::from_secs_f64(60.0 / args.quota as f64);

    let mut kinds = [
        (
            "baseline",
            args.quota as f64 / 60.0,
            Phase::default(),
            Noise::default(),
        ),
        ("noisy", rate, Phase::default(), Noise::default()),
    ];
    for (overloaded, sessions) in order.into_iter().zip(sessions_of_phase) {
        let interval = if overloaded { every } else { at_quota };
        let (quiet_figures, noise) = phase(
            &client,
            &quiet,
            Some((noisy_token.clone(), sessions, interval)),
            &args,
        )
        .await;
        let kind = &mut kinds[usize::from(overloaded)];
        kind.2.add(quiet_figures);
        for (total, part) in [
            (&kind.3.admitted, &noise.admitted),
            (&kind.3.refused, &noise.refused),
            (&kind.3.other, &noise.other),
        ] {
            total.fetch_add(part.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }
    let mut p99 = [0.0; 2];
    for (i, (name, rate, figures, noise)) in kinds.iter_mut().enumerate() {
        p99[i] = figures.quantile_ms(0.99);
        println!(
            "phase={name} quiet_turns_per_s={:.1} quiet_p50_ms={:.2} quiet_p99_ms={:.2} quiet_failed={} \
             noisy_rate_per_s={rate:.1} noisy_admitted={} noisy_refused={} noisy_other={}",
            figures.turns_per_second(),
            figures.quantile_ms(0.50),
            p99[i],
            figures.failed,
            noise.admitted.load(Ordering::Relaxed),
            noise.refused.load(Ordering::Relaxed),
            noise.other.load(Ordering::Relaxed)
        );
    }
    let rise = (p99[1] / p99[0] - 1.0) * 100.0;
    println!(
        "summary p99_rise_percent={rise:.1} baseline_p99_ms={:.2} noisy_p99_ms={:.2}",
        p99[0], p99[1]
    );
}
