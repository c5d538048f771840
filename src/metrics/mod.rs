//! Prometheus metrics: one registry per application (never a global: tests build many
//! apps in one process), updated where things happen and rendered as the text exposition
//! format at `GET /metrics`. A leaf: it knows no other module (but the process-wide count of
//! dropped trace spans), callers hand it label values.
//!
//! Label values are bounded: route templates, methods, statuses, configured agents,
//! providers, models and servers, fixed outcomes. Nothing a client sends becomes a label;
//! the tenant id becomes one only when `metrics.tenant_label` says so.

mod exposition;
mod family;
mod primitives;

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

pub use exposition::{CONTENT_TYPE, Exposition, escape_label_value, format_float};
pub use family::{Family, Kind, Render};
pub use primitives::{Counter, Gauge, GaugeGuard, Histogram, HistogramSnapshot};

use family::{BATCH_EVENTS, FAST_SECONDS, SLOW_SECONDS};

/// The tenant label's name.
const TENANT: &str = "tenant";

/// Every family agentry exports.
#[derive(Debug)]
pub struct Metrics {
    tenant_label: bool,
    http_requests: Family<Counter>,
    http_duration: Family<Histogram>,
    sse_connections: Arc<Gauge>,
    sse_family: Family<Gauge>,
    turns_started: Family<Counter>,
    turns_ended: Family<Counter>,
    queue_depth: Arc<Gauge>,
    queue_depth_family: Family<Gauge>,
    queue_wait: Arc<Histogram>,
    queue_wait_family: Family<Histogram>,
    turn_duration: Family<Histogram>,
    first_event: Family<Histogram>,
    events_appended: Arc<Counter>,
    events_family: Family<Counter>,
    batch_events: Arc<Histogram>,
    batch_family: Family<Histogram>,
    commit_duration: Arc<Histogram>,
    commit_family: Family<Histogram>,
    live_subscribers: Arc<Gauge>,
    subscribers_family: Family<Gauge>,
    db_pool: Family<Gauge>,
    provider_calls: Family<Counter>,
    provider_errors: Family<Counter>,
    provider_duration: Family<Histogram>,
    provider_tokens: Family<Counter>,
    mcp_up: Family<Gauge>,
    webhook_deliveries: Family<Counter>,
}

/// The label names of a family, with the tenant's last when it has one.
fn labels(names: &[&'static str], tenant: bool) -> Vec<&'static str> {
    let mut labels = names.to_vec();
    if tenant {
        labels.push(TENANT);
    }
    labels
}

fn histogram(bounds: &'static [f64]) -> impl Fn() -> Histogram + Send + Sync + 'static {
    move || Histogram::new(bounds)
}

impl Metrics {
    /// A registry; with `tenant_label` the turn, HTTP-request and provider families carry
    /// the tenant id as a `tenant` label.
    pub fn new(tenant_label: bool) -> Arc<Metrics> {
        let t = tenant_label;
        let gauge = |name, help| Family::new(name, help, vec![], Gauge::default);
        let counter = |name, help| Family::new(name, help, vec![], Counter::default);
        let sse_family = gauge(
            "agentry_sse_connections",
            "Server-sent event responses open now.",
        );
        let queue_depth_family = gauge(
            "agentry_turn_queue_depth",
            "Turns waiting in this process for a slot to run in.",
        );
        let queue_wait_family = Family::new(
            "agentry_turn_queue_wait_seconds",
            "Time from a turn's admission to the start of its run.",
            vec![],
            histogram(&SLOW_SECONDS),
        );
        let events_family = counter(
            "agentry_events_appended_total",
            "Events the event writer committed to the log.",
        );
        let batch_family = Family::new(
            "agentry_writer_batch_events",
            "Events per transaction of the event writer.",
            vec![],
            histogram(&BATCH_EVENTS),
        );
        let commit_family = Family::new(
            "agentry_writer_commit_duration_seconds",
            "Time the event writer's transactions take to commit.",
            vec![],
            histogram(&FAST_SECONDS),
        );
        let subscribers_family = gauge(
            "agentry_live_subscribers",
            "Followers of sessions' live events now.",
        );
        Arc::new(Metrics {
            tenant_label,
            http_requests: Family::new(
                "agentry_http_requests_total",
                "HTTP requests answered, by route template, method and status.",
                labels(&["route", "method", "status"], t),
                Counter::default,
            ),
            http_duration: Family::new(
                "agentry_http_request_duration_seconds",
                "Time to answer an HTTP request (to the response's head for streams).",
                labels(&["route", "method"], t),
                histogram(&FAST_SECONDS),
            ),
            sse_connections: sse_family.with(&[]),
            sse_family,
            turns_started: Family::new(
                "agentry_turns_started_total",
                "Turns started, by agent.",
                labels(&["agent"], t),
                Counter::default,
            ),
            turns_ended: Family::new(
                "agentry_turns_ended_total",
                "Turns ended, by agent and outcome (the stop reason, or cancelled, \
                 interrupted, failed).",
                labels(&["agent", "outcome"], t),
                Counter::default,
            ),
            queue_depth: queue_depth_family.with(&[]),
            queue_depth_family,
            queue_wait: queue_wait_family.with(&[]),
            queue_wait_family,
            turn_duration: Family::new(
                "agentry_turn_duration_seconds",
                "Time a turn runs, from its start to its durable end.",
                labels(&["agent"], t),
                histogram(&SLOW_SECONDS),
            ),
            first_event: Family::new(
                "agentry_turn_time_to_first_event_seconds",
                "Time from a turn's start to the model's first output (text, thinking or a \
                 tool call).",
                labels(&["agent"], t),
                histogram(&SLOW_SECONDS),
            ),
            events_appended: events_family.with(&[]),
            events_family,
            batch_events: batch_family.with(&[]),
            batch_family,
            commit_duration: commit_family.with(&[]),
            commit_family,
            live_subscribers: subscribers_family.with(&[]),
            subscribers_family,
            db_pool: Family::new(
                "agentry_db_pool_connections",
                "Database pool connections, by pool and state (in_use, idle).",
                vec!["pool", "state"],
                Gauge::default,
            ),
            provider_calls: Family::new(
                "agentry_provider_calls_total",
                "Model calls, by provider and model.",
                labels(&["provider", "model"], t),
                Counter::default,
            ),
            provider_errors: Family::new(
                "agentry_provider_errors_total",
                "Model calls that failed, by provider and model.",
                labels(&["provider", "model"], t),
                Counter::default,
            ),
            provider_duration: Family::new(
                "agentry_provider_call_duration_seconds",
                "Time a model call takes, to the end of its stream.",
                labels(&["provider", "model"], t),
                histogram(&SLOW_SECONDS),
            ),
            provider_tokens: Family::new(
                "agentry_provider_tokens_total",
                "Tokens providers reported, by provider, model and direction (in, out).",
                labels(&["provider", "model", "direction"], t),
                Counter::default,
            ),
            mcp_up: Family::new(
                "agentry_mcp_server_up",
                "Whether a configured MCP server is connected (1) or not (0).",
                vec!["server"],
                Gauge::default,
            ),
            webhook_deliveries: Family::new(
                "agentry_webhook_deliveries_total",
                "Webhook delivery attempts, by outcome (delivered, failed: retried later, \
                 disabled: given up and the endpoint disabled).",
                vec!["outcome"],
                Counter::default,
            ),
        })
    }

    /// The series of `values`, with the tenant's value appended when the label is on.
    fn series<M: Kind>(
        &self,
        family: &Family<M>,
        values: &[&str],
        tenant: Option<&dyn Display>,
    ) -> Arc<M> {
        if !self.tenant_label {
            return family.with(values);
        }
        let tenant = tenant.map(ToString::to_string).unwrap_or_default();
        let mut all = values.to_vec();
        all.push(&tenant);
        family.with(&all)
    }

    /// An HTTP request answered: `route` is its route template (never its raw path).
    pub fn http_request(
        &self,
        route: &str,
        method: &str,
        status: u16,
        tenant: Option<&dyn Display>,
        elapsed: Duration,
    ) {
        let status = status.to_string();
        self.series(&self.http_requests, &[route, method, &status], tenant)
            .inc();
        self.series(&self.http_duration, &[route, method], tenant)
            .observe(elapsed.as_secs_f64());
    }

    /// Counts an open event stream until the guard is dropped.
    pub fn sse_connection(&self) -> GaugeGuard {
        self.sse_connections.track()
    }

    pub fn turn_started(&self, agent: &str, tenant: &dyn Display) {
        self.series(&self.turns_started, &[agent], Some(tenant))
            .inc();
    }

    /// A turn's end; `ran` is how long it ran, if it ran (not for one stopped while it
    /// waited).
    pub fn turn_ended(
        &self,
        agent: &str,
        outcome: &str,
        tenant: &dyn Display,
        ran: Option<Duration>,
    ) {
        self.series(&self.turns_ended, &[agent, outcome], Some(tenant))
            .inc();
        if let Some(ran) = ran {
            self.series(&self.turn_duration, &[agent], Some(tenant))
                .observe(ran.as_secs_f64());
        }
    }

    pub fn turn_first_event(&self, agent: &str, tenant: &dyn Display, elapsed: Duration) {
        self.series(&self.first_event, &[agent], Some(tenant))
            .observe(elapsed.as_secs_f64());
    }

    pub fn turn_queue_wait(&self, waited: Duration) {
        self.queue_wait.observe(waited.as_secs_f64());
    }

    pub fn set_turn_queue_depth(&self, depth: usize) {
        self.queue_depth
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// A committed transaction of the event writer.
    pub fn writer_committed(&self, events: usize, elapsed: Duration) {
        self.events_appended.add(events as u64);
        self.batch_events.observe(events as f64);
        self.commit_duration.observe(elapsed.as_secs_f64());
    }

    /// Counts a live subscriber until the guard is dropped.
    pub fn live_subscriber(&self) -> GaugeGuard {
        self.live_subscribers.track()
    }

    /// A database pool's connections now.
    pub fn set_db_pool(&self, pool: &str, in_use: u32, idle: u32) {
        self.db_pool.with(&[pool, "in_use"]).set(i64::from(in_use));
        self.db_pool.with(&[pool, "idle"]).set(i64::from(idle));
    }

    /// A model call that ended (its stream done, failed or abandoned).
    pub fn provider_call(&self, call: ProviderCall<'_>, tenant: &dyn Display) {
        let key = [call.provider, call.model];
        self.series(&self.provider_calls, &key, Some(tenant)).inc();
        if call.failed {
            self.series(&self.provider_errors, &key, Some(tenant)).inc();
        }
        self.series(&self.provider_duration, &key, Some(tenant))
            .observe(call.elapsed.as_secs_f64());
        for (direction, tokens) in [("in", call.input_tokens), ("out", call.output_tokens)] {
            self.series(
                &self.provider_tokens,
                &[call.provider, call.model, direction],
                Some(tenant),
            )
            .add(tokens);
        }
    }

    /// The configured MCP servers and whether each is connected now.
    pub fn set_mcp_servers<'a>(&self, servers: impl IntoIterator<Item = (&'a str, bool)>) {
        let servers: Vec<(&str, bool)> = servers.into_iter().collect();
        self.mcp_up
            .retain(|key| servers.iter().any(|(name, _)| key[0] == *name));
        for (name, up) in servers {
            self.mcp_up.with(&[name]).set(i64::from(up));
        }
    }

    /// One webhook delivery attempt's outcome: `delivered`, `failed` (retried later) or
    /// `disabled` (given up: the endpoint is disabled).
    pub fn webhook_delivery(&self, outcome: &str) {
        self.webhook_deliveries.with(&[outcome]).inc();
    }

    /// Every family, in the text exposition format.
    pub fn render(&self) -> String {
        let families: [&dyn Render; 20] = [
            &self.http_requests,
            &self.http_duration,
            &self.sse_family,
            &self.turns_started,
            &self.turns_ended,
            &self.queue_depth_family,
            &self.queue_wait_family,
            &self.turn_duration,
            &self.first_event,
            &self.events_family,
            &self.batch_family,
            &self.commit_family,
            &self.subscribers_family,
            &self.db_pool,
            &self.provider_calls,
            &self.provider_errors,
            &self.provider_duration,
            &self.provider_tokens,
            &self.mcp_up,
            &self.webhook_deliveries,
        ];
        let mut out = Exposition::new();
        for family in families {
            family.render(&mut out);
        }
        let (queue_full, export_failed) = crate::traces::dropped_spans();
        out.family(
            "agentry_trace_spans_dropped_total",
            "Trace spans dropped: the export queue was full, or their export failed.",
            "counter",
        );
        for (reason, count) in [("queue_full", queue_full), ("export_failed", export_failed)] {
            out.sample(
                "agentry_trace_spans_dropped_total",
                &[("reason", reason)],
                None,
                &count.to_string(),
            );
        }
        out.into_string()
    }
}

/// What one model call did.
#[derive(Debug, Clone, Copy)]
pub struct ProviderCall<'a> {
    pub provider: &'a str,
    pub model: &'a str,
    pub elapsed: Duration,
    pub failed: bool,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenant_label_is_added_only_when_asked_for() {
        let plain = Metrics::new(false);
        plain.turn_started("echo", &"ten_1");
        plain.http_request("/sessions", "GET", 200, None, Duration::from_millis(3));
        let text = plain.render();
        assert!(
            text.contains("agentry_turns_started_total{agent=\"echo\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("tenant="), "{text}");

        let labelled = Metrics::new(true);
        labelled.turn_started("echo", &"ten_1");
        labelled.http_request("/sessions", "GET", 200, None, Duration::from_millis(3));
        let text = labelled.render();
        assert!(
            text.contains("agentry_turns_started_total{agent=\"echo\",tenant=\"ten_1\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "agentry_http_requests_total{route=\"/sessions\",method=\"GET\",status=\"200\",tenant=\"\"} 1\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn servers_no_longer_configured_leave_the_mcp_family() {
        let metrics = Metrics::new(false);
        metrics.set_mcp_servers([("files", true), ("search", false)]);
        let text = metrics.render();
        assert!(
            text.contains("agentry_mcp_server_up{server=\"files\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("agentry_mcp_server_up{server=\"search\"} 0\n"),
            "{text}"
        );
        metrics.set_mcp_servers([("files", false)]);
        let text = metrics.render();
        assert!(
            text.contains("agentry_mcp_server_up{server=\"files\"} 0\n"),
            "{text}"
        );
        assert!(!text.contains("search"), "{text}");
    }
}
