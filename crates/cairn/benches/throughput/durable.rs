//! Durable work one piece at a time: one caller enqueueing one job per call, and a `cairn::Worker` of a few slots
//! running no-op handlers. What each costs is a commit and its fsync, so they are measured against the disk's own
//! rate (`disk::fdatasync_loop`).

use cairn::Jobs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cairn::{Queue, Worker};

use crate::BenchResult;
use crate::enqueue::job;

/// One caller enqueues `total` jobs, one per call, each call waiting for the last. Returns the wall time and each
/// call's latency.
pub async fn one_at_a_time(queue: &Queue, total: u64) -> BenchResult<(Duration, Vec<Duration>)> {
    let mut samples = Vec::with_capacity(total as usize);
    let start = Instant::now();
    for i in 0..total {
        let t = Instant::now();
        queue.enqueue(job(i)).await?;
        samples.push(t.elapsed());
    }
    Ok((start.elapsed(), samples))
}

/// A worker of `slots` slots runs the `total` jobs already queued with a no-op handler; the time is from its start
/// until it has stopped with every job finished (its finishes acknowledged).
pub async fn worker_drain(queue: &Queue, total: u64, slots: u32) -> BenchResult<Duration> {
    let handled = Arc::new(AtomicU64::new(0));
    let all_handled = Arc::new(tokio::sync::Notify::new());
    let start = Instant::now();
    let worker = {
        let (handled, all_handled) = (handled.clone(), all_handled.clone());
        Worker::builder(queue, "bench")
            .max_concurrency(slots)
            .handler("bench.noop", move |_job| {
                let (handled, all_handled) = (handled.clone(), all_handled.clone());
                async move {
                    if handled.fetch_add(1, Ordering::Relaxed) + 1 == total {
                        all_handled.notify_one();
                    }
                    Ok(())
                }
            })
            .start()?
    };
    all_handled.notified().await;
    // Stopping waits for the finishes still in flight.
    let report = worker.stop(Duration::from_secs(30)).await?;
    let elapsed = start.elapsed();
    if report.finished != total {
        return Err(format!("the worker finished {} of {total} jobs", report.finished).into());
    }
    Ok(elapsed)
}
