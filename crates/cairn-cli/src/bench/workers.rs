//! The workers scenario: jobs through enqueue, dequeue and finish as a worker fleet moves them. Each of `--clients`
//! clients runs a producer, which enqueues the next `--batch-size` jobs per call until all are in, and a worker
//! with `--in-flight` slots, which takes up to that many jobs per dequeue (waiting when none is ready) and reports
//! them done with one call (`POST /v1/finish`). So a job costs a share of three calls, where the throughput
//! scenario spends three calls on each: this is the rate a fleet of workers sees, and what the queue itself costs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use cairn::Dequeue;
use indicatif::ProgressBar;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use super::report::ScenarioReport;
use super::stats::Samples;
use super::target::Target;
use super::{drain, job, progress};

/// The queue this scenario uses.
pub const QUEUE: &str = "bench-workers";

/// The rate workers should see: issue 8's target for three nodes on PostgreSQL.
pub const GOAL_JOBS_PER_SECOND: f64 = 10_000.0;

/// How long a worker's dequeue waits for a job. Short, so that workers notice soon when every job is done.
const DEQUEUE_WAIT: Duration = Duration::from_secs(1);

/// What the producers and workers share: how many jobs were handed out to enqueue and finished, and when the last
/// one finished.
struct Progress {
    total: u64,
    next: AtomicU64,
    finished: AtomicU64,
    done_at: Mutex<Option<Instant>>,
    bar: ProgressBar,
}

/// Runs `jobs` jobs through a producer and a worker per handle.
///
/// # Errors
/// A failed request.
pub async fn run<T: Target>(
    handles: &[T],
    slots: usize,
    jobs: u64,
    batch_size: usize,
    over_http: bool,
) -> anyhow::Result<ScenarioReport> {
    let leftovers = drain::drain(handles, QUEUE).await?;
    let progress = Arc::new(Progress {
        total: jobs,
        next: AtomicU64::new(0),
        finished: AtomicU64::new(0),
        done_at: Mutex::new(None),
        bar: progress::bar("workers", jobs),
    });
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for (i, handle) in handles.iter().enumerate() {
        tasks.spawn(produce(handle.clone(), batch_size as u64, progress.clone()));
        tasks.spawn(work(
            handle.clone(),
            format!("bench-worker-{i}"),
            slots as u32,
            progress.clone(),
        ));
    }
    let mut samples = Samples::default();
    while let Some(done) = tasks.join_next().await {
        samples.merge(done.context("a producer or worker stopped")??);
    }
    let finished = progress.finished.load(Ordering::SeqCst);
    let elapsed = progress
        .done_at
        .lock()
        .await
        .unwrap_or_else(Instant::now)
        .duration_since(start);
    progress.bar.finish_and_clear();

    let clients = handles.len();
    Ok(ScenarioReport::new(
        "workers",
        format!(
            "{clients} producers enqueueing {batch_size} jobs per call, and {clients} workers of {slots} slots, \
             each taking up to {slots} jobs per dequeue and finishing them with one call"
        ),
        finished,
        elapsed,
    )
    .with_latencies(samples.into_latencies())
    .with_rate_goal(over_http, GOAL_JOBS_PER_SECOND)
    .with_leftovers(leftovers, QUEUE))
}

/// A producer: enqueues the next batch until every job is handed out.
async fn produce<T: Target>(
    target: T,
    batch_size: u64,
    progress: Arc<Progress>,
) -> cairn::Result<Samples> {
    let mut samples = Samples::default();
    loop {
        let first = progress.next.fetch_add(batch_size, Ordering::Relaxed);
        if first >= progress.total {
            return Ok(samples);
        }
        let last = (first + batch_size).min(progress.total);
        let batch = (first..last).map(|i| job(QUEUE, i)).collect();
        let t = Instant::now();
        target.enqueue_batch(batch).await?;
        samples.record("enqueue", t.elapsed());
    }
}

/// A worker: takes up to `slots` jobs at a time and reports them done together, until every job is finished.
async fn work<T: Target>(
    target: T,
    worker: String,
    slots: u32,
    progress: Arc<Progress>,
) -> cairn::Result<Samples> {
    let mut samples = Samples::default();
    while progress.finished.load(Ordering::SeqCst) < progress.total {
        let request = Dequeue::new(worker.as_str())
            .queue(QUEUE)
            .limit(slots)
            .wait(DEQUEUE_WAIT);
        let t = Instant::now();
        let claimed = target.dequeue(request).await?;
        samples.record("dequeue", t.elapsed());
        if claimed.is_empty() {
            continue;
        }
        let leases: Vec<cairn::Lease> = claimed.into_iter().map(|c| c.lease).collect();
        let t = Instant::now();
        for answer in target.finish_many(&leases).await? {
            answer?;
        }
        samples.record("finish", t.elapsed());
        let count = leases.len() as u64;
        progress.bar.inc(count);
        if progress.finished.fetch_add(count, Ordering::SeqCst) + count >= progress.total {
            progress
                .done_at
                .lock()
                .await
                .get_or_insert_with(Instant::now);
        }
    }
    Ok(samples)
}
