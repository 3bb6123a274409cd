//! Counters and histograms since the queue opened, per queue and job name, kept in memory: what a Prometheus
//! scrape reads (`/metrics` on the server). The writer adds each batch's totals once the batch has committed, so
//! nothing counted here was rolled back. They start from zero when the queue opens, as Prometheus expects of
//! counters; the statistics in the database (`Jobs::stats`) are the ones that outlive restarts.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::ops::events::{ActivityKind, BatchTotals};

/// The upper bounds, in seconds, of the wait and run time histograms' buckets (and +Inf after them).
pub const HISTOGRAM_BOUNDS: [f64; 19] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    1800.0, 3600.0, 21600.0, 86400.0,
];

/// A histogram of durations: counts per bucket (not cumulative; the last is above every bound), their sum and
/// count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DurationHistogram {
    /// Observations per bucket: `buckets[i]` counts those at most `HISTOGRAM_BOUNDS[i]` and above the bound
    /// before; the last counts those above every bound.
    pub buckets: [u64; HISTOGRAM_BOUNDS.len() + 1],
    /// The sum of the observations, in seconds.
    pub sum_seconds: f64,
    /// How many observations.
    pub count: u64,
}

impl DurationHistogram {
    fn observe(&mut self, ms: i64) {
        let seconds = ms.max(0) as f64 / 1000.0;
        let index = HISTOGRAM_BOUNDS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(HISTOGRAM_BOUNDS.len());
        self.buckets[index] += 1;
        self.sum_seconds += seconds;
        self.count += 1;
    }
}

/// What happened to the jobs of one queue and name since the queue opened.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobMetrics {
    /// Transitions by kind, in [`ActivityKind::ALL`] order.
    pub transitions: [u64; ActivityKind::ALL.len()],
    /// Wait times (ready → started).
    pub wait: DurationHistogram,
    /// Run times (started → ended by the worker).
    pub run: DurationHistogram,
}

impl JobMetrics {
    /// How many transitions of `kind`.
    pub fn count(&self, kind: ActivityKind) -> u64 {
        let index = ActivityKind::ALL
            .iter()
            .position(|k| *k == kind)
            .expect("every kind is in ALL");
        self.transitions[index]
    }
}

/// The metrics of every queue and name seen since the queue opened, by (queue, name).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsSnapshot {
    /// Per (queue, name).
    pub jobs: BTreeMap<(String, String), JobMetrics>,
}

/// The live metrics, shared by the writer (which adds) and readers (which copy).
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    snapshot: Mutex<MetricsSnapshot>,
}

impl Metrics {
    /// Adds a committed batch's totals.
    pub fn add(&self, totals: &BatchTotals) {
        if totals.jobs.is_empty() {
            return;
        }
        let mut snapshot = self
            .snapshot
            .lock()
            .expect("metrics lock is never poisoned");
        for ((queue, name), batch) in &totals.jobs {
            let metrics = snapshot
                .jobs
                .entry((queue.clone(), name.clone()))
                .or_default();
            for (total, added) in metrics.transitions.iter_mut().zip(batch.counts) {
                *total += added;
            }
            for &ms in &batch.wait_ms {
                metrics.wait.observe(ms);
            }
            for &ms in &batch.run_ms {
                metrics.run.observe(ms);
            }
        }
    }

    /// A copy of the metrics as they are now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        self.snapshot
            .lock()
            .expect("metrics lock is never poisoned")
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_whose_bound_holds_them() {
        let mut h = DurationHistogram::default();
        for ms in [0, 5, 6, 1000, 1001, 86_400_000, 86_400_001] {
            h.observe(ms);
        }
        assert_eq!(h.buckets[0], 2, "0 and 5 ms are within 5 ms");
        assert_eq!(h.buckets[1], 1);
        assert_eq!(h.buckets[7], 1, "1 s is within the 1 s bound");
        assert_eq!(h.buckets[8], 1);
        assert_eq!(h.buckets[18], 1, "a day is within the day bound");
        assert_eq!(h.buckets[19], 1, "above every bound");
        assert_eq!(h.count, 7);
    }
}
