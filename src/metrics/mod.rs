//! Prometheus metrics on `prometheus-client`: one registry per application (never a global:
//! tests build many apps in one process), updated where things happen and rendered as the
//! Prometheus text exposition format 0.0.4 at `GET /metrics`. A leaf: it knows no other
//! module (but the process-wide count of dropped trace spans), callers hand it label values.
//!
//! Label values are bounded: route templates, methods, statuses, configured agents,
//! providers, models and servers, fixed outcomes. Nothing a client sends becomes a label;
//! the tenant id becomes one only when `metrics.tenant_label` says so.

use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeMetric, MetricEncoder, prometheus_text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

/// The content type of a scrape's answer.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// The tenant label's name.
const TENANT: &str = "tenant";

/// A series' labels, in the family's order.
type Labels = Vec<(&'static str, String)>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Bucket bounds (seconds) of request and commit latencies.
static FAST_SECONDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Bucket bounds (seconds) of turns and model calls.
static SLOW_SECONDS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];
/// Bucket bounds (events) of the writer's batches.
static BATCH_EVENTS: [f64; 12] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];

fn fast() -> Histogram {
    Histogram::new(FAST_SECONDS)
}

fn slow() -> Histogram {
    Histogram::new(SLOW_SECONDS)
}

fn batch() -> Histogram {
    Histogram::new(BATCH_EVENTS)
}

/// A duration or size as observed: a value that is not finite counts as 0.
fn observe(histogram: &Histogram, value: f64) {
    histogram.observe(if value.is_finite() { value } else { 0.0 });
}

/// Every family agentry exports.
#[derive(Debug)]
pub struct Metrics {
    tenant_label: bool,
    registry: Registry,
    http_requests: Family<Labels, Counter>,
    http_duration: Histograms,
    sse_connections: Gauge,
    turns_started: Family<Labels, Counter>,
    turns_ended: Family<Labels, Counter>,
    queue_depth: Gauge,
    queue_wait: Histogram,
    turn_duration: Histograms,
    first_event: Histograms,
    events_appended: Counter,
    batch_events: Histogram,
    commit_duration: Histogram,
    live_subscribers: Gauge,
    db_pool: Family<Labels, Gauge>,
    db_writes: Counter,
    db_write_statements: Counter,
    provider_calls: Family<Labels, Counter>,
    provider_errors: Family<Labels, Counter>,
    provider_duration: Histograms,
    provider_tokens: Family<Labels, Counter>,
    mcp_up: Family<Labels, Gauge>,
    /// The servers `mcp_up` has a series of.
    mcp_servers: Mutex<Vec<String>>,
    webhook_deliveries: Family<Labels, Counter>,
}

/// Registers `metric` under `name` with its help. The library writes a counter's name with
/// `_total` and ends help with a full stop: `name` and `help` are given as the scrape shows
/// them, and both are taken off here.
fn register<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: &M) -> M {
    let name = name.strip_suffix("_total").unwrap_or(name);
    let help = help.strip_suffix('.').unwrap_or(help);
    registry.register(name, help, Listed(metric.clone()));
    metric.clone()
}

/// A metric whose family is in every scrape, its help and type at least, before it has a
/// series (the library leaves out a family without one): a scrape lists every family
/// agentry has.
#[derive(Debug)]
struct Listed<M>(M);

impl<M: EncodeMetric> EncodeMetric for Listed<M> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        false
    }
}

impl Metrics {
    /// A registry; with `tenant_label` the turn, HTTP-request and provider families carry
    /// the tenant id as a `tenant` label.
    pub fn new(tenant_label: bool) -> Arc<Metrics> {
        let mut r = Registry::default();
        let histograms = |make: fn() -> Histogram| Histograms::new_with_constructor(make);
        let metrics = Metrics {
            tenant_label,
            http_requests: register(
                &mut r,
                "agentry_http_requests_total",
                "HTTP requests answered, by route template, method and status.",
                &Family::default(),
            ),
            http_duration: register(
                &mut r,
                "agentry_http_request_duration_seconds",
                "Time to answer an HTTP request (to the response's head for streams).",
                &histograms(fast),
            ),
            sse_connections: register(
                &mut r,
                "agentry_sse_connections",
                "Server-sent event responses open now.",
                &Gauge::default(),
            ),
            turns_started: register(
                &mut r,
                "agentry_turns_started_total",
                "Turns started, by agent.",
                &Family::default(),
            ),
            turns_ended: register(
                &mut r,
                "agentry_turns_ended_total",
                "Turns ended, by agent and outcome (the stop reason, or cancelled, \
                 interrupted, failed).",
                &Family::default(),
            ),
            queue_depth: register(
                &mut r,
                "agentry_turn_queue_depth",
                "Turns waiting in this process for a slot to run in.",
                &Gauge::default(),
            ),
            queue_wait: register(
                &mut r,
                "agentry_turn_queue_wait_seconds",
                "Time from a turn's admission to the start of its run.",
                &slow(),
            ),
            turn_duration: register(
                &mut r,
                "agentry_turn_duration_seconds",
                "Time a turn runs, from its start to its durable end.",
                &histograms(slow),
            ),
            first_event: register(
                &mut r,
                "agentry_turn_time_to_first_event_seconds",
                "Time from a turn's start to the model's first output (text, thinking or a \
                 tool call).",
                &histograms(slow),
            ),
            events_appended: register(
                &mut r,
                "agentry_events_appended_total",
                "Events the event writer committed to the log.",
                &Counter::default(),
            ),
            batch_events: register(
                &mut r,
                "agentry_writer_batch_events",
                "Events per transaction of the event writer.",
                &batch(),
            ),
            commit_duration: register(
                &mut r,
                "agentry_writer_commit_duration_seconds",
                "Time the event writer's transactions take to commit.",
                &fast(),
            ),
            live_subscribers: register(
                &mut r,
                "agentry_live_subscribers",
                "Followers of sessions' live events now.",
                &Gauge::default(),
            ),
            db_pool: register(
                &mut r,
                "agentry_db_pool_connections",
                "Database pool connections, by pool and state (in_use, idle).",
                &Family::default(),
            ),
            db_writes: register(
                &mut r,
                "agentry_db_writes_total",
                "SQLite: admissions and event batches sent to the writer connection.",
                &Counter::default(),
            ),
            db_write_statements: register(
                &mut r,
                "agentry_db_write_statements_total",
                "SQLite: the statements that committed them (those queued together share one).",
                &Counter::default(),
            ),
            provider_calls: register(
                &mut r,
                "agentry_provider_calls_total",
                "Model calls, by provider and model.",
                &Family::default(),
            ),
            provider_errors: register(
                &mut r,
                "agentry_provider_errors_total",
                "Model calls that failed, by provider and model.",
                &Family::default(),
            ),
            provider_duration: register(
                &mut r,
                "agentry_provider_call_duration_seconds",
                "Time a model call takes, to the end of its stream.",
                &histograms(slow),
            ),
            provider_tokens: register(
                &mut r,
                "agentry_provider_tokens_total",
                "Tokens providers reported, by provider, model and direction (in, out).",
                &Family::default(),
            ),
            mcp_up: register(
                &mut r,
                "agentry_mcp_server_up",
                "Whether a configured MCP server is connected (1) or not (0).",
                &Family::default(),
            ),
            mcp_servers: Mutex::new(Vec::new()),
            webhook_deliveries: register(
                &mut r,
                "agentry_webhook_deliveries_total",
                "Webhook delivery attempts, by outcome (delivered, failed: retried later, \
                 disabled: given up and the endpoint disabled).",
                &Family::default(),
            ),
            registry: {
                r.register_collector(Box::new(DroppedSpans));
                r
            },
        };
        Arc::new(metrics)
    }

    /// The labels of a series: `names` paired with `values`, then the tenant's when the
    /// label is on.
    fn labels(
        &self,
        names: &[&'static str],
        values: &[&str],
        tenant: Option<&dyn Display>,
    ) -> Labels {
        debug_assert_eq!(names.len(), values.len());
        let mut labels: Labels = names
            .iter()
            .zip(values)
            .map(|(name, value)| (*name, (*value).to_owned()))
            .collect();
        if self.tenant_label {
            let tenant = tenant.map(ToString::to_string).unwrap_or_default();
            labels.push((TENANT, tenant));
        }
        labels
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
        let labels = self.labels(
            &["route", "method", "status"],
            &[route, method, &status],
            tenant,
        );
        self.http_requests.get_or_create(&labels).inc();
        let labels = self.labels(&["route", "method"], &[route, method], tenant);
        observe(
            &self.http_duration.get_or_create(&labels),
            elapsed.as_secs_f64(),
        );
    }

    /// Counts an open event stream until the guard is dropped.
    pub fn sse_connection(&self) -> GaugeGuard {
        GaugeGuard::new(&self.sse_connections)
    }

    pub fn turn_started(&self, agent: &str, tenant: &dyn Display) {
        let labels = self.labels(&["agent"], &[agent], Some(tenant));
        self.turns_started.get_or_create(&labels).inc();
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
        let labels = self.labels(&["agent", "outcome"], &[agent, outcome], Some(tenant));
        self.turns_ended.get_or_create(&labels).inc();
        if let Some(ran) = ran {
            let labels = self.labels(&["agent"], &[agent], Some(tenant));
            observe(
                &self.turn_duration.get_or_create(&labels),
                ran.as_secs_f64(),
            );
        }
    }

    pub fn turn_first_event(&self, agent: &str, tenant: &dyn Display, elapsed: Duration) {
        let labels = self.labels(&["agent"], &[agent], Some(tenant));
        observe(
            &self.first_event.get_or_create(&labels),
            elapsed.as_secs_f64(),
        );
    }

    pub fn turn_queue_wait(&self, waited: Duration) {
        observe(&self.queue_wait, waited.as_secs_f64());
    }

    pub fn set_turn_queue_depth(&self, depth: usize) {
        self.queue_depth
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// A committed transaction of the event writer.
    pub fn writer_committed(&self, events: usize, elapsed: Duration) {
        self.events_appended.inc_by(events as u64);
        observe(&self.batch_events, events as f64);
        observe(&self.commit_duration, elapsed.as_secs_f64());
    }

    /// Counts a live subscriber until the guard is dropped.
    pub fn live_subscriber(&self) -> GaugeGuard {
        GaugeGuard::new(&self.live_subscribers)
    }

    /// A database pool's connections now.
    pub fn set_db_pool(&self, pool: &str, in_use: u32, idle: u32) {
        for (state, count) in [("in_use", in_use), ("idle", idle)] {
            let labels = vec![("pool", pool.to_owned()), ("state", state.to_owned())];
            self.db_pool.get_or_create(&labels).set(i64::from(count));
        }
    }

    /// The SQLite writer's writes and their statements (totals, read at scrape
    /// time).
    pub fn set_db_writes(&self, writes: u64, statements: u64) {
        use std::sync::atomic::Ordering;
        self.db_writes.inner().store(writes, Ordering::Relaxed);
        self.db_write_statements
            .inner()
            .store(statements, Ordering::Relaxed);
    }

    /// A model call that ended (its stream done, failed or abandoned).
    pub fn provider_call(&self, call: ProviderCall<'_>, tenant: &dyn Display) {
        let key = [call.provider, call.model];
        let labels = self.labels(&["provider", "model"], &key, Some(tenant));
        self.provider_calls.get_or_create(&labels).inc();
        if call.failed {
            self.provider_errors.get_or_create(&labels).inc();
        }
        observe(
            &self.provider_duration.get_or_create(&labels),
            call.elapsed.as_secs_f64(),
        );
        for (direction, tokens) in [("in", call.input_tokens), ("out", call.output_tokens)] {
            let labels = self.labels(
                &["provider", "model", "direction"],
                &[call.provider, call.model, direction],
                Some(tenant),
            );
            self.provider_tokens.get_or_create(&labels).inc_by(tokens);
        }
    }

    /// The configured MCP servers and whether each is connected now.
    pub fn set_mcp_servers<'a>(&self, servers: impl IntoIterator<Item = (&'a str, bool)>) {
        let servers: Vec<(&str, bool)> = servers.into_iter().collect();
        let mut known = self.mcp_servers.lock().expect("mcp servers lock");
        known.retain(|name| {
            let kept = servers.iter().any(|(configured, _)| configured == name);
            if !kept {
                self.mcp_up.remove(&vec![("server", name.clone())]);
            }
            kept
        });
        for (name, up) in servers {
            self.mcp_up
                .get_or_create(&vec![("server", name.to_owned())])
                .set(i64::from(up));
            if !known.iter().any(|known| known == name) {
                known.push(name.to_owned());
            }
        }
    }

    /// One webhook delivery attempt's outcome: `delivered`, `failed` (retried later) or
    /// `disabled` (given up: the endpoint is disabled).
    pub fn webhook_delivery(&self, outcome: &str) {
        self.webhook_deliveries
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc();
    }

    /// Every family, in the text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_text::encode(&mut out, &self.registry)
            .expect("writing to a string does not fail");
        out
    }
}

/// One unit of a gauge, given back when dropped.
#[derive(Debug)]
pub struct GaugeGuard(Gauge);

impl GaugeGuard {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Trace spans dropped, counted by the process's span exporter and read at scrape time.
#[derive(Debug)]
struct DroppedSpans;

impl Collector for DroppedSpans {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (queue_full, export_failed) = crate::traces::dropped_spans();
        let mut family = encoder.encode_descriptor(
            "agentry_trace_spans_dropped",
            "Trace spans dropped: the export queue was full, or their export failed.",
            None,
            MetricType::Counter,
        )?;
        for (reason, count) in [("queue_full", queue_full), ("export_failed", export_failed)] {
            let labels = [("reason", reason)];
            ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
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
