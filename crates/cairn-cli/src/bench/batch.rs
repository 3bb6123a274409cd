//! The batch scenario: `--jobs` jobs enqueued in calls of `--batch-size` jobs, from `--clients` clients at once
//! (with `--in-flight` calls in flight each), each taking the next batch until all are in. Afterwards the jobs are
//! taken and finished (not measured), so that they do not stay queued on the server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context;
use cairn::{CreateBatch, Push};
use indicatif::ProgressBar;
use tokio::task::JoinSet;

use super::report::{ScenarioReport, human};
use super::stats::Samples;
use super::target::Target;
use super::{drain, keyed_job, progress};

/// The queue this scenario uses.
pub const QUEUE: &str = "bench-batch";

/// The batch enqueue rate a server should reach: the target this scenario is compared against.
pub const GOAL_JOBS_PER_SECOND: f64 = 150_000.0;

/// Enqueues `jobs` jobs in batches of `batch_size`, one client per handle.
///
/// # Errors
/// A failed request.
pub async fn run<T: Target>(
    handles: &[T],
    in_flight: usize,
    jobs: u64,
    batch_size: usize,
    over_http: bool,
) -> anyhow::Result<ScenarioReport> {
    let leftovers = drain::drain(handles, QUEUE).await?;
    let bar = progress::bar("batch", jobs);
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for handle in handles {
        for _ in 0..in_flight {
            tasks.spawn(enqueue_batches(
                handle.clone(),
                QUEUE,
                jobs,
                batch_size as u64,
                next.clone(),
                Some(bar.clone()),
                Shape::default(),
            ));
        }
    }
    let mut samples = Samples::default();
    while let Some(done) = tasks.join_next().await {
        samples.merge(done.context("a batch client stopped")??);
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();

    let clients = handles.len();
    let mut report = ScenarioReport::new(
        "batch",
        format!(
            "{clients} clients, each enqueueing batches of {batch_size} jobs, {in_flight} call(s) in flight per \
             client"
        ),
        jobs,
        elapsed,
    )
    .with_latencies(samples.into_latencies())
    .with_rate_goal(over_http, GOAL_JOBS_PER_SECOND)
    .with_leftovers(leftovers, QUEUE);
    let cleanup = Instant::now();
    let drained = drain::drain(handles, QUEUE).await?;
    report.notes.push(format!(
        "afterwards the {drained} jobs were dequeued and finished to empty {QUEUE} (not measured, {})",
        human(cleanup.elapsed())
    ));
    Ok(report)
}

/// What the jobs a producer pushes are: spread over concurrency keys, and pushed as batches with a callback.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Shape {
    /// Spread over this many concurrency keys.
    pub keys: Option<u64>,
    /// Each call's jobs a batch (`cairn batch`) whose `on_complete` goes to [`CALLBACKS`].
    pub batch_groups: bool,
}

/// The queue the batches' callbacks go to, which no bench worker takes from.
pub(super) const CALLBACKS: &str = "bench-callbacks";

/// One client: takes the next `batch_size` job numbers until `total` are taken, enqueueing each batch into `queue`
/// in one call (and counting it on `bar`, if any), shaped as `shape` says. Returns the latency of each call.
pub(super) async fn enqueue_batches<T: Target>(
    target: T,
    queue: &'static str,
    total: u64,
    batch_size: u64,
    next: Arc<AtomicU64>,
    bar: Option<ProgressBar>,
    shape: Shape,
) -> cairn::Result<Samples> {
    let mut samples = Samples::default();
    loop {
        let first = next.fetch_add(batch_size, Ordering::Relaxed);
        if first >= total {
            return Ok(samples);
        }
        let last = (first + batch_size).min(total);
        let jobs = (first..last)
            .map(|i| keyed_job(queue, i, shape.keys))
            .collect();
        let t = Instant::now();
        if shape.batch_groups {
            let callback = Push::new("bench.batch-complete").queue(CALLBACKS);
            target
                .create_batch(CreateBatch::new(jobs).on_complete(callback))
                .await?;
            samples.record("create_batch", t.elapsed());
        } else {
            target.enqueue_batch(jobs).await?;
            samples.record("enqueue_batch", t.elapsed());
        }
        if let Some(bar) = &bar {
            bar.inc(last - first);
        }
    }
}
