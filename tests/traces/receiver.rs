//! An OTLP/HTTP traces receiver: decodes `POST /v1/traces` bodies (protobuf) and keeps
//! every span, for the whole test process.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;

/// One received span, its attributes as strings (arrays joined with `,`).
#[derive(Debug, Clone)]
pub struct Received {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub name: String,
    pub attributes: BTreeMap<String, String>,
    #[allow(dead_code)]
    pub links: Vec<(String, String)>,
    /// The span's events: each one's name and attributes.
    pub events: Vec<(String, BTreeMap<String, String>)>,
    pub service: String,
}

impl Received {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[derive(Default)]
pub struct Receiver {
    spans: Mutex<Vec<Received>>,
    arrived: tokio::sync::Notify,
    pub url: OnceLock<String>,
}

impl Receiver {
    pub fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits (30 s at most) until `done` holds for the spans received.
    pub async fn wait_for<T>(&self, what: &str, done: impl Fn(&[Received]) -> Option<T>) -> T {
        let wait = async {
            loop {
                let arrived = self.arrived.notified();
                if let Some(found) = done(&self.spans.lock().unwrap()) {
                    return found;
                }
                arrived.await;
            }
        };
        match tokio::time::timeout(Duration::from_secs(30), wait).await {
            Ok(found) => found,
            Err(_) => panic!("{what} never arrived; received: {:#?}", self.spans()),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::ArrayValue(a)) => a
            .values
            .iter()
            .map(|v| text(&Some(v.clone())))
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

async fn handle(
    receiver: Arc<Receiver>,
    request: Request<Incoming>,
) -> Result<Response<http_body_util::Full<bytes::Bytes>>, hyper::Error> {
    assert_eq!(request.uri().path(), "/v1/traces");
    assert_eq!(
        request.headers()["content-type"],
        "application/x-protobuf",
        "OTLP/HTTP protobuf"
    );
    let body = request.into_body().collect().await?.to_bytes();
    let export = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
    let mut received = Vec::new();
    for resource in export.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "service.name")
            .map(|a| text(&a.value))
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                received.push(Received {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name.clone(),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|a| (a.key.clone(), text(&a.value)))
                        .collect(),
                    links: span
                        .links
                        .iter()
                        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                        .collect(),
                    events: span
                        .events
                        .iter()
                        .map(|e| {
                            let attributes = e
                                .attributes
                                .iter()
                                .map(|a| (a.key.clone(), text(&a.value)))
                                .collect();
                            (e.name.clone(), attributes)
                        })
                        .collect(),
                    service: service.clone(),
                });
            }
        }
    }
    receiver.spans.lock().unwrap().extend(received);
    receiver.arrived.notify_waiters();
    Ok(Response::new(
        http_body_util::Full::new(bytes::Bytes::new()),
    ))
}

/// The runtime the receiver and the exporter's requests run on: it outlives the tests'.
static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
static RECEIVER: OnceLock<Arc<Receiver>> = OnceLock::new();

/// The process's receiver, started (and the exporter installed, sending to it) at first use.
pub fn receiver() -> Arc<Receiver> {
    RECEIVER
        .get_or_init(|| {
            let runtime = RUNTIME.get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap()
            });
            let receiver = Arc::new(Receiver::default());
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
            receiver.url.set(url.clone()).unwrap();
            let serving = receiver.clone();
            runtime.spawn(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let (stream, _) = listener.accept().await.unwrap();
                    let receiver = serving.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            handle(receiver.clone(), request)
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
            let _entered = runtime.enter();
            let telemetry = agentry::config::TelemetrySettings {
                enabled: true,
                endpoint: url,
                service_name: "agentry-test".to_owned(),
                queue_size: 4096,
                batch_size: 512,
                export_interval_ms: 50,
                export_timeout_ms: 5000,
                record_content: false,
                accept_traceparent: agentry::config::TraceparentTrust::Authenticated,
            };
            let log = agentry::config::LogSettings {
                format: agentry::config::LogFormat::Json,
                level: "info".to_owned(),
            };
            agentry::telemetry::init_with_traces(&log, Some(&telemetry), std::io::sink)
                .expect("the exporter installs");
            receiver
        })
        .clone()
}
