//! What the adapter writes on standard output, one JSON object per line (the contract's "JSONL out"): a
//! descriptor at startup, then every `SAMPLE_EVERY_S` one record per metric. Logs go to standard error.
//!
//! Ticks fall on wall-clock multiples of the period (a run sampled every 5 s samples at :00, :05, …), so that the
//! samples of systems started at different moments line up; each record's `t` is its tick.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::meter::{LATENCY_WINDOW, Meter, epoch_micros};

/// The system's name in the benchmark.
pub const SYSTEM: &str = "cairn";

/// The tables the harness watches for bloat (`pgstattuple`), the same list as `adapter.json`.
pub const EVENT_TABLES: [&str; 6] = [
    "public.jobs",
    "public.job_attempts",
    "public.job_tags",
    "public.activity",
    "public.stats_minute",
    "public.stats_histogram",
];

/// The indexes it watches: the ready jobs' (claims walk it) and the finished jobs' (retention walks it).
pub const EVENT_INDEXES: [&str; 3] = [
    "public.jobs_ready",
    "public.jobs_finished",
    "public.jobs_pkey",
];

/// Writes one record and flushes it (standard output is line-buffered, and the harness tails it live).
fn emit(record: &Value) {
    println!("{record}");
}

/// The startup record.
pub fn descriptor(instance: u32, db_name: &str, schema_version: &str) -> Value {
    json!({
        "kind": "descriptor",
        "system": SYSTEM,
        "instance_id": instance,
        "event_tables": EVENT_TABLES,
        "event_indexes": EVENT_INDEXES,
        "extensions": [],
        "version": concat!("cairn ", env!("CARGO_PKG_VERSION")),
        "schema_version": schema_version,
        "db_name": db_name,
        "started_at": iso_millis(epoch_micros() / 1000),
    })
}

pub fn emit_descriptor(instance: u32, db_name: &str, schema_version: &str) {
    emit(&descriptor(instance, db_name, schema_version));
}

/// Samples every `every` until stopped.
pub async fn sample(meter: Arc<Meter>, every: Duration, instance: u32, stop: Arc<AtomicBool>) {
    let period_us = u64::try_from(every.as_micros()).unwrap_or(u64::MAX).max(1);
    let mut tick_us = (epoch_micros() / period_us + 1) * period_us;
    let mut last = Instant::now();
    let (mut last_enqueued, mut last_completed) = (0, 0);
    loop {
        tokio::time::sleep(Duration::from_micros(
            tick_us.saturating_sub(epoch_micros()),
        ))
        .await;
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let seconds = now.duration_since(last).as_secs_f64().max(1e-6);
        let enqueued = meter.enqueued.load(Ordering::SeqCst);
        let completed = meter.completed.load(Ordering::SeqCst);
        let claims = {
            let mut window = meter.claims();
            let p = window.percentiles();
            window.next_period();
            p
        };
        let t = iso_millis(tick_us / 1000);
        let record = |metric: &str, value: f64, window_s: f64| {
            emit(&json!({
                "t": t,
                "system": SYSTEM,
                "instance_id": instance,
                "kind": "adapter",
                "subject_kind": "adapter",
                "subject": "",
                "metric": metric,
                "value": value,
                "window_s": window_s,
            }));
        };
        let every_s = every.as_secs_f64();
        if let Some(p) = claims {
            let window_s = LATENCY_WINDOW.as_secs_f64();
            record("claim_p50_ms", p.p50_ms, window_s);
            record("claim_p95_ms", p.p95_ms, window_s);
            record("claim_p99_ms", p.p99_ms, window_s);
        }
        record(
            "enqueue_rate",
            (enqueued - last_enqueued) as f64 / seconds,
            every_s,
        );
        record(
            "completion_rate",
            (completed - last_completed) as f64 / seconds,
            every_s,
        );
        if let Some(depth) = meter.db_depth() {
            record("queue_depth", depth as f64, 0.0);
        }
        (last, last_enqueued, last_completed) = (now, enqueued, completed);
        // The next multiple of the period: a tick that ran late is skipped, not bunched, and a clock stepped back
        // never repeats one.
        tick_us = ((epoch_micros() / period_us + 1) * period_us).max(tick_us + period_us);
    }
}

/// `2026-04-17T09:00:10.000Z`: UTC, to the millisecond, as the contract writes times.
fn iso_millis(epoch_ms: u64) -> String {
    let ms = i64::try_from(epoch_ms).unwrap_or(i64::MAX);
    let at = jiff::Timestamp::from_millisecond(ms).unwrap_or(jiff::Timestamp::MAX);
    format!(
        "{}.{:03}Z",
        at.strftime("%Y-%m-%dT%H:%M:%S"),
        at.subsec_millisecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_to_the_millisecond() {
        assert_eq!(iso_millis(1_776_416_410_000), "2026-04-17T09:00:10.000Z");
        assert_eq!(iso_millis(1_776_416_410_042), "2026-04-17T09:00:10.042Z");
    }

    #[test]
    fn the_descriptor_names_what_the_manifest_names() {
        let manifest: Value =
            serde_json::from_str(include_str!("../adapter.json")).expect("adapter.json is JSON");
        let d = descriptor(0, "cairn_bench", "7");
        assert_eq!(d["system"], manifest["system"]);
        assert_eq!(d["event_tables"], manifest["event_tables"]);
        assert_eq!(d["event_indexes"], manifest["event_indexes"]);
        assert_eq!(d["extensions"], manifest["extensions"]);
        assert_eq!(d["kind"], "descriptor");
    }
}
