//! The results of a run: one row per measurement, latency percentiles, the targets checked against the rows, and
//! the printed table (plus a tab-separated copy for `bench/compare.sh`). Measures nothing itself.

use std::fmt::Write as _;
use std::time::Duration;

/// Latency samples, sorted, for percentiles.
pub struct Latencies {
    sorted: Vec<Duration>,
}

impl Latencies {
    /// Sorts the samples.
    pub fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Latencies { sorted: samples }
    }

    /// The nearest-rank percentile: the smallest sample with at least `p` % of the samples at or below it.
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
        self.sorted.iter().sum::<Duration>() / self.sorted.len() as u32
    }

    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }
}

/// One measurement: `jobs` units of work in `elapsed`, with optional per-call latencies.
pub struct Row {
    /// The scenario's name, as the command-line filter matches it.
    pub scenario: String,
    /// Jobs (or rows, or commits, or samples) done.
    pub jobs: u64,
    /// Wall time for all of them.
    pub elapsed: Duration,
    /// What the latency columns measure, and the samples.
    pub latency: Option<(&'static str, Latencies)>,
    /// Whether jobs per second means anything (not for latency runs that pace themselves).
    pub has_rate: bool,
}

impl Row {
    /// A row without latencies.
    pub fn new(scenario: &str, jobs: u64, elapsed: Duration) -> Self {
        Row {
            scenario: scenario.to_owned(),
            jobs,
            elapsed,
            latency: None,
            has_rate: true,
        }
    }

    /// A row whose throughput is not a result: the run paced itself, so only its latencies count.
    pub fn latency_only(mut self) -> Self {
        self.has_rate = false;
        self
    }

    /// Adds latency samples, saying what one sample measures.
    pub fn with_latency(mut self, what: &'static str, samples: Vec<Duration>) -> Self {
        self.latency = Some((what, Latencies::new(samples)));
        self
    }

    /// Throughput.
    pub fn per_second(&self) -> f64 {
        self.jobs as f64 / self.elapsed.as_secs_f64()
    }
}

/// A target from the issue, and whether this run met it.
pub struct Verdict {
    /// The target in words, such as `enqueue/batch-1000 >= 250,000 jobs/s`.
    pub target: String,
    /// What was measured, in words.
    pub measured: String,
    /// Whether it was met.
    pub met: bool,
}

/// Everything a run produced.
#[derive(Default)]
pub struct Results {
    /// The measurements, in the order they were taken.
    pub rows: Vec<Row>,
    /// The targets checked.
    pub verdicts: Vec<Verdict>,
    /// Notes printed under the table.
    pub notes: Vec<String>,
}

impl Results {
    /// Records a measurement and prints it at once, so a long run shows progress.
    pub fn push(&mut self, row: Row) {
        println!("  {}", format_row(&row));
        self.rows.push(row);
    }

    /// Checks a target.
    pub fn verdict(&mut self, target: String, measured: String, met: bool) {
        self.verdicts.push(Verdict {
            target,
            measured,
            met,
        });
    }

    /// Looks a measurement up by scenario name.
    pub fn row(&self, scenario: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.scenario == scenario)
    }

    /// The whole report: table, targets, notes.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", header());
        let _ = writeln!(out, "{}", "-".repeat(header().len()));
        for row in &self.rows {
            let _ = writeln!(out, "{}", format_row(row));
        }
        if !self.verdicts.is_empty() {
            let _ = writeln!(out, "\ntargets:");
            for v in &self.verdicts {
                let status = if v.met { "met" } else { "NOT MET" };
                let _ = writeln!(out, "  [{status:>7}] {}: {}", v.target, v.measured);
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\nnotes:");
            for note in &self.notes {
                let _ = writeln!(out, "  - {note}");
            }
        }
        out
    }

    /// The rows as tab-separated values, latencies in microseconds: what `bench/compare.sh` reads.
    pub fn to_tsv(&self) -> String {
        let mut out = String::from("scenario\tjobs\tseconds\tper_second\tp50_us\tp99_us\tmax_us\n");
        for row in &self.rows {
            let (p50, p99, max) = match &row.latency {
                Some((_, l)) => (
                    micros(l.percentile(50.0)),
                    micros(l.percentile(99.0)),
                    micros(l.max()),
                ),
                None => (String::new(), String::new(), String::new()),
            };
            let rate = if row.has_rate {
                format!("{:.0}", row.per_second())
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{}\t{}\t{:.3}\t{rate}\t{p50}\t{p99}\t{max}",
                row.scenario,
                row.jobs,
                row.elapsed.as_secs_f64(),
            );
        }
        out
    }
}

fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

fn header() -> String {
    format!(
        "{:<40} {:>9} {:>8} {:>11} {:>9} {:>9} {:>9}  {}",
        "scenario", "jobs", "seconds", "jobs/s", "p50", "p99", "max", "latency of"
    )
}

fn format_row(row: &Row) -> String {
    let (p50, p99, max, what) = match &row.latency {
        Some((what, l)) => (
            human(l.percentile(50.0)),
            human(l.percentile(99.0)),
            human(l.max()),
            *what,
        ),
        None => (String::new(), String::new(), String::new(), ""),
    };
    format!(
        "{:<40} {:>9} {:>8.2} {:>11} {:>9} {:>9} {:>9}  {}",
        row.scenario,
        row.jobs,
        row.elapsed.as_secs_f64(),
        if row.has_rate {
            thousands(row.per_second())
        } else {
            "-".to_owned()
        },
        p50,
        p99,
        max,
        what
    )
}

/// A duration with a unit that keeps three significant digits readable.
pub fn human(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// A rate with thousands separators.
pub fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}
