//! A family: one metric name, its help and label names, and a value per set of label
//! values, made the first time that set is seen.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::exposition::Exposition;
use super::primitives::{Counter, Gauge, Histogram};

/// What a family holds: how it is typed and written in the exposition.
pub trait Kind: Send + Sync {
    const TYPE: &'static str;

    fn write(&self, out: &mut Exposition, name: &str, labels: &[(&str, &str)]);
}

impl Kind for Counter {
    const TYPE: &'static str = "counter";

    fn write(&self, out: &mut Exposition, name: &str, labels: &[(&str, &str)]) {
        out.sample(name, labels, None, &self.get().to_string());
    }
}

impl Kind for Gauge {
    const TYPE: &'static str = "gauge";

    fn write(&self, out: &mut Exposition, name: &str, labels: &[(&str, &str)]) {
        out.sample(name, labels, None, &self.get().to_string());
    }
}

impl Kind for Histogram {
    const TYPE: &'static str = "histogram";

    fn write(&self, out: &mut Exposition, name: &str, labels: &[(&str, &str)]) {
        out.histogram(name, labels, &self.snapshot());
    }
}

/// A family is written whole into a scrape.
pub trait Render: Send + Sync {
    fn render(&self, out: &mut Exposition);
}

pub struct Family<M> {
    name: &'static str,
    help: &'static str,
    labels: Vec<&'static str>,
    /// Ordered, so a scrape lists a family's series in the same order each time.
    children: Mutex<BTreeMap<Vec<String>, Arc<M>>>,
    make: Box<dyn Fn() -> M + Send + Sync>,
}

impl<M> std::fmt::Debug for Family<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Family")
            .field("name", &self.name)
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl<M: Kind> Family<M> {
    pub fn new(
        name: &'static str,
        help: &'static str,
        labels: Vec<&'static str>,
        make: impl Fn() -> M + Send + Sync + 'static,
    ) -> Self {
        Self {
            name,
            help,
            labels,
            children: Mutex::new(BTreeMap::new()),
            make: Box::new(make),
        }
    }

    /// The value of these label values (as many as the family has labels, in order).
    pub fn with(&self, values: &[&str]) -> Arc<M> {
        debug_assert_eq!(values.len(), self.labels.len(), "{}", self.name);
        let key: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
        let mut children = self.children.lock().expect("metric family lock");
        children
            .entry(key)
            .or_insert_with(|| Arc::new((self.make)()))
            .clone()
    }

    /// Forgets every series not in `keep` (values read at scrape time from a set that
    /// changes, such as configured servers).
    pub fn retain(&self, keep: impl Fn(&[String]) -> bool) {
        self.children
            .lock()
            .expect("metric family lock")
            .retain(|key, _| keep(key));
    }
}

impl<M: Kind> Render for Family<M> {
    fn render(&self, out: &mut Exposition) {
        out.family(self.name, self.help, M::TYPE);
        let children: Vec<(Vec<String>, Arc<M>)> = self
            .children
            .lock()
            .expect("metric family lock")
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        for (values, value) in children {
            let labels: Vec<(&str, &str)> = self
                .labels
                .iter()
                .copied()
                .zip(values.iter().map(String::as_str))
                .collect();
            value.write(out, self.name, &labels);
        }
    }
}

/// Bucket bounds (seconds) of request and commit latencies.
pub static FAST_SECONDS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Bucket bounds (seconds) of turns and model calls.
pub static SLOW_SECONDS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];
/// Bucket bounds (events) of the writer's batches.
pub static BATCH_EVENTS: [f64; 12] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0,
];
