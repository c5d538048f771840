//! `--mode long`: whether a turn costs more on a long session than on a fresh one.
//!
//! Each round runs two phases of `stream: "none"` turns on `--sessions` sessions of their
//! own: *fresh* sessions created empty, and *long* sessions created with `--history`
//! messages of history (alternating user and assistant messages of the 160-character
//! prompt, seeded with the session as `POST /sessions` `messages` allows), `--warmup`
//! seconds unmeasured and `--duration` measured each. Both kinds grow by the same turns
//! during their phase, so what differs is only the history they start with. Rounds
//! alternate the order (fresh then long, long then fresh) so that the server slowing as
//! its database grows weighs on both kinds alike. It prints one line per phase and then
//! the ratio of long to fresh turns/s of each round and of the pooled rounds.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Args, Bench, CLIENTS_PER_TENANT, Kind, TWENTY_DELTAS, drive, msv, percentile};

/// One measured phase.
struct Phase {
    long: bool,
    turns: usize,
    seconds: f64,
}

impl Bench {
    /// `count` sessions as (token, session id), spread over tenants, each holding
    /// `history` messages.
    async fn seeded_clients(&self, count: usize, history: usize) -> Vec<(String, String)> {
        let messages: Vec<Value> = (0..history)
            .map(|i| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                json!({"role": role, "content": TWENTY_DELTAS})
            })
            .collect();
        let body = json!({"agent": {"name": "echo"}, "messages": messages});
        let mut clients = Vec::with_capacity(count);
        let mut token = String::new();
        for i in 0..count {
            if i % CLIENTS_PER_TENANT == 0 {
                token = self.tenant_token().await;
            }
            let session = self.post("/sessions", &token, body.clone()).await;
            let id = session["sessionId"].as_str().expect("a session id");
            clients.push((token.clone(), id.to_owned()));
        }
        clients
    }
}

/// Runs the rounds and prints the phases and ratios.
pub async fn run(bench: &Arc<Bench>, args: &Args) {
    let mut phases = Vec::new();
    for round in 0..args.rounds.max(1) {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for long in order {
            let history = if long { args.history } else { 0 };
            let sessions = Arc::new(bench.seeded_clients(args.sessions, history).await);
            let (samples, _, errors) = drive(
                bench,
                sessions,
                Kind::None,
                args.connections,
                Duration::from_secs(args.warmup),
                Duration::from_secs(args.duration),
            )
            .await;
            let mut totals: Vec<Duration> = samples.iter().map(|s| s.total).collect();
            totals.sort();
            let seconds = args.duration as f64;
            println!(
                "mode=long round={} phase={} history_start={history} sessions={} turns={} \
                 turns_per_s={:.1} p50_ms={} p99_ms={} errors={}",
                round + 1,
                if long { "long" } else { "fresh" },
                args.sessions,
                totals.len(),
                totals.len() as f64 / seconds,
                msv(percentile(&totals, 50.0)),
                msv(percentile(&totals, 99.0)),
                errors.total(),
            );
            phases.push(Phase {
                long,
                turns: totals.len(),
                seconds,
            });
        }
    }
    let rate = |long: bool, round: Option<usize>| {
        let (turns, seconds) = phases
            .iter()
            .enumerate()
            .filter(|(i, p)| p.long == long && round.is_none_or(|r| i / 2 == r))
            .fold((0, 0.0), |(t, s), (_, p)| (t + p.turns, s + p.seconds));
        turns as f64 / seconds
    };
    let ratios: Vec<String> = (0..phases.len() / 2)
        .map(|r| format!("{:.2}", rate(true, Some(r)) / rate(false, Some(r))))
        .collect();
    println!(
        "long_ratio={:.2} rounds={} fresh_turns_per_s={:.1} long_turns_per_s={:.1} history={}",
        rate(true, None) / rate(false, None),
        ratios.join(","),
        rate(false, None),
        rate(true, None),
        args.history,
    );
    println!(
        "  turns/s on sessions starting with {} messages over fresh ones: {:.2} (rounds: {})",
        args.history,
        rate(true, None) / rate(false, None),
        ratios.join(", ")
    );
}
