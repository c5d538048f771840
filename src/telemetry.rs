//! Logging: text for terminals, JSON for containers; `RUST_LOG` overrides `log.level`.
//! Text records are written one per line whatever the logged values hold: control
//! characters in a record (a newline or an ANSI escape in a client-supplied name) are
//! escaped, and nothing is coloured. A JSON record carries the fields of every span it is
//! logged in (`spans`): a request's id, tenant, session and turn, a turn task's ids.

use std::io::{self, Write};

use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry};

use crate::config::{LogFormat, LogSettings, TelemetrySettings};
use crate::model::{SessionId, TurnId};

/// Installs the global subscriber writing to `writer`. Request spans are reported when they
/// close, with their duration.
pub fn init<W>(settings: &LogSettings, writer: W)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let _ = init_with_traces(settings, None, writer);
}

/// [`init`], and the export of traces `[telemetry]` enables (see [`crate::traces`]).
pub fn init_with_traces<W>(
    settings: &LogSettings,
    telemetry: Option<&TelemetrySettings>,
    writer: W,
) -> anyhow::Result<()>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    // refinery narrates each run at info (with its own `\n`s); agentry logs what it applied.
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(format!("{},refinery_core=warn", settings.level)))
        .unwrap_or_else(|_| EnvFilter::new("info,refinery_core=warn"))
        // The spans of traces alone are never logged.
        .add_directive(
            format!("{}=off", crate::traces::TARGET)
                .parse()
                .expect("a valid directive"),
        );
    let logs: Box<dyn Layer<Registry> + Send + Sync> = match settings.format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_span_events(FmtSpan::CLOSE)
            .with_writer(writer)
            .with_filter(filter)
            .boxed(),
        LogFormat::Text => text_layer(writer).with_filter(filter).boxed(),
    };
    let traces = match telemetry {
        Some(telemetry) => crate::traces::layer::<Registry>(telemetry)?,
        None => None,
    };
    // A second initialization (tests building several apps) keeps the first subscriber.
    let mut layers = vec![logs];
    layers.extend(traces);
    let _ = Registry::default().with(layers).try_init();
    Ok(())
}

/// Names the session the current request (its span declares `session_id`) is about.
pub fn record_session(session: &SessionId) {
    record_once("session_id", session);
}

/// Names the turn the current request (its span declares `turn_id`) is about.
pub fn record_turn(turn: &TurnId) {
    record_once("turn_id", turn);
}

/// The fields already recorded on a span through `record_once`.
struct Recorded(Vec<&'static str>);

/// Records `field` on the current span the first time it is named: the face and the engine
/// both name a request's session, and text logs would print every recording.
fn record_once(field: &'static str, value: &dyn std::fmt::Display) {
    let span = tracing::Span::current();
    let first = span
        .with_subscriber(|(id, dispatch)| {
            let registry = dispatch.downcast_ref::<Registry>()?;
            let data = registry.span(id)?;
            let mut extensions = data.extensions_mut();
            Some(match extensions.get_mut::<Recorded>() {
                Some(recorded) if recorded.0.contains(&field) => false,
                Some(recorded) => {
                    recorded.0.push(field);
                    true
                }
                None => {
                    extensions.insert(Recorded(vec![field]));
                    true
                }
            })
        })
        .flatten()
        .unwrap_or(true);
    if first {
        span.record(field, tracing::field::display(value));
    }
}

fn text_layer<S, W>(writer: W) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(Escaping(writer))
}

/// Hands out writers that escape control characters.
struct Escaping<M>(M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Escaping<M> {
    type Writer = EscapingWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        EscapingWriter(self.0.make_writer())
    }
}

/// The formatter writes each record with one `write_all`: every control character but
/// the record's final newline is written as an escape (`\n`, `\0`, `\x1b`, `\u{9b}`).
struct EscapingWriter<W>(W);

impl<W: Write> Write for EscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (record, end): (&[u8], &[u8]) = match buf.strip_suffix(b"\n") {
            Some(record) => (record, b"\n"),
            None => (buf, b""),
        };
        let text = String::from_utf8_lossy(record);
        if !text.chars().any(char::is_control) {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut escaped = String::with_capacity(text.len() + 16);
        for c in text.chars() {
            match c {
                '\n' => escaped.push_str("\\n"),
                '\r' => escaped.push_str("\\r"),
                '\t' => escaped.push_str("\\t"),
                '\0' => escaped.push_str("\\0"),
                c if u32::from(c) < 0x80 && c.is_control() => {
                    escaped.push_str(&format!("\\x{:02x}", u32::from(c)));
                }
                c if c.is_control() => escaped.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
                c => escaped.push(c),
            }
        }
        self.0.write_all(escaped.as_bytes())?;
        self.0.write_all(end)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn text_records_stay_on_one_line_with_control_characters_escaped() {
        let capture = Capture::default();
        let writer = capture.clone();
        let subscriber = Registry::default().with(text_layer(move || writer.clone()));
        let forged = "x\n2026-01-01T00:00:00Z  INFO agentry: admin logged in\u{1b}[31m\0\u{9b}";
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(agent = %forged, "unknown agent {forged}");
            tracing::info!("second record");
        });
        let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = logs.lines().collect();
        assert_eq!(lines.len(), 2, "{logs}");
        assert!(
            !logs.chars().any(|c| c.is_control() && c != '\n'),
            "{logs:?}"
        );
        assert!(lines.iter().all(|l| !l.starts_with("2026-01-01")), "{logs}");
        assert!(
            lines[0].contains(
                "x\\n2026-01-01T00:00:00Z  INFO agentry: admin logged in\\x1b[31m\\0\\u{9b}"
            ),
            "{logs}"
        );
        assert!(lines[1].ends_with("second record"), "{logs}");
    }
}
