//! The three kinds of value a family holds: counters, gauges and histograms with fixed
//! buckets, each updated with atomics and read at scrape time.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A value that only goes up.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    pub fn set(&self, value: i64) {
        self.0.store(value, Ordering::Relaxed);
    }

    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one more until the guard is dropped.
    pub fn track(self: &Arc<Self>) -> GaugeGuard {
        self.inc();
        GaugeGuard(self.clone())
    }
}

/// One unit of a gauge, given back when dropped.
#[derive(Debug)]
pub struct GaugeGuard(Arc<Gauge>);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Observations counted into fixed buckets (upper bounds, ascending), with their sum.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, then one for values above the last: not cumulative, so an
    /// observation touches one bucket; the count is their total, read in one pass.
    buckets: Box<[AtomicU64]>,
    /// The sum's `f64` bits.
    sum: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]), "ascending bounds");
        Self {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
        }
    }

    pub fn observe(&self, value: f64) {
        let value = if value.is_finite() { value } else { 0.0 };
        let at = self
            .bounds
            .iter()
            .position(|bound| value <= *bound)
            .unwrap_or(self.bounds.len());
        self.buckets[at].fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    /// The cumulative count at each bound (then at `+Inf`, the total) and the sum.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|bucket| {
                running += bucket.load(Ordering::Relaxed);
                running
            })
            .collect();
        HistogramSnapshot {
            bounds: self.bounds,
            cumulative,
            sum: f64::from_bits(self.sum.load(Ordering::Relaxed)),
        }
    }
}

/// A histogram as read at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub bounds: &'static [f64],
    /// One per bound, then the total (`+Inf`).
    pub cumulative: Vec<u64>,
    pub sum: f64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_each_value_in_the_first_bucket_that_holds_it() {
        static BOUNDS: [f64; 3] = [0.1, 1.0, 10.0];
        let histogram = Histogram::new(&BOUNDS);
        for value in [0.05, 0.1, 0.5, 3.0, 20.0, f64::NAN] {
            histogram.observe(value);
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.cumulative, [3, 4, 5, 6]);
        assert_eq!(snapshot.count(), 6);
        assert!((snapshot.sum - 23.65).abs() < 1e-9, "{}", snapshot.sum);
    }

    #[test]
    fn a_gauge_guard_gives_its_unit_back() {
        let gauge = Arc::new(Gauge::default());
        let first = gauge.track();
        let second = gauge.track();
        assert_eq!(gauge.get(), 2);
        drop(first);
        assert_eq!(gauge.get(), 1);
        drop(second);
        assert_eq!(gauge.get(), 0);
    }
}
