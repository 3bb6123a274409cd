//! The sustained scenario's record: a [`Sample`] every interval, a [`Window`] of claim latency every 30 seconds,
//! and the [`Steadiness`] they add up to, held to the bar of issue 25 (no sample below 70 % of the run's median
//! completion rate; no window's claim p99 above twice the run's median p99). Counts only; the scenario measures.

use std::time::Duration;

use serde::Serialize;

use super::stats::Latencies;

/// The span of a claim-latency window.
pub const WINDOW: Duration = Duration::from_secs(30);
/// No sample's completion rate may fall below this share of the run's median.
pub const RATE_FLOOR: f64 = 0.7;
/// No window's claim p99 may rise above this multiple of the run's median p99.
pub const P99_CEILING: f64 = 2.0;

/// What the database holds, read at the end of a sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Storage {
    /// The database's size: the SQLite file and its write-ahead log; on PostgreSQL, the pages of Cairn's tables
    /// and indexes as vacuum and analyze last counted them.
    pub bytes: u64,
    /// PostgreSQL: live rows in the jobs table, by the statistics collector.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_live: Option<u64>,
    /// PostgreSQL: dead rows in the jobs table, waiting for vacuum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_dead: Option<u64>,
    /// PostgreSQL: dead rows in all of Cairn's tables.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead: Option<u64>,
    /// PostgreSQL: how many times autovacuum has run on the jobs table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs_autovacuums: Option<u64>,
}

/// One interval of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds from the start of the run to the end of this sample.
    pub at_s: f64,
    /// The sample's length in seconds.
    pub seconds: f64,
    /// Jobs whose handler ended in the sample.
    pub completed: u64,
    /// Jobs enqueued in the sample.
    pub enqueued: u64,
    /// `completed` per second.
    pub completions_per_s: f64,
    /// `enqueued` per second.
    pub enqueues_per_s: f64,
    /// Jobs started in the sample: the claim latencies below are theirs.
    pub claims: u64,
    /// Jobs enqueued and not yet started, at the sample's end.
    pub depth: u64,
    /// Claim latency (enqueue call to handler start) of the jobs started in the sample, in milliseconds.
    pub claim_p50_ms: f64,
    /// Its 95th percentile.
    pub claim_p95_ms: f64,
    /// Its 99th percentile.
    pub claim_p99_ms: f64,
    /// Its largest.
    pub claim_max_ms: f64,
    /// CPU used by the measured process over the sample, in percent of one core, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    /// What the database holds, when it can be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<Storage>,
}

/// What one sample counted before it becomes a [`Sample`].
#[derive(Debug, Default)]
pub struct Counts {
    /// Handlers ended.
    pub completed: u64,
    /// Jobs enqueued.
    pub enqueued: u64,
    /// Ready jobs at the end.
    pub depth: u64,
    /// Claim latencies of the jobs started.
    pub claims: Latencies,
}

impl Sample {
    /// A sample of `seconds` ending `at_s` into the run.
    pub fn new(at_s: f64, seconds: f64, counts: &Counts) -> Sample {
        let per_s = |n: u64| n as f64 / seconds.max(f64::MIN_POSITIVE);
        let ms = |d: Duration| (d.as_secs_f64() * 1e5).round() / 100.0;
        Sample {
            at_s,
            seconds,
            completed: counts.completed,
            enqueued: counts.enqueued,
            completions_per_s: per_s(counts.completed),
            enqueues_per_s: per_s(counts.enqueued),
            claims: counts.claims.len() as u64,
            depth: counts.depth,
            claim_p50_ms: ms(counts.claims.percentile(50.0)),
            claim_p95_ms: ms(counts.claims.percentile(95.0)),
            claim_p99_ms: ms(counts.claims.percentile(99.0)),
            claim_max_ms: ms(counts.claims.max()),
            cpu_percent: None,
            storage: None,
        }
    }
}

/// The claim latency of a 30-second span.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    /// Seconds from the start of the run to the window's start.
    pub from_s: f64,
    /// To its end.
    pub to_s: f64,
    /// Jobs started in it.
    pub claims: u64,
    /// Their claim p99, in milliseconds.
    pub claim_p99_ms: f64,
}

impl Window {
    /// The window from `from_s` to `to_s` over its claim latencies.
    pub fn new(from_s: f64, to_s: f64, claims: &Latencies) -> Window {
        Window {
            from_s,
            to_s,
            claims: claims.len() as u64,
            claim_p99_ms: (claims.percentile(99.0).as_secs_f64() * 1e5).round() / 100.0,
        }
    }
}

/// How steady a run was.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Steadiness {
    /// The median of the samples' completion rates.
    pub median_completions_per_s: f64,
    /// The lowest sample's rate.
    pub lowest_completions_per_s: f64,
    /// When the lowest sample ended.
    pub lowest_at_s: f64,
    /// The lowest over the median.
    pub lowest_over_median: f64,
    /// Jobs completed over the whole run, per second.
    pub mean_completions_per_s: f64,
    /// The median of the windows' claim p99.
    pub median_claim_p99_ms: f64,
    /// The highest window's claim p99.
    pub worst_window_p99_ms: f64,
    /// When that window started.
    pub worst_window_from_s: f64,
    /// The worst window's p99 over the median p99.
    pub worst_over_median: f64,
    /// Whether every sample held [`RATE_FLOOR`] of the median rate.
    pub rate_held: bool,
    /// Whether every window kept its p99 within [`P99_CEILING`] of the median.
    pub latency_held: bool,
}

impl Steadiness {
    /// Sums up `samples` and `windows`; `None` without a sample.
    pub fn of(samples: &[Sample], windows: &[Window]) -> Option<Steadiness> {
        let rates: Vec<f64> = samples.iter().map(|s| s.completions_per_s).collect();
        let median_rate = median(&rates)?;
        let lowest = samples
            .iter()
            .min_by(|a, b| a.completions_per_s.total_cmp(&b.completions_per_s))?;
        // Windows against windows: a p99 over 30 s is not comparable with one over 5 s. Windows in which nothing
        // started have no latency to speak of.
        let windows: Vec<&Window> = windows.iter().filter(|w| w.claims > 0).collect();
        let p99s: Vec<f64> = windows.iter().map(|w| w.claim_p99_ms).collect();
        let median_p99 = median(&p99s).unwrap_or(0.0);
        let worst = windows
            .iter()
            .max_by(|a, b| a.claim_p99_ms.total_cmp(&b.claim_p99_ms));
        let (worst_p99, worst_from) = worst.map_or((0.0, 0.0), |w| (w.claim_p99_ms, w.from_s));
        let seconds: f64 = samples.iter().map(|s| s.seconds).sum();
        let completed: u64 = samples.iter().map(|s| s.completed).sum();
        let ratio = |x: f64, of: f64| if of > 0.0 { x / of } else { 0.0 };
        let lowest_over_median = ratio(lowest.completions_per_s, median_rate);
        let worst_over_median = ratio(worst_p99, median_p99);
        Some(Steadiness {
            median_completions_per_s: median_rate,
            lowest_completions_per_s: lowest.completions_per_s,
            lowest_at_s: lowest.at_s,
            lowest_over_median,
            mean_completions_per_s: completed as f64 / seconds.max(f64::MIN_POSITIVE),
            median_claim_p99_ms: median_p99,
            worst_window_p99_ms: worst_p99,
            worst_window_from_s: worst_from,
            worst_over_median,
            rate_held: lowest_over_median >= RATE_FLOOR,
            latency_held: worst_over_median <= P99_CEILING,
        })
    }
}

/// The median (the mean of the middle two for an even count); `None` when empty.
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_s: f64, rate: f64, p99_ms: f64) -> Sample {
        let mut s = Sample::new(at_s, 5.0, &Counts::default());
        s.completions_per_s = rate;
        s.completed = (rate * 5.0) as u64;
        s.claim_p99_ms = p99_ms;
        s
    }

    fn window(from_s: f64, p99_ms: f64) -> Window {
        Window {
            from_s,
            to_s: from_s + 30.0,
            claims: 1,
            claim_p99_ms: p99_ms,
        }
    }

    #[test]
    fn a_sample_counts_rates_and_percentiles() {
        let ms = Duration::from_millis;
        let counts = Counts {
            completed: 5_000,
            enqueued: 4_000,
            depth: 1_000,
            claims: Latencies::new((1..=100).map(ms).collect()),
        };
        let s = Sample::new(10.0, 5.0, &counts);
        assert_eq!((s.completions_per_s, s.enqueues_per_s), (1_000.0, 800.0));
        assert_eq!(
            (
                s.claim_p50_ms,
                s.claim_p95_ms,
                s.claim_p99_ms,
                s.claim_max_ms
            ),
            (50.0, 95.0, 99.0, 100.0)
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["depth"], 1_000);
        assert!(json.get("storage").is_none(), "{json}");
    }

    #[test]
    fn a_steady_run_holds_both_bars() {
        let samples: Vec<Sample> = (1..=12)
            .map(|i| sample(5.0 * f64::from(i), 1_000.0 + f64::from(i), 4.0))
            .collect();
        let windows = [window(0.0, 4.0), window(30.0, 7.9)];
        let s = Steadiness::of(&samples, &windows).unwrap();
        assert_eq!(s.median_completions_per_s, 1_006.5);
        assert_eq!(s.lowest_completions_per_s, 1_001.0);
        assert_eq!(s.lowest_at_s, 5.0);
        assert_eq!(s.worst_window_from_s, 30.0);
        assert!(s.rate_held && s.latency_held, "{s:?}");
    }

    #[test]
    fn a_stall_fails_the_rate_and_a_slow_window_fails_the_latency() {
        let mut samples: Vec<Sample> = (1..=10)
            .map(|i| sample(5.0 * f64::from(i), 1_000.0, 4.0))
            .collect();
        samples[6].completions_per_s = 690.0;
        let windows = [window(0.0, 4.0), window(30.0, 8.1), window(60.0, 4.0)];
        let s = Steadiness::of(&samples, &windows).unwrap();
        assert!(!s.rate_held);
        assert_eq!(s.lowest_at_s, 35.0);
        assert!((s.lowest_over_median - 0.69).abs() < 1e-9);
        assert!(!s.latency_held);
        assert!((s.worst_over_median - 2.025).abs() < 1e-9);
        assert_eq!(s.worst_window_from_s, 30.0);
    }

    #[test]
    fn windows_with_nothing_started_have_no_latency_to_judge() {
        let samples = [sample(5.0, 1_000.0, 4.0)];
        let empty = Window {
            claims: 0,
            ..window(30.0, 0.0)
        };
        let s = Steadiness::of(&samples, &[window(0.0, 4.0), empty]).unwrap();
        assert_eq!(s.median_claim_p99_ms, 4.0);
        assert!(s.latency_held);
    }

    #[test]
    fn nothing_to_sum_up_without_samples() {
        assert_eq!(Steadiness::of(&[], &[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    }
}
