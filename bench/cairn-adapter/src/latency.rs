//! Claim latency over a rolling window, in bounded memory: one HDR histogram per sample period, the oldest
//! dropped as each new period starts, merged when the percentiles are read. Memory does not grow with the rate
//! or the length of the run, which the contract requires of multi-hour runs.

use std::collections::VecDeque;
use std::time::Duration;

use hdrhistogram::Histogram;

/// The longest latency kept exactly; longer ones count as this (a claim that waited ten minutes is an outage).
const HIGHEST: Duration = Duration::from_secs(600);

/// Latencies of the last few sample periods.
pub struct RollingLatency {
    /// Oldest first; the last is the period being filled.
    periods: VecDeque<Histogram<u32>>,
    /// How many periods make up the window.
    keep: usize,
}

/// Percentiles of a window, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub count: u64,
}

impl RollingLatency {
    /// A window of `window` made of periods of `period` (at least one period).
    pub fn new(window: Duration, period: Duration) -> RollingLatency {
        let keep = window.as_secs_f64() / period.as_secs_f64().max(1e-3);
        let mut periods = VecDeque::new();
        periods.push_back(empty());
        RollingLatency {
            periods,
            keep: (keep.ceil() as usize).max(1),
        }
    }

    /// Counts one latency in the current period.
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.periods
            .back_mut()
            .expect("there is always a current period")
            .saturating_record(micros.max(1));
    }

    /// Starts a new period, dropping periods that fell out of the window.
    pub fn next_period(&mut self) {
        self.periods.push_back(empty());
        while self.periods.len() > self.keep {
            self.periods.pop_front();
        }
    }

    /// The window's percentiles, `None` if it holds no latency.
    pub fn percentiles(&self) -> Option<Percentiles> {
        let mut all = empty();
        for period in &self.periods {
            all.add(period).expect("the periods share their bounds");
        }
        let ms = |q: f64| all.value_at_quantile(q) as f64 / 1000.0;
        (!all.is_empty()).then(|| Percentiles {
            p50_ms: ms(0.50),
            p95_ms: ms(0.95),
            p99_ms: ms(0.99),
            count: all.len(),
        })
    }
}

fn empty() -> Histogram<u32> {
    let highest = u64::try_from(HIGHEST.as_micros()).expect("ten minutes fit in u64 microseconds");
    Histogram::new_with_bounds(1, highest, 3).expect("valid histogram bounds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_hold_three_significant_figures() {
        let mut window = RollingLatency::new(Duration::from_secs(30), Duration::from_secs(5));
        for ms in 1..=1000 {
            window.record(Duration::from_millis(ms));
        }
        let p = window.percentiles().unwrap();
        assert_eq!(p.count, 1000);
        assert!((p.p50_ms - 500.0).abs() <= 0.5, "{p:?}");
        assert!((p.p95_ms - 950.0).abs() <= 1.0, "{p:?}");
        assert!((p.p99_ms - 990.0).abs() <= 1.0, "{p:?}");
    }

    #[test]
    fn a_period_leaves_the_window_once_the_window_has_passed_it() {
        let mut window = RollingLatency::new(Duration::from_secs(30), Duration::from_secs(5));
        window.record(Duration::from_secs(9));
        for _ in 0..5 {
            window.next_period();
            window.record(Duration::from_millis(2));
        }
        // Six periods of five seconds: the slow one is still in.
        assert_eq!(window.percentiles().unwrap().count, 6);
        assert!(window.percentiles().unwrap().p99_ms > 8000.0);
        window.next_period();
        let p = window.percentiles().unwrap();
        assert_eq!(p.count, 5);
        assert!(p.p99_ms < 3.0, "{p:?}");
    }

    #[test]
    fn an_empty_window_has_no_percentiles_and_an_outage_counts_at_the_ceiling() {
        let mut window = RollingLatency::new(Duration::from_secs(30), Duration::from_secs(5));
        assert_eq!(window.percentiles(), None);
        window.record(Duration::from_secs(3600));
        assert!(window.percentiles().unwrap().p50_ms >= 599_000.0);
    }
}
