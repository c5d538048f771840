//! `[telemetry]`: OpenTelemetry traces exported over OTLP/HTTP (protobuf).

use serde::Deserialize;

use super::ConfigError;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySettings {
    /// Whether spans are exported at all; off: no exporter, no span of its own.
    pub enabled: bool,
    /// The OTLP/HTTP traces URL (`…/v1/traces`); empty: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
    /// then `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, then `http://localhost:4318/v1/traces`.
    pub endpoint: String,
    /// `service.name`; empty: `OTEL_SERVICE_NAME`, then `agentry`.
    pub service_name: String,
    /// Finished spans waiting for export at most; more are dropped and counted.
    pub queue_size: usize,
    /// Spans in one export request at most.
    pub batch_size: usize,
    /// How often the queue is exported, in milliseconds.
    pub export_interval_ms: u64,
    /// How long one export may take before it is abandoned, in milliseconds.
    pub export_timeout_ms: u64,
    /// Whether model steps carry the prompt and the completion as attributes.
    pub record_content: bool,
    /// Whose `traceparent` header a request's span continues.
    pub accept_traceparent: TraceparentTrust,
}

/// Whose incoming W3C `traceparent` becomes the parent of its request's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceparentTrust {
    /// Requests that carry credentials (an `Authorization` header).
    Authenticated,
    /// Every request.
    All,
    /// None: every request starts a trace of its own.
    None,
}

impl TelemetrySettings {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let url = &self.endpoint;
        if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::new(
                "telemetry.endpoint",
                "must be an http:// or https:// URL (or empty)",
            ));
        }
        for (key, value) in [
            ("telemetry.queue_size", self.queue_size as u64),
            ("telemetry.batch_size", self.batch_size as u64),
            ("telemetry.export_interval_ms", self.export_interval_ms),
            ("telemetry.export_timeout_ms", self.export_timeout_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::new(key, "must be at least 1"));
            }
        }
        if self.batch_size > self.queue_size {
            return Err(ConfigError::new(
                "telemetry.batch_size",
                "must not exceed telemetry.queue_size",
            ));
        }
        Ok(())
    }
}
