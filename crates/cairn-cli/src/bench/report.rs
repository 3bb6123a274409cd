//! What a run found, and how it is shown: [`ScenarioReport`] per scenario, printed as text when each scenario
//! ends, or all together as JSON (`--json`) at the end. Measures nothing itself.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use super::stats::Latencies;

/// A target from the issue, and whether this run met it.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// The target in words, such as `>= 20,000 jobs/s over HTTP`.
    pub text: String,
    /// Whether it was met.
    pub met: bool,
}

/// The idle scenario's readings of the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    /// Idle long polls opened.
    pub connections: u64,
    /// How long opening them (connect and write the request) took.
    pub opened_in: Duration,
    /// Connections the server had accepted when it was measured (from its open descriptors), if known.
    pub accepted: Option<u64>,
    /// Long polls still waiting (no answer yet) when the server was measured.
    pub waiting: u64,
    /// The server's resident memory before the connections were opened, in bytes.
    pub rss_before: u64,
    /// With every connection open and waiting.
    pub rss_open: u64,
    /// After they were all closed again.
    pub rss_closed: u64,
}

impl Memory {
    /// Resident memory added per open connection, in bytes (negative if the server shrank).
    pub fn per_connection(&self) -> f64 {
        (self.rss_open as f64 - self.rss_before as f64) / self.connections.max(1) as f64
    }
}

/// One scenario's results.
#[derive(Debug, Clone)]
pub struct ScenarioReport {
    /// The scenario's name, as `--scenario` reads it.
    pub name: &'static str,
    /// What was done, in one line: the shape of the load.
    pub shape: String,
    /// Units of work done: jobs, or samples, or connections.
    pub count: u64,
    /// Wall time for all of them.
    pub elapsed: Duration,
    /// Whether jobs per second is a result (not for scenarios that pace themselves).
    pub has_rate: bool,
    /// Latency of each request type, in the order first made.
    pub latencies: Vec<(&'static str, Latencies)>,
    /// The target, when there is one for this mode.
    pub goal: Option<Goal>,
    /// The idle scenario's memory readings.
    pub memory: Option<Memory>,
    /// Anything else worth knowing about the run.
    pub notes: Vec<String>,
}

impl ScenarioReport {
    /// Compares the rate with the target of `goal` jobs/s, which applies over HTTP only.
    pub fn with_rate_goal(mut self, over_http: bool, goal: f64) -> Self {
        if over_http {
            let met = self.per_second() >= goal;
            self.goal = Some(Goal {
                text: format!(">= {} jobs/s over HTTP", thousands(goal)),
                met,
            });
        }
        self
    }

    /// Notes the jobs an earlier run left in `queue`, which were finished before this run.
    pub fn with_leftovers(mut self, leftovers: u64, queue: &str) -> Self {
        if leftovers > 0 {
            self.notes.push(format!(
                "{leftovers} jobs left in {queue} by an earlier run were finished before the run"
            ));
        }
        self
    }

    /// A report of `count` jobs in `elapsed`, without latencies yet.
    pub fn new(name: &'static str, shape: String, count: u64, elapsed: Duration) -> Self {
        ScenarioReport {
            name,
            shape,
            count,
            elapsed,
            has_rate: true,
            latencies: Vec::new(),
            goal: None,
            memory: None,
            notes: Vec::new(),
        }
    }

    /// Adds the latencies of each request type.
    pub fn with_latencies(mut self, latencies: Vec<(&'static str, Latencies)>) -> Self {
        self.latencies = latencies;
        self
    }

    /// Marks the run as paced by itself: its rate is not a result, only its latencies are.
    pub fn latency_only(mut self) -> Self {
        self.has_rate = false;
        self
    }

    /// Jobs per second.
    pub fn per_second(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// The latencies of one request type.
    pub fn latency(&self, request: &str) -> Option<&Latencies> {
        self.latencies
            .iter()
            .find(|(r, _)| *r == request)
            .map(|(_, l)| l)
    }

    /// The report as text: a result line, the shape, a latency table, the target, the notes.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let unit = match self.name {
            "wakeup" => "samples",
            "idle" => "connections",
            _ => "jobs",
        };
        let _ = write!(
            out,
            "{}: {} {unit} in {}",
            self.name,
            thousands(self.count as f64),
            human(self.elapsed)
        );
        if self.has_rate {
            let _ = write!(out, ", {} jobs/s", thousands(self.per_second()));
        }
        let _ = writeln!(out, "\n  {}", self.shape);
        if !self.latencies.is_empty() {
            let _ = writeln!(
                out,
                "  {:<14} {:>9} {:>9} {:>9} {:>9} {:>9}",
                "latency of", "calls", "p50", "p90", "p99", "max"
            );
            for (request, l) in &self.latencies {
                let _ = writeln!(
                    out,
                    "  {:<14} {:>9} {:>9} {:>9} {:>9} {:>9}",
                    request,
                    thousands(l.len() as f64),
                    human(l.percentile(50.0)),
                    human(l.percentile(90.0)),
                    human(l.percentile(99.0)),
                    human(l.max()),
                );
            }
        }
        if let Some(memory) = &self.memory {
            out.push_str(&memory_text(memory));
        }
        if let Some(goal) = &self.goal {
            let status = if goal.met { "met" } else { "NOT MET" };
            let _ = writeln!(out, "  target {}: {status}", goal.text);
        }
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        out
    }

    /// The report as JSON; latencies in microseconds.
    pub fn to_json(&self) -> Value {
        let latencies: Vec<Value> = self
            .latencies
            .iter()
            .map(|(request, l)| {
                json!({
                    "request": request,
                    "calls": l.len(),
                    "p50_us": micros(l.percentile(50.0)),
                    "p90_us": micros(l.percentile(90.0)),
                    "p99_us": micros(l.percentile(99.0)),
                    "max_us": micros(l.max()),
                    "mean_us": micros(l.mean()),
                })
            })
            .collect();
        let mut value = json!({
            "name": self.name,
            "shape": self.shape,
            "count": self.count,
            "seconds": self.elapsed.as_secs_f64(),
            "jobs_per_second": self.has_rate.then(|| self.per_second().round()),
            "latencies": latencies,
            "goal": self.goal.as_ref().map(|g| json!({"text": g.text, "met": g.met})),
            "notes": self.notes,
        });
        if let Some(m) = &self.memory {
            value["memory"] = json!({
                "connections": m.connections,
                "opened_seconds": m.opened_in.as_secs_f64(),
                "accepted": m.accepted,
                "waiting": m.waiting,
                "rss_before_bytes": m.rss_before,
                "rss_open_bytes": m.rss_open,
                "rss_closed_bytes": m.rss_closed,
                "bytes_per_connection": m.per_connection().round(),
            });
        }
        value
    }
}

fn memory_text(m: &Memory) -> String {
    let mut out = String::new();
    let accepted = m
        .accepted
        .map_or_else(|| "unknown".to_owned(), |a| thousands(a as f64));
    let _ = writeln!(
        out,
        "  connections    {} opened in {}, {accepted} accepted by the server, {} still waiting when measured",
        thousands(m.connections as f64),
        human(m.opened_in),
        thousands(m.waiting as f64),
    );
    let _ = writeln!(
        out,
        "  server RSS     {} before, {} with all open, {} after closing them",
        bytes(m.rss_before as f64),
        bytes(m.rss_open as f64),
        bytes(m.rss_closed as f64),
    );
    let _ = writeln!(out, "  per connection {}", bytes(m.per_connection()));
    out
}

/// Everything a run found, with what it ran against; prints each scenario as text when it is added, or all of
/// it as JSON at the end.
#[derive(Debug)]
pub struct Report {
    /// What the bench ran against, in words.
    pub target: String,
    /// `server` or `embedded`.
    pub mode: &'static str,
    /// The settings, for the JSON output.
    pub settings: Value,
    /// Print JSON at the end instead of text as it goes.
    pub json: bool,
    /// The scenarios run so far.
    pub scenarios: Vec<ScenarioReport>,
}

impl Report {
    /// Starts a report; in text mode, prints what the bench runs against.
    pub fn start(target: String, mode: &'static str, settings: Value, json: bool) -> Self {
        if !json {
            println!("cairn bench: {target}; {} build", build_profile());
        }
        Report {
            target,
            mode,
            settings,
            json,
            scenarios: Vec::new(),
        }
    }

    /// Records a scenario's results; in text mode, prints them at once, so a long run shows each as it ends.
    pub fn push(&mut self, scenario: ScenarioReport) {
        if !self.json {
            println!("\n{}", scenario.to_text().trim_end());
        }
        self.scenarios.push(scenario);
    }

    /// In JSON mode, prints the whole report.
    pub fn finish(&self) {
        if self.json {
            let value = json!({
                "target": self.target,
                "mode": self.mode,
                "build": build_profile(),
                "settings": self.settings,
                "scenarios": self.scenarios.iter().map(ScenarioReport::to_json).collect::<Vec<_>>(),
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&value).expect("a JSON value always serializes")
            );
        }
    }
}

/// The profile this binary was built with: numbers from a debug build say little about Cairn.
pub fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

fn micros(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
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

/// A number rounded to a whole, with thousands separators.
pub fn thousands(x: f64) -> String {
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    if x.round() < 0.0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A size in bytes, KiB or MiB.
pub fn bytes(n: f64) -> String {
    if n.abs() < 1024.0 {
        format!("{n:.0} B")
    } else if n.abs() < 1024.0 * 1024.0 {
        format!("{:.1} KiB", n / 1024.0)
    } else {
        format!("{:.1} MiB", n / (1024.0 * 1024.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(-2048.0), "-2,048");
        assert_eq!(human(Duration::from_micros(850)), "850µs");
        assert_eq!(human(Duration::from_micros(1_850)), "1.85ms");
        assert_eq!(human(Duration::from_millis(2_500)), "2.50s");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(10_240.0), "10.0 KiB");
        assert_eq!(bytes(3.5 * 1024.0 * 1024.0), "3.5 MiB");
    }

    #[test]
    fn a_scenario_prints_its_rate_latencies_and_target() {
        let ms = Duration::from_millis;
        let mut report = ScenarioReport::new("batch", "4 clients".to_owned(), 20_000, ms(500))
            .with_latencies(vec![(
                "enqueue_batch",
                Latencies::new(vec![ms(1), ms(2), ms(3), ms(4)]),
            )]);
        report.goal = Some(Goal {
            text: ">= 150,000 jobs/s over HTTP".to_owned(),
            met: false,
        });
        assert_eq!(
            report.to_text(),
            concat!(
                "batch: 20,000 jobs in 500.00ms, 40,000 jobs/s\n",
                "  4 clients\n",
                "  latency of         calls       p50       p90       p99       max\n",
                "  enqueue_batch          4    2.00ms    4.00ms    4.00ms    4.00ms\n",
                "  target >= 150,000 jobs/s over HTTP: NOT MET\n",
            )
        );
        let json = report.to_json();
        assert_eq!(json["jobs_per_second"], 40_000.0);
        assert_eq!(json["latencies"][0]["p50_us"], 2000.0);
        assert_eq!(json["goal"]["met"], false);
    }

    #[test]
    fn memory_per_connection_is_the_growth_over_the_connections() {
        let memory = Memory {
            connections: 1000,
            opened_in: Duration::from_millis(100),
            accepted: Some(1000),
            waiting: 1000,
            rss_before: 10 * 1024 * 1024,
            rss_open: 10 * 1024 * 1024 + 1000 * 8192,
            rss_closed: 11 * 1024 * 1024,
        };
        assert_eq!(memory.per_connection(), 8192.0);
        let mut report = ScenarioReport::new(
            "idle",
            "idle long polls".to_owned(),
            1000,
            Duration::from_secs(2),
        )
        .latency_only();
        report.memory = Some(memory);
        let text = report.to_text();
        assert!(
            text.starts_with("idle: 1,000 connections in 2.00s\n"),
            "{text}"
        );
        assert!(text.contains("  per connection 8.0 KiB\n"), "{text}");
        assert_eq!(report.to_json()["memory"]["bytes_per_connection"], 8192.0);
    }
}
