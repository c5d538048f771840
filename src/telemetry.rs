//! Logging: text for terminals, JSON for containers; `RUST_LOG` overrides `log.level`.

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry};

use crate::config::{LogFormat, LogSettings};

/// Installs the global subscriber writing to `writer`. Request spans are reported when they
/// close, with their duration.
pub fn init<W>(settings: &LogSettings, writer: W)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&settings.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let registry = Registry::default().with(filter);
    let result = match settings.format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_span_events(FmtSpan::CLOSE)
                    .with_writer(writer),
            )
            .try_init(),
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_span_events(FmtSpan::CLOSE)
                    .with_writer(writer),
            )
            .try_init(),
    };
    // A second initialization (tests building several apps) keeps the first subscriber.
    let _ = result;
}
