//! The adapter against the benchmark's contract (CONTRIBUTING_ADAPTERS.md in
//! hardbyte/postgresql-job-queue-benchmarking), run as the harness runs it: the real binary, its settings in the
//! environment, its JSON lines read from standard output, stopped with SIGTERM; on a SQLite file and on the
//! PostgreSQL cluster `scripts/test` starts, and through a database restart on a cluster of the test's own.

use cairn::Jobs;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use cairn::__private::{PrivateCluster, TestDatabase};
use cairn::Queue;
use serde_json::Value;

/// What every tick must carry (claim percentiles once a job has run).
const METRICS: [&str; 6] = [
    "claim_p50_ms",
    "claim_p95_ms",
    "claim_p99_ms",
    "enqueue_rate",
    "completion_rate",
    "queue_depth",
];

/// A bound on waits, so that a broken adapter fails the test instead of hanging it; never a speed requirement.
const PATIENCE: Duration = Duration::from_secs(60);

/// One tick's records, by metric.
type Tick = BTreeMap<String, f64>;

struct Adapter {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// The tick being filled: its time and its records.
    current: Option<(String, Tick)>,
}

impl Adapter {
    fn start(vars: &[(&str, &str)]) -> Adapter {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cairn-adapter"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(vars.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting cairn-adapter");
        let (send, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("standard output holds only JSON lines: {e}: {line:?}")
                });
                if send.send(value).is_err() {
                    return;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = stderr.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut text = sink.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        let stdin = child.stdin.take();
        Adapter {
            child,
            stdin,
            lines,
            stderr,
            current: None,
        }
    }

    fn record(&self) -> Value {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(value) => value,
            Err(RecvTimeoutError::Timeout) => {
                panic!("no record for a minute; logs:\n{}", self.logs())
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("the adapter ended; logs:\n{}", self.logs())
            }
        }
    }

    fn logs(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The next complete tick: its time and its records (a tick is complete once the next one starts).
    fn tick(&mut self) -> (String, Tick) {
        loop {
            let record = self.record();
            assert_eq!(record["kind"], "adapter", "{record}");
            assert_eq!(record["system"], "cairn");
            let t = record["t"].as_str().expect("a time").to_owned();
            let metric = record["metric"].as_str().expect("a metric").to_owned();
            let value = record["value"].as_f64().expect("a number");
            let expected_window = match metric.as_str() {
                m if m.starts_with("claim_") => 30.0,
                "queue_depth" => 0.0,
                _ => record["window_s"].as_f64().unwrap(),
            };
            assert_eq!(
                record["window_s"].as_f64(),
                Some(expected_window),
                "{record}"
            );
            match &mut self.current {
                Some((at, tick)) if *at == t => {
                    tick.insert(metric, value);
                }
                _ => {
                    let done = self.current.replace((t, Tick::from([(metric, value)])));
                    if let Some(done) = done {
                        return done;
                    }
                }
            }
        }
    }

    /// Ticks until one satisfies `wanted`, which it returns.
    fn tick_until(&mut self, wanted: impl Fn(&Tick) -> bool) -> Tick {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            let (_, tick) = self.tick();
            if wanted(&tick) {
                return tick;
            }
        }
        panic!("no tick as wanted within a minute; logs:\n{}", self.logs());
    }

    /// Sends SIGTERM, as the harness does at the end of a run, and waits for the exit.
    fn terminate(mut self) -> (ExitStatus, String) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader threads take the last lines.
                std::thread::sleep(Duration::from_millis(100));
                return (status, self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "SIGTERM did not stop the adapter"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn has_every_metric(tick: &Tick) -> bool {
    METRICS.iter().all(|m| tick.contains_key(*m))
}

fn check_descriptor(d: &Value, db_name: &str) {
    assert_eq!(
        d["kind"], "descriptor",
        "the first line is the descriptor: {d}"
    );
    assert_eq!(d["system"], "cairn");
    assert_eq!(d["db_name"], db_name);
    assert!(
        d["schema_version"].as_str().unwrap().parse::<u32>().is_ok(),
        "the schema's version is the newest migration: {d}"
    );
    let manifest: Value =
        serde_json::from_str(include_str!("../adapter.json")).expect("adapter.json is JSON");
    assert_eq!(d["event_tables"], manifest["event_tables"]);
}

#[test]
fn on_sqlite_it_describes_itself_then_samples_every_metric_on_the_tick_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.db");
    let mut adapter = Adapter::start(&[
        ("DATABASE_URL", db.to_str().unwrap()),
        ("PRODUCER_RATE", "200"),
        ("WORKER_COUNT", "4"),
        ("SAMPLE_EVERY_S", "1"),
    ]);
    check_descriptor(&adapter.record(), "bench.db");
    adapter.tick_until(has_every_metric);
    let (t1, first) = adapter.tick();
    let (t2, second) = adapter.tick();
    for tick in [&first, &second] {
        assert!(has_every_metric(tick), "{tick:?}");
        assert!(tick["completion_rate"] > 0.0, "{tick:?}");
        assert!(
            tick["claim_p50_ms"] <= tick["claim_p95_ms"]
                && tick["claim_p95_ms"] <= tick["claim_p99_ms"]
        );
    }
    // Ticks fall on whole multiples of the period, one period apart.
    let at = |t: &str| t.parse::<jiff::Timestamp>().unwrap();
    assert!(t1.ends_with(".000Z"), "{t1}");
    assert_eq!(at(&t2).duration_since(at(&t1)).as_secs(), 1);
    let (status, logs) = adapter.terminate();
    assert!(
        status.success(),
        "SIGTERM ends with status 0, got {status}; logs:\n{logs}"
    );
}

#[test]
fn harness_tokens_enqueue_exactly_what_they_ask_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench.db");
    let mut adapter = Adapter::start(&[
        ("DATABASE_URL", db.to_str().unwrap()),
        ("PRODUCER_PACING", "harness"),
        ("SAMPLE_EVERY_S", "1"),
        ("PRODUCER_BATCH_MAX", "16"),
    ]);
    adapter.record();
    let stdin = adapter.stdin.as_mut().unwrap();
    stdin
        .write_all(b"ENQUEUE 30\nsomething newer\nENQUEUE 12\n")
        .unwrap();
    stdin.flush().unwrap();
    adapter.tick_until(|t| t.get("enqueue_rate").is_some_and(|&r| r > 0.0));
    adapter
        .tick_until(|t| t.get("enqueue_rate") == Some(&0.0) && t.get("queue_depth") == Some(&0.0));
    let (status, logs) = adapter.terminate();
    assert!(status.success(), "{logs}");
    assert!(logs.contains("skipping a line on standard input"), "{logs}");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let total: u64 = runtime.block_on(async {
        let queue = Queue::open(&db).await.unwrap();
        let stats = queue.queue_stats().await.unwrap();
        queue.close(Duration::from_secs(5)).await.unwrap();
        stats
            .iter()
            .map(|s| {
                s.scheduled
                    + s.queued
                    + s.waiting
                    + s.running
                    + s.stalled
                    + s.failed
                    + s.completed
                    + s.cancelled
            })
            .sum()
    });
    assert_eq!(total, 42, "two tokens of 30 and 12 jobs");
}

#[test]
fn on_postgres_depth_target_keeps_the_queue_at_its_target() {
    let database = TestDatabase::new();
    let name = database.url.rsplit('/').next().unwrap().to_owned();
    let mut adapter = Adapter::start(&[
        ("DATABASE_URL", &database.url),
        ("PRODUCER_MODE", "depth-target"),
        ("TARGET_DEPTH", "50"),
        ("WORKER_COUNT", "2"),
        ("JOB_WORK_MS", "20"),
        ("SAMPLE_EVERY_S", "1"),
    ]);
    check_descriptor(&adapter.record(), &name);
    adapter.tick_until(|t| t.get("completion_rate").is_some_and(|&r| r > 0.0));
    for _ in 0..3 {
        let (_, tick) = adapter.tick();
        let depth = tick["queue_depth"];
        // The producer counts its own jobs exactly, so the database never holds more than the target ready; it
        // tops up as jobs start, so the queue stays close to it.
        assert!((40.0..=50.0).contains(&depth), "{tick:?}");
    }
    let (status, logs) = adapter.terminate();
    assert!(status.success(), "{logs}");
}

#[test]
fn a_database_restart_is_survived_and_work_resumes_by_itself() {
    let cluster = PrivateCluster::start();
    let mut adapter = Adapter::start(&[
        ("DATABASE_URL", &cluster.url),
        ("PRODUCER_RATE", "100"),
        ("WORKER_COUNT", "4"),
        ("SAMPLE_EVERY_S", "1"),
    ]);
    adapter.record();
    adapter.tick_until(|t| t.get("completion_rate").is_some_and(|&r| r > 0.0));
    cluster.down("immediate");
    adapter.tick_until(|t| t.get("completion_rate") == Some(&0.0));
    std::thread::sleep(Duration::from_secs(2));
    cluster.up();
    // Samples go on through the outage, and jobs complete again once the server is back.
    adapter.tick_until(|t| t.get("completion_rate").is_some_and(|&r| r > 0.0));
    let (status, logs) = adapter.terminate();
    assert!(status.success(), "{logs}");
    assert!(logs.contains("an enqueue failed, trying again"), "{logs}");
}

#[test]
fn a_bad_setting_stops_it_before_it_starts_naming_the_variable() {
    let output = Command::new(env!("CARGO_BIN_EXE_cairn-adapter"))
        .env_clear()
        .env("DATABASE_URL", "/nonexistent/never-opened.db")
        .env("WORKER_COUNT", "lots")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("WORKER_COUNT: must be a whole number from 1 to 10000, got \"lots\""),
        "{stderr}"
    );
    assert!(
        output.stdout.is_empty(),
        "nothing on standard output before the settings are good"
    );
}
