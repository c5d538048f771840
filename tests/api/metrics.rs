//! `GET /metrics`: valid Prometheus text whose turn, event, HTTP and provider families move
//! when a turn runs; its bearer token, its own listener, the tenant label; request ids on
//! every response and in the JSON logs of a request.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestDb, captured_logs, spawn_app, spawn_app_on, user};
use crate::scripted::{Reply, ScriptedOpenAi, finish, text, usage};

// ---------------------------------------------------------------- a strict parser

/// One sample line.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A scrape, checked line by line as it was parsed.
#[derive(Debug)]
struct Scrape {
    types: HashMap<String, String>,
    samples: Vec<Sample>,
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_value(text: &str) -> f64 {
    match text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        other => other
            .parse()
            .unwrap_or_else(|_| panic!("`{other}` is not a sample value")),
    }
}

/// `{a="x",b="y\"z"}` at the start of `text`: the labels and what follows the `}`.
fn parse_labels(text: &str, line: &str) -> (BTreeMap<String, String>, String) {
    let mut labels = BTreeMap::new();
    let mut rest = text.strip_prefix('{').unwrap();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return (labels, after.to_owned());
        }
        let eq = rest.find('=').unwrap_or_else(|| panic!("no `=` in {line}"));
        let name = rest[..eq].trim();
        assert!(is_label_name(name), "bad label name `{name}` in {line}");
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .unwrap_or_else(|| panic!("unquoted label value in {line}"));
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => panic!("bad escape {other:?} in {line}"),
                },
                Some((i, '"')) => break i,
                Some((_, '\n')) => panic!("raw line feed in {line}"),
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value in {line}"),
            }
        };
        assert!(
            labels.insert(name.to_owned(), value).is_none(),
            "label `{name}` twice in {line}"
        );
        rest = &rest[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// The family a sample belongs to: a histogram's series are named after it with a suffix.
fn family_of<'a>(name: &'a str, types: &HashMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && types.get(base).is_some_and(|t| t == "histogram")
        {
            return base;
        }
    }
    name
}

/// Parses the text exposition format 0.0.4, failing on any line that is not valid, on a
/// sample whose family has no `# TYPE` before it, on a family typed twice, and on a
/// histogram whose buckets are not cumulative or whose `+Inf` bucket is not its `_count`.
fn parse(text: &str) -> Scrape {
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "the exposition ends with a line feed"
    );
    let mut types: HashMap<String, String> = HashMap::new();
    let mut helped = std::collections::HashSet::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, ' ');
            match words.next() {
                Some("HELP") => {
                    let name = words.next().expect("HELP names a metric");
                    assert!(is_metric_name(name), "{line}");
                    assert!(helped.insert(name.to_owned()), "HELP twice: {line}");
                }
                Some("TYPE") => {
                    let name = words.next().expect("TYPE names a metric");
                    let kind = words.next().expect("TYPE gives a type");
                    assert!(is_metric_name(name), "{line}");
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                        "{line}"
                    );
                    assert!(
                        !samples
                            .iter()
                            .any(|s: &Sample| family_of(&s.name, &types) == name),
                        "TYPE after samples: {line}"
                    );
                    assert!(
                        types.insert(name.to_owned(), kind.to_owned()).is_none(),
                        "TYPE twice: {line}"
                    );
                }
                _ => {}
            }
            continue;
        }
        let name_end = line
            .find(['{', ' '])
            .unwrap_or_else(|| panic!("no value: {line}"));
        let name = &line[..name_end];
        assert!(is_metric_name(name), "bad metric name in {line}");
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..], line)
        } else {
            (BTreeMap::new(), line[name_end..].to_owned())
        };
        let mut fields = rest.split_whitespace();
        let value = parse_value(fields.next().unwrap_or_else(|| panic!("no value: {line}")));
        if let Some(timestamp) = fields.next() {
            timestamp.parse::<i64>().expect("a timestamp is an integer");
        }
        assert!(fields.next().is_none(), "trailing text: {line}");
        let family = family_of(name, &types);
        assert!(types.contains_key(family), "no TYPE for {name}: {line}");
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    let scrape = Scrape { types, samples };
    scrape.check_histograms();
    scrape
}

/// A series' labels, in order.
type Labels = Vec<(String, String)>;

impl Scrape {
    fn check_histograms(&self) {
        for (family, _) in self.types.iter().filter(|(_, t)| *t == "histogram") {
            let mut series: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
            for sample in self
                .samples
                .iter()
                .filter(|s| s.name == format!("{family}_bucket"))
            {
                let le = parse_value(sample.labels.get("le").expect("a bucket has `le`"));
                let mut key: Labels = sample.labels.clone().into_iter().collect();
                key.retain(|(name, _)| name != "le");
                series.entry(key).or_default().push((le, sample.value));
            }
            for (labels, buckets) in series {
                assert!(
                    buckets
                        .windows(2)
                        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                    "{family}{labels:?}: buckets are ascending and cumulative: {buckets:?}"
                );
                let (last_le, inf) = *buckets.last().unwrap();
                assert_eq!(last_le, f64::INFINITY, "{family}{labels:?} ends at +Inf");
                let labels: BTreeMap<String, String> = labels.into_iter().collect();
                let count = self
                    .samples
                    .iter()
                    .find(|s| s.name == format!("{family}_count") && s.labels == labels)
                    .unwrap_or_else(|| panic!("{family}{labels:?} has a _count"));
                assert_eq!(count.value, inf, "{family}{labels:?}: +Inf is _count");
                assert!(
                    self.samples
                        .iter()
                        .any(|s| s.name == format!("{family}_sum") && s.labels == labels),
                    "{family}{labels:?} has a _sum"
                );
            }
        }
    }

    /// The sum of the samples named `name` whose labels include `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .sum()
    }

    fn series(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }
}

#[test]
fn the_parser_refuses_what_prometheus_would() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"q\\\"\\n\\\\\"} 1\n";
    assert_eq!(parse(good).samples[0].labels["x"], "q\"\n\\");
    for bad in [
        "a_total 1\n",
        "# TYPE a_total counter\na_total{x=\"1\"\n",
        "# TYPE a_total counter\na_total{x=1} 1\n",
        "# TYPE a_total counter\na_total one\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n",
    ] {
        let refused = std::panic::catch_unwind(|| parse(bad)).is_err();
        assert!(refused, "accepted: {bad:?}");
    }
}

// ---------------------------------------------------------------- helpers

async fn scrape_at(app: &TestApp, base: &str, token: Option<&str>) -> Scrape {
    let mut request = app.client.get(format!("{base}/metrics"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    parse(&response.text().await.unwrap())
}

async fn scrape(app: &TestApp) -> Scrape {
    scrape_at(app, &app.address, None).await
}

/// Scrapes until `ready` holds (a value set by a task the test does not wait on).
async fn scrape_until(app: &TestApp, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let scrape = scrape(app).await;
        if ready(&scrape) {
            return scrape;
        }
        assert!(Instant::now() < deadline, "{scrape:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs one turn (`stream: "none"`) in a new session of `agent`; returns the session, the
/// turn's id and the response's request id.
async fn run_turn(app: &TestApp, token: &str, agent: &str) -> (String, String, String) {
    let session = app
        .create_session(token, json!({"agent": {"name": agent}}))
        .await;
    let response = app
        .client
        .post(app.url(&format!("/sessions/{session}/turns")))
        .bearer_auth(token)
        .header("X-Request-Id", "client-chosen-42")
        .json(&json!({"messages": [user("Hello metrics")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    let request_id = header("agentry-request-id");
    let turn = header("agentry-turn-id");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["stopReason"], "end_turn", "{body}");
    (session, turn, request_id)
}

// ---------------------------------------------------------------- the families move

#[tokio::test]
async fn the_turn_event_http_and_provider_families_move_when_a_turn_runs() {
    let app = spawn_app().await;
    let (_, token) = app.new_tenant().await;
    let before = scrape(&app).await;
    let (session, _, _) = run_turn(&app, &token, "echo").await;
    let after = scrape(&app).await;
    let moved = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };

    // HTTP: by route template, never the raw path.
    let route = [
        ("route", "/sessions/{session_id}/turns"),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert_eq!(moved("agentry_http_requests_total", &route), 1.0);
    assert_eq!(
        moved("agentry_http_request_duration_seconds_count", &route[..2]),
        1.0
    );
    assert!(
        after.samples.iter().all(|s| s
            .labels
            .values()
            .all(|v| !v.contains(&session) && !v.contains("sess_"))),
        "no raw path or id becomes a label"
    );
    assert!(
        after.value(
            "agentry_http_requests_total",
            &[
                ("route", "/sessions"),
                ("method", "POST"),
                ("status", "201")
            ]
        ) >= 1.0
    );

    // Turns.
    let echo = [("agent", "echo")];
    assert_eq!(moved("agentry_turns_started_total", &echo), 1.0);
    assert_eq!(
        moved(
            "agentry_turns_ended_total",
            &[("agent", "echo"), ("outcome", "end_turn")]
        ),
        1.0
    );
    assert_eq!(moved("agentry_turn_duration_seconds_count", &echo), 1.0);
    assert_eq!(
        moved("agentry_turn_time_to_first_event_seconds_count", &echo),
        1.0
    );
    assert_eq!(moved("agentry_turn_queue_wait_seconds_count", &[]), 1.0);
    assert_eq!(after.value("agentry_turn_queue_depth", &[]), 0.0);

    // The event log: turn_start, message_start, three deltas, message_stop, usage,
    // turn_stop.
    assert!(moved("agentry_events_appended_total", &[]) >= 6.0);
    assert!(moved("agentry_writer_batch_events_count", &[]) >= 1.0);
    assert!(moved("agentry_writer_commit_duration_seconds_count", &[]) >= 1.0);

    // The provider (the test's echo agent names no model).
    let model = [("provider", "echo"), ("model", "")];
    assert_eq!(moved("agentry_provider_calls_total", &model), 1.0);
    assert_eq!(moved("agentry_provider_errors_total", &model), 0.0);
    assert_eq!(
        moved("agentry_provider_call_duration_seconds_count", &model),
        1.0
    );
    for direction in ["in", "out"] {
        let labels = [model[0], model[1], ("direction", direction)];
        assert!(
            moved("agentry_provider_tokens_total", &labels) > 0.0,
            "{direction}"
        );
    }

    // Read at scrape time: the database pools.
    let pools = after.series("agentry_db_pool_connections");
    assert!(!pools.is_empty());
    assert!(pools.iter().all(|s| s.labels.contains_key("pool")
        && ["in_use", "idle"].contains(&s.labels["state"].as_str())));
    // And the SQLite writer's writes with their statements: the turn's admission and its
    // events, at most one statement each (PostgreSQL has none).
    let writes = moved("agentry_db_writes_total", &[]);
    let statements = moved("agentry_db_write_statements_total", &[]);
    if std::env::var_os("TEST_POSTGRES_URL").is_some() {
        assert_eq!((writes, statements), (0.0, 0.0));
    } else {
        assert!(writes >= 2.0, "{writes}");
        assert!(
            (1.0..=writes).contains(&statements),
            "{statements} of {writes}"
        );
    }

    // No tenant label by default.
    assert!(
        after
            .samples
            .iter()
            .all(|s| !s.labels.contains_key("tenant")),
        "no tenant label unless metrics.tenant_label"
    );
    for family in [
        "agentry_sse_connections",
        "agentry_live_subscribers",
        "agentry_mcp_server_up",
        "agentry_webhook_deliveries_total",
    ] {
        assert!(after.types.contains_key(family), "{family}");
    }
}

#[tokio::test]
async fn an_unmatched_path_is_one_label_and_a_failed_model_call_is_counted() {
    let server = ScriptedOpenAi::start().await;
    let config = String::from("[[agents]]\nname = \"gpt\"\nprovider = \"openai\"\n")
        + "base_url = \""
        + &server.url
        + "\"\n"
        + r#"model = "{{options.model}}"
max_retries = 0

[[agents.options]]
name = "model"
type = "select"
options = ["tiny", "big"]
default = "tiny"
"#;
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    let (_, token) = app.new_tenant().await;

    for path in ["/no/such/route", "/another/one"] {
        let reply = app.get(path, &token).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
    }
    let session = app
        .create_session(
            &token,
            json!({"agent": {"name": "gpt", "options": {"model": "big"}}}),
        )
        .await;
    server.push(Reply::Stream(vec![
        text("Hi"),
        finish("stop"),
        usage(12, 3),
    ]));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("one")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "end_turn", "{}", reply.text);
    server.push(Reply::Status(
        400,
        json!({"error": {"message": "bad request"}}),
    ));
    let reply = app
        .post(
            &format!("/sessions/{session}/turns"),
            &token,
            json!({"messages": [user("two")]}),
        )
        .await;
    assert_eq!(reply.body["stopReason"], "error", "{}", reply.text);

    let after = scrape(&app).await;
    assert_eq!(
        after.value(
            "agentry_http_requests_total",
            &[("route", "unmatched"), ("status", "404")]
        ),
        2.0
    );
    // The select option the model names is a bounded label.
    let model = [("provider", "openai"), ("model", "big")];
    assert_eq!(after.value("agentry_provider_calls_total", &model), 2.0);
    assert_eq!(after.value("agentry_provider_errors_total", &model), 1.0);
    assert_eq!(
        after.value(
            "agentry_provider_tokens_total",
            &[model[0], model[1], ("direction", "in")]
        ),
        12.0
    );
    assert_eq!(
        after.value(
            "agentry_provider_tokens_total",
            &[model[0], model[1], ("direction", "out")]
        ),
        3.0
    );
    assert_eq!(
        after.value(
            "agentry_turns_ended_total",
            &[("agent", "gpt"), ("outcome", "failed")]
        ),
        1.0
    );
}

#[tokio::test]
async fn open_event_streams_and_live_subscribers_are_counted_until_they_close() {
    // A client that left is noticed at the next write: a keep-alive comment at the latest.
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[engine]\nsse_keep_alive_seconds = 1\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    let session = app
        .create_session(&token, json!({"agent": {"name": "echo"}}))
        .await;
    let mut stream = app
        .stream(&format!("/sessions/{session}/events"), &token, None)
        .await;
    let open = scrape_until(&app, |s| {
        s.value("agentry_sse_connections", &[]) == 1.0
            && s.value("agentry_live_subscribers", &[]) == 1.0
    })
    .await;
    assert_eq!(open.value("agentry_sse_connections", &[]), 1.0);
    // The stream is live: a turn's events reach it.
    app.post(
        &format!("/sessions/{session}/turns"),
        &token,
        json!({"messages": [user("hi")]}),
    )
    .await;
    assert!(stream.next().await.is_some());
    drop(stream);
    scrape_until(&app, |s| {
        s.value("agentry_sse_connections", &[]) == 0.0
            && s.value("agentry_live_subscribers", &[]) == 0.0
    })
    .await;
}

// ---------------------------------------------------------------- who may scrape, where

#[tokio::test]
async fn a_configured_bearer_token_is_required_to_scrape() {
    let config = "[metrics]\nbearer_token = \"scrape-secret-1\"";
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let missing = app
        .request(reqwest::Method::GET, "/metrics", None, None)
        .await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(missing.code(), "missing_token");
    assert_eq!(missing.headers["www-authenticate"], "Bearer");
    for wrong in ["scrape-secret-2", "scrape-secret-1x", "s", &app.admin_token] {
        let reply = app.get("/metrics", wrong).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{wrong}");
        assert_eq!(reply.code(), "invalid_token");
    }
    let basic = app
        .client
        .get(app.url("/metrics"))
        .header("Authorization", "Basic scrape-secret-1")
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);
    let scrape = scrape_at(&app, &app.address, Some("scrape-secret-1")).await;
    assert!(scrape.types.contains_key("agentry_http_requests_total"));
    assert!(
        !captured_logs().contains("scrape-secret-1"),
        "the token is never logged"
    );
}

#[tokio::test]
async fn metrics_on_their_own_address_are_not_served_on_the_main_one() {
    let config = "[metrics]\nbind = \"127.0.0.1:0\"";
    let app = spawn_app_on(Arc::new(TestDb::new().await), config).await;
    let own = app
        .metrics_address
        .clone()
        .expect("metrics.bind gives /metrics a listener");
    assert_ne!(own, app.address);
    let main = app
        .request(reqwest::Method::GET, "/metrics", None, None)
        .await;
    assert_eq!(main.status, StatusCode::NOT_FOUND);
    assert_eq!(main.code(), "not_found");
    let scrape = scrape_at(&app, &own, None).await;
    // The main port's 404 was counted there, and seen here.
    assert_eq!(
        scrape.value(
            "agentry_http_requests_total",
            &[("route", "/metrics"), ("status", "404")]
        ),
        1.0
    );
    let other = app
        .client
        .get(format!("{own}/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);

    let off = spawn_app_on(Arc::new(TestDb::new().await), "[metrics]\nenabled = false").await;
    assert!(off.metrics_address.is_none());
    let reply = off
        .request(reqwest::Method::GET, "/metrics", None, None)
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_tenant_label_is_there_only_when_configured() {
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[metrics]\ntenant_label = true",
    )
    .await;
    let (tenant, token) = app.new_tenant().await;
    run_turn(&app, &token, "echo").await;
    let scrape = scrape(&app).await;
    let mine = [("agent", "echo"), ("tenant", tenant.as_str())];
    assert_eq!(scrape.value("agentry_turns_started_total", &mine), 1.0);
    assert_eq!(
        scrape.value(
            "agentry_turns_ended_total",
            &[mine[0], mine[1], ("outcome", "end_turn")]
        ),
        1.0
    );
    assert_eq!(
        scrape.value(
            "agentry_provider_calls_total",
            &[
                ("provider", "echo"),
                ("model", ""),
                ("tenant", tenant.as_str())
            ]
        ),
        1.0
    );
    assert_eq!(
        scrape.value(
            "agentry_http_requests_total",
            &[
                ("route", "/sessions/{session_id}/turns"),
                ("tenant", tenant.as_str())
            ]
        ),
        1.0
    );
    // Families without a tenant stay without.
    assert!(
        scrape
            .series("agentry_events_appended_total")
            .iter()
            .all(|s| !s.labels.contains_key("tenant"))
    );
}

// ---------------------------------------------------------------- request ids and logs

#[tokio::test]
async fn every_response_carries_a_fresh_request_id_that_the_requests_json_logs_carry() {
    let app = spawn_app().await;
    let (tenant, token) = app.new_tenant().await;
    let mut ids = std::collections::HashSet::new();
    for path in ["/healthz", "/metrics", "/no/such/route"] {
        let reply = app
            .client
            .get(app.url(path))
            .header("X-Request-Id", "mine-not-yours")
            .send()
            .await
            .unwrap();
        let id = reply.headers()["agentry-request-id"].to_str().unwrap();
        assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
        assert!(ids.insert(id.to_owned()), "a fresh id per request");
    }
    let (session, turn, request_id) = run_turn(&app, &token, "echo").await;
    assert!(!ids.contains(&request_id) && request_id != "client-chosen-42");

    // The lines the turn's request logged name it, its tenant, session and turn, and the
    // client's own id; the text logs hold the same fields.
    let logs = captured_logs();
    let lines: Vec<Value> = logs
        .lines()
        .filter(|line| line.contains(&request_id))
        .map(|line| serde_json::from_str(line).expect("each log line is JSON"))
        .collect();
    let queued = lines
        .iter()
        .find(|line| line["fields"]["message"] == "turn queued")
        .unwrap_or_else(|| panic!("the request logged its turn: {lines:#?}"));
    let span = queued["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|span| span["request_id"] == request_id.as_str())
        .expect("the request's span is in the line's span list");
    assert_eq!(span["tenant_id"], tenant.as_str());
    assert_eq!(span["session_id"], session.as_str());
    assert_eq!(span["turn_id"], turn.as_str());
    assert_eq!(span["client_request_id"], "client-chosen-42");
    assert!(
        lines.len() >= 2,
        "every line of the request carries its id: {lines:#?}"
    );
    for line in &lines {
        let spans = line["spans"].as_array().cloned().unwrap_or_default();
        let span = line["span"].clone();
        let carries = spans
            .iter()
            .chain(std::iter::once(&span))
            .any(|s| s["request_id"] == request_id.as_str() && s["tenant_id"] == tenant.as_str());
        assert!(carries, "{line}");
    }

    // The turn's own task logs in a span with its ids (its last line may follow the
    // response).
    let deadline = Instant::now() + Duration::from_secs(10);
    let ended = loop {
        let ended = captured_logs()
            .lines()
            .filter(|line| line.contains(&turn) && line.contains("turn ended"))
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .next();
        if let Some(ended) = ended {
            break ended;
        }
        assert!(Instant::now() < deadline, "the turn's task logged its end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let turn_span = ended["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|span| span["name"] == "turn")
        .expect("the turn span");
    assert_eq!(turn_span["tenant_id"], tenant.as_str());
    assert_eq!(turn_span["session_id"], session.as_str());
    assert_eq!(turn_span["turn_id"], turn.as_str());
    assert!(!logs.contains(&token), "tokens are never logged");
}

#[tokio::test]
async fn each_configured_mcp_server_is_reported_up_or_down() {
    let config = format!(
        "[[mcp_servers]]\nname = \"fx\"\ncommand = '{}'\n\n\
         [[mcp_servers]]\nname = \"gone\"\ncommand = '/nonexistent/agentry-mcp-server'\n",
        crate::mcp::fixture().display()
    );
    let app = spawn_app_on(Arc::new(TestDb::new().await), &config).await;
    assert!(
        app.state
            .mcp()
            .wait_for("fx", Duration::from_secs(20), |tools| tools.is_some())
            .await,
        "the fixture connects"
    );
    let scrape = scrape(&app).await;
    assert_eq!(
        scrape.value("agentry_mcp_server_up", &[("server", "fx")]),
        1.0
    );
    assert_eq!(
        scrape.value("agentry_mcp_server_up", &[("server", "gone")]),
        0.0
    );
    assert_eq!(scrape.series("agentry_mcp_server_up").len(), 2);
}

/// The rows of README's table of metric families: each family's full name (a row may name
/// several), its type, and the label names its third column gives in backticks before any
/// parenthesis (values such as `in_use` are in parentheses).
fn readme_families() -> Vec<(String, String, Vec<String>)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let table = readme
        .split("The families (all prefixed `agentry_`")
        .nth(1)
        .expect("README lists the metric families");
    let ticked = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let mut families = Vec::new();
    for row in table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
    {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let labels: Vec<String> = cells[3]
            .split(',')
            .flat_map(|label| ticked(label.split('(').next().unwrap_or_default()))
            .collect();
        for name in ticked(cells[1]) {
            families.push((
                format!("agentry_{name}"),
                cells[2].to_owned(),
                labels.clone(),
            ));
        }
    }
    families
}

#[tokio::test]
async fn every_family_the_readme_lists_is_scraped_with_its_type_and_labels() {
    let families = readme_families();
    assert!(families.len() >= 20, "{families:?}");
    let app = spawn_app_on(
        Arc::new(TestDb::new().await),
        "[metrics]\ntenant_label = false\n",
    )
    .await;
    let (_, token) = app.new_tenant().await;
    run_turn(&app, &token, "echo").await;
    let scrape = scrape(&app).await;
    for (name, kind, labels) in &families {
        assert_eq!(
            scrape.types.get(name),
            Some(kind),
            "README's `{name}` ({kind}) in the scrape"
        );
        let mut allowed: Vec<&str> = labels.iter().map(String::as_str).collect();
        if kind == "histogram" {
            allowed.push("le");
        }
        for sample in scrape
            .samples
            .iter()
            .filter(|s| family_of(&s.name, &scrape.types) == name)
        {
            for label in sample.labels.keys() {
                assert!(
                    allowed.contains(&label.as_str()),
                    "{}: label `{label}` is not among README's {labels:?}",
                    sample.name
                );
            }
        }
    }
    // And nothing the README does not list.
    for name in scrape.types.keys() {
        assert!(
            families.iter().any(|(listed, _, _)| listed == name),
            "`{name}` is scraped but not in README's list"
        );
    }
}
