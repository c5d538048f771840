//! OpenTelemetry traces: the OTLP/HTTP exporter behind `[telemetry]`, and the names of the
//! spans and attributes agentry exports.
//!
//! Spans of their own (model steps, tool executions, compactions, webhook deliveries) are
//! `tracing` spans of the target [`TARGET`]: the log layers never see them, and with
//! telemetry off no layer wants them, so they cost a cached callsite check. The request
//! span and the turn span are the log spans of the same names, exported as they are.
//!
//! A dead or slow collector never slows a turn nor grows the process: finished spans wait
//! in a bounded queue exported by a thread of its own; spans beyond it are dropped and
//! counted, as are the spans of an export that failed.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter,
    SpanProcessor,
};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::registry::LookupSpan;

use crate::config::{TelemetrySettings, TraceparentTrust};

/// The `tracing` target of spans that exist for traces alone.
pub const TARGET: &str = "agentry_trace";

/// Spans dropped because the queue was full.
static DROPPED_QUEUE_FULL: AtomicU64 = AtomicU64::new(0);
/// Spans of exports that failed (collector down, refused, timed out).
static DROPPED_EXPORT_FAILED: AtomicU64 = AtomicU64::new(0);
/// Whether model steps record their prompt and completion (`telemetry.record_content`).
static RECORD_CONTENT: AtomicBool = AtomicBool::new(false);
/// Whether spans are exported at all.
static ENABLED: AtomicBool = AtomicBool::new(false);
/// Whose `traceparent` is taken: 0 authenticated callers, 1 all, 2 none.
static TRUST: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
/// The provider, flushed at shutdown.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Spans dropped so far: `(queue full, export failed)`.
pub fn dropped_spans() -> (u64, u64) {
    (
        DROPPED_QUEUE_FULL.load(Ordering::Relaxed),
        DROPPED_EXPORT_FAILED.load(Ordering::Relaxed),
    )
}

/// Whether traces are exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether a request's `traceparent` is taken (`telemetry.accept_traceparent`), given
/// whether it carries credentials.
pub fn trusts_traceparent(with_credentials: bool) -> bool {
    match TRUST.load(Ordering::Relaxed) {
        0 => with_credentials,
        1 => true,
        _ => false,
    }
}

/// Whether model steps carry their prompt and completion.
pub fn record_content() -> bool {
    RECORD_CONTENT.load(Ordering::Relaxed)
}

/// The layer exporting spans, if `[telemetry]` enables it. Needs a Tokio runtime: exports
/// are sent on it.
pub fn layer<S>(
    settings: &TelemetrySettings,
) -> anyhow::Result<Option<Box<dyn Layer<S> + Send + Sync>>>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    if !settings.enabled {
        return Ok(None);
    }
    let runtime = tokio::runtime::Handle::try_current()
        .context("telemetry needs a Tokio runtime to export from")?;
    let client = ExportClient {
        http: reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(settings.export_timeout_ms))
            .build()
            .context("cannot build the OTLP HTTP client")?,
        runtime,
        timeout: Duration::from_millis(settings.export_timeout_ms),
    };
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_http_client(client)
        .with_timeout(Duration::from_millis(settings.export_timeout_ms));
    if !settings.endpoint.is_empty() {
        exporter = exporter.with_endpoint(settings.endpoint.clone());
    }
    let exporter = exporter.build().context(
        "cannot build the OTLP span exporter (telemetry.endpoint, OTEL_EXPORTER_OTLP_*)",
    )?;
    let pending = Arc::new(AtomicUsize::new(0));
    let batch = BatchSpanProcessor::builder(CountingExporter {
        inner: exporter,
        pending: pending.clone(),
    })
    .with_batch_config(
        BatchConfigBuilder::default()
            .with_max_queue_size(settings.queue_size)
            .with_max_export_batch_size(settings.batch_size)
            .with_scheduled_delay(Duration::from_millis(settings.export_interval_ms))
            .build(),
    )
    .build();
    let processor = BoundedProcessor {
        inner: batch,
        pending,
        capacity: settings.queue_size,
    };
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource(settings))
        .build();
    let tracer = provider.tracer("agentry");
    let _ = PROVIDER.set(provider);
    RECORD_CONTENT.store(settings.record_content, Ordering::Relaxed);
    TRUST.store(
        match settings.accept_traceparent {
            TraceparentTrust::Authenticated => 0,
            TraceparentTrust::All => 1,
            TraceparentTrust::None => 2,
        },
        Ordering::Relaxed,
    );
    ENABLED.store(true, Ordering::Relaxed);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_threads(false)
        .with_location(false)
        .with_target(false)
        .with_level(false)
        .with_tracked_inactivity(false)
        .with_filter(FilterFn::new(exported));
    Ok(Some(Box::new(layer)))
}

/// Sets a string attribute on `span`'s exported span (nothing when it is not exported).
pub fn set_string(span: &tracing::Span, key: &'static str, value: String) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if !span.is_disabled() {
        span.set_attribute(key, value);
    }
}

/// Sets a string-array attribute on `span`'s exported span.
pub fn set_string_array(span: &tracing::Span, key: &'static str, values: Vec<String>) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if !span.is_disabled() {
        let values = values.into_iter().map(Into::into).collect();
        span.set_attribute(
            key,
            opentelemetry::Value::Array(opentelemetry::Array::String(values)),
        );
    }
}

/// The W3C `traceparent` of the current span, when it is exported.
pub fn current_traceparent() -> Option<String> {
    if !enabled() {
        return None;
    }
    traceparent_of(&tracing::Span::current())
}

/// The W3C `traceparent` of `span`, when it is exported.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    let span = context.span();
    let found = span.span_context();
    found.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            found.trace_id(),
            found.span_id(),
            found.trace_flags().to_u8()
        )
    })
}

/// `request` with a `traceparent` header, when there is one to send.
pub fn propagate(
    request: reqwest::RequestBuilder,
    traceparent: Option<&str>,
) -> reqwest::RequestBuilder {
    match traceparent {
        Some(traceparent) => request.header("traceparent", traceparent),
        None => request,
    }
}

/// The trace id of a `traceparent`, if it is one.
pub fn trace_id_of(traceparent: &str) -> Option<String> {
    parse_traceparent(traceparent).map(|c| c.trace_id().to_string())
}

/// A W3C `traceparent` (version 00, or a later one read as 00): its span context.
pub fn parse_traceparent(value: &str) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let context = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()? & 1),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

/// Makes the span of `traceparent` the parent of `span` (before `span` is entered).
pub fn set_parent(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if let Some(parent) = parse_traceparent(traceparent) {
        let _ = span.set_parent(Context::new().with_remote_span_context(parent));
    }
}

/// Exports what is waiting and stops the exporter (at process exit).
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.force_flush();
        let _ = provider.shutdown_with_timeout(Duration::from_secs(5));
    }
}

/// The spans exported: those of [`TARGET`], the request spans and the turn spans. Log
/// records are not (they stay in the logs).
fn exported(metadata: &Metadata<'_>) -> bool {
    if metadata.is_event() {
        // Events recorded on exported spans (the writer's commits of a turn).
        return metadata.target() == TARGET;
    }
    metadata.is_span()
        && (metadata.target() == TARGET
            || (metadata.name() == "request" && metadata.target() == "agentry::http")
            || (metadata.name() == "turn" && metadata.target() == "agentry::engine::turn_task"))
}

/// `service.name` from the settings, `OTEL_SERVICE_NAME` or `agentry`; the attributes of
/// `OTEL_RESOURCE_ATTRIBUTES` beside it.
fn resource(settings: &TelemetrySettings) -> Resource {
    let builder = Resource::builder();
    let named_by_environment = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|n| !n.is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|attributes| {
            attributes
                .split(',')
                .any(|a| a.trim().starts_with("service.name="))
        });
    let name = if !settings.service_name.is_empty() {
        Some(settings.service_name.clone())
    } else if named_by_environment {
        None
    } else {
        Some("agentry".to_owned())
    };
    let builder = match name {
        Some(name) => builder.with_service_name(name),
        None => builder,
    };
    builder
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Sends export requests with reqwest on the application's runtime (the batch processor
/// exports from a thread of its own, outside any runtime).
#[derive(Debug)]
struct ExportClient {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

#[async_trait::async_trait]
impl HttpClient for ExportClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let http = self.http.clone();
        let timeout = self.timeout;
        let sent = self.runtime.spawn(async move {
            let request = reqwest::Request::try_from(request)?;
            let response = tokio::time::timeout(timeout, async {
                let response = http.execute(request).await?;
                let status = response.status();
                let headers = response.headers().clone();
                let body = response.bytes().await?;
                Ok::<_, reqwest::Error>((status, headers, body))
            })
            .await
            .map_err(|_| "the export timed out")??;
            let (status, headers, body) = response;
            let mut reply = Response::builder().status(status).body(body)?;
            *reply.headers_mut() = headers;
            Ok::<_, HttpError>(reply)
        });
        sent.await.map_err(|e| Box::new(e) as HttpError)?
    }
}

/// Lets at most `capacity` spans wait for export (queued or in an export under way);
/// counts the rest as dropped instead of handing them on.
#[derive(Debug)]
struct BoundedProcessor {
    inner: BatchSpanProcessor,
    pending: Arc<AtomicUsize>,
    capacity: usize,
}

impl SpanProcessor for BoundedProcessor {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.pending.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            DROPPED_QUEUE_FULL.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Counts the spans of each export out of the pending ones, and those of a failed export
/// as dropped.
#[derive(Debug)]
struct CountingExporter<E> {
    inner: E,
    pending: Arc<AtomicUsize>,
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        self.pending.fetch_sub(spans, Ordering::AcqRel);
        if result.is_err() {
            DROPPED_EXPORT_FAILED.fetch_add(spans as u64, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
