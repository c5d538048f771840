//! The Prometheus text exposition format, version 0.0.4: `# HELP` and `# TYPE` lines, then
//! one line per sample, `name{label="value",…} value`.

use std::borrow::Cow;
use std::fmt::Write;

use super::primitives::HistogramSnapshot;

/// The content type of a scrape's answer.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value with `\`, `"` and line feeds escaped.
pub fn escape_label_value(value: &str) -> Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Help text with `\` and line feeds escaped.
fn escape_help(help: &str) -> Cow<'_, str> {
    if !help.contains(['\\', '\n']) {
        return Cow::Borrowed(help);
    }
    Cow::Owned(help.replace('\\', "\\\\").replace('\n', "\\n"))
}

/// A sample value: integers without a fraction, `+Inf`, `-Inf` and `NaN` spelled out.
pub fn format_float(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value == f64::INFINITY {
        "+Inf".to_owned()
    } else if value == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        value.to_string()
    }
}

/// The text of one scrape, built family by family.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn into_string(self) -> String {
        self.out
    }

    /// Opens a family: its help and type.
    pub fn family(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample line: `labels` in order, then `extra` (a histogram's `le`).
    pub fn sample(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        extra: Option<(&str, &str)>,
        value: &str,
    ) {
        self.out.push_str(name);
        let mut all = labels.iter().copied().chain(extra).peekable();
        if all.peek().is_some() {
            self.out.push('{');
            for (i, (label, value)) in all.enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"{}\"", escape_label_value(value));
            }
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(value);
        self.out.push('\n');
    }

    /// A histogram's samples: cumulative `_bucket` lines up to `+Inf`, `_sum` and `_count`.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], snapshot: &HistogramSnapshot) {
        let bucket = format!("{name}_bucket");
        for (bound, count) in snapshot.bounds.iter().zip(&snapshot.cumulative) {
            let le = format_float(*bound);
            self.sample(&bucket, labels, Some(("le", &le)), &count.to_string());
        }
        let count = snapshot.count().to_string();
        self.sample(&bucket, labels, Some(("le", "+Inf")), &count);
        self.sample(
            &format!("{name}_sum"),
            labels,
            None,
            &format_float(snapshot.sum),
        );
        self.sample(&format!("{name}_count"), labels, None, &count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::primitives::Histogram;

    #[test]
    fn label_values_escape_backslashes_quotes_and_line_feeds() {
        assert_eq!(escape_label_value("plain/{id}"), "plain/{id}");
        assert_eq!(
            escape_label_value("a\\b\"c\nd"),
            "a\\\\b\\\"c\\nd",
            "each escaped once"
        );
        let mut text = Exposition::new();
        text.family("x_total", "Help with a \\ and a\nline feed.", "counter");
        text.sample("x_total", &[("a", "q\"uote"), ("b", "")], None, "3");
        text.sample("x_total", &[], None, "4");
        assert_eq!(
            text.into_string(),
            "# HELP x_total Help with a \\\\ and a\\nline feed.\n\
             # TYPE x_total counter\n\
             x_total{a=\"q\\\"uote\",b=\"\"} 3\n\
             x_total 4\n"
        );
    }

    #[test]
    fn a_histogram_renders_cumulative_buckets_ending_at_inf_then_sum_and_count() {
        static BOUNDS: [f64; 3] = [0.005, 0.5, 1.0];
        let histogram = Histogram::new(&BOUNDS);
        histogram.observe(0.001);
        histogram.observe(0.25);
        histogram.observe(0.25);
        histogram.observe(4.0);
        let mut text = Exposition::new();
        text.family("d_seconds", "Durations.", "histogram");
        text.histogram("d_seconds", &[("route", "/r")], &histogram.snapshot());
        assert_eq!(
            text.into_string(),
            "# HELP d_seconds Durations.\n\
             # TYPE d_seconds histogram\n\
             d_seconds_bucket{route=\"/r\",le=\"0.005\"} 1\n\
             d_seconds_bucket{route=\"/r\",le=\"0.5\"} 3\n\
             d_seconds_bucket{route=\"/r\",le=\"1\"} 3\n\
             d_seconds_bucket{route=\"/r\",le=\"+Inf\"} 4\n\
             d_seconds_sum{route=\"/r\"} 4.501\n\
             d_seconds_count{route=\"/r\"} 4\n"
        );
    }

    #[test]
    fn special_floats_are_spelled_as_prometheus_reads_them() {
        assert_eq!(format_float(f64::INFINITY), "+Inf");
        assert_eq!(format_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_float(f64::NAN), "NaN");
        assert_eq!(format_float(2.5), "2.5");
        assert_eq!(format_float(10.0), "10");
    }
}
