//! Latency statistics: percentiles from the sorted samples, the way the engine's `cargo bench` computes them
//! (nearest rank). Every sample is kept: a million of them is 16 MB, and `--jobs` is bounded, so no histogram (and
//! no dependency for one) is needed.

use std::time::Duration;

/// Latency samples of one request type, sorted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    sorted: Vec<Duration>,
}

impl Latencies {
    /// Sorts the samples.
    pub fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Latencies { sorted: samples }
    }

    /// The nearest-rank percentile: the smallest sample with at least `p` % of the samples at or below it; zero
    /// when there are no samples.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    /// The largest sample.
    pub fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }

    /// The mean of the samples.
    pub fn mean(&self) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let total: Duration = self.sorted.iter().sum();
        total.div_f64(self.sorted.len() as f64)
    }

    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }
}

/// Samples gathered by several tasks, merged into one set per request type.
#[derive(Debug, Default)]
pub struct Samples {
    /// Request types in the order they were first recorded, each with its samples.
    by_request: Vec<(&'static str, Vec<Duration>)>,
}

impl Samples {
    /// Records how long one request of type `request` took.
    pub fn record(&mut self, request: &'static str, took: Duration) {
        match self.by_request.iter_mut().find(|(r, _)| *r == request) {
            Some((_, samples)) => samples.push(took),
            None => self.by_request.push((request, vec![took])),
        }
    }

    /// Adds another task's samples.
    pub fn merge(&mut self, other: Samples) {
        for (request, samples) in other.by_request {
            match self.by_request.iter_mut().find(|(r, _)| *r == request) {
                Some((_, mine)) => mine.extend(samples),
                None => self.by_request.push((request, samples)),
            }
        }
    }

    /// The samples of each request type, sorted, in first-recorded order.
    pub fn into_latencies(self) -> Vec<(&'static str, Latencies)> {
        self.by_request
            .into_iter()
            .map(|(request, samples)| (request, Latencies::new(samples)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn percentiles_are_nearest_rank_over_the_sorted_samples() {
        // 1..=100 ms in reverse order: the p-th percentile is p ms.
        let latencies = Latencies::new((1..=100).rev().map(ms).collect());
        assert_eq!(latencies.percentile(50.0), ms(50));
        assert_eq!(latencies.percentile(90.0), ms(90));
        assert_eq!(latencies.percentile(99.0), ms(99));
        assert_eq!(latencies.percentile(100.0), ms(100));
        assert_eq!(latencies.max(), ms(100));
        assert_eq!(
            latencies.percentile(0.0),
            ms(1),
            "p0 is the smallest sample"
        );
        assert_eq!(latencies.mean(), Duration::from_micros(50_500));
    }

    #[test]
    fn percentiles_of_a_few_samples_round_up_to_a_real_sample() {
        let latencies = Latencies::new(vec![ms(30), ms(10), ms(20)]);
        assert_eq!(latencies.percentile(50.0), ms(20));
        // 99 % of 3 samples is 2.97: the rank rounds up to the third sample, never past the end.
        assert_eq!(latencies.percentile(99.0), ms(30));
        assert_eq!(latencies.percentile(34.0), ms(20));
        assert_eq!(latencies.percentile(33.0), ms(10));
    }

    #[test]
    fn one_sample_is_every_percentile_and_no_sample_is_zero() {
        let one = Latencies::new(vec![ms(7)]);
        for p in [0.0, 50.0, 90.0, 99.0, 100.0] {
            assert_eq!(one.percentile(p), ms(7));
        }
        let none = Latencies::new(Vec::new());
        assert_eq!(none.len(), 0);
        assert_eq!(none.percentile(99.0), Duration::ZERO);
        assert_eq!(none.max(), Duration::ZERO);
        assert_eq!(none.mean(), Duration::ZERO);
    }

    #[test]
    fn samples_merge_by_request_type_in_first_recorded_order() {
        let mut a = Samples::default();
        a.record("enqueue", ms(1));
        a.record("finish", ms(3));
        let mut b = Samples::default();
        b.record("dequeue", ms(2));
        b.record("enqueue", ms(4));
        a.merge(b);
        let merged = a.into_latencies();
        let names: Vec<_> = merged.iter().map(|(r, _)| *r).collect();
        assert_eq!(names, ["enqueue", "finish", "dequeue"]);
        assert_eq!(merged[0].1, Latencies::new(vec![ms(1), ms(4)]));
    }
}
