//! Enqueue workloads: batches of jobs per call from a few callers, and one job per call from many tasks. Each
//! returns the wall time and one latency sample per call.

use cairn::Jobs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cairn::{Push, Queue};
use tokio::task::JoinSet;

use crate::BenchResult;

/// The job every scenario pushes: a no-op with a little data.
pub fn job(i: u64) -> Push {
    Push::new("bench.noop").data(serde_json::json!({ "i": i }))
}

/// `callers` tasks each call `enqueue_batch` with `per_call` jobs until `total` jobs are in.
pub async fn batches(
    queue: &Queue,
    total: u64,
    per_call: u64,
    callers: usize,
) -> BenchResult<(Duration, Vec<Duration>)> {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..callers {
        let queue = queue.clone();
        let next = next.clone();
        tasks.spawn(async move {
            let mut samples = Vec::new();
            loop {
                let first = next.fetch_add(per_call, Ordering::Relaxed);
                if first >= total {
                    return Ok::<_, cairn::Error>(samples);
                }
                let jobs = (first..(first + per_call).min(total)).map(job).collect();
                let t = Instant::now();
                queue.enqueue_batch(jobs).await?;
                samples.push(t.elapsed());
            }
        });
    }
    let samples = collect(tasks).await?;
    Ok((start.elapsed(), samples))
}

/// `tasks` tasks each call `enqueue` with one job at a time until `total` jobs are in.
pub async fn singles(
    queue: &Queue,
    total: u64,
    tasks: usize,
) -> BenchResult<(Duration, Vec<Duration>)> {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..tasks {
        let queue = queue.clone();
        let next = next.clone();
        set.spawn(async move {
            let mut samples = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<_, cairn::Error>(samples);
                }
                let t = Instant::now();
                queue.enqueue(job(i)).await?;
                samples.push(t.elapsed());
            }
        });
    }
    let samples = collect(set).await?;
    Ok((start.elapsed(), samples))
}

/// Enqueues `count` jobs made by `make`, 1,000 per call, untimed: the setup of the drain scenarios.
pub async fn fill(queue: &Queue, count: u64, make: impl Fn(u64) -> Push) -> BenchResult<()> {
    let mut first = 0;
    while first < count {
        let last = (first + 1000).min(count);
        queue
            .enqueue_batch((first..last).map(&make).collect())
            .await?;
        first = last;
    }
    Ok(())
}

async fn collect(mut tasks: JoinSet<cairn::Result<Vec<Duration>>>) -> BenchResult<Vec<Duration>> {
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done??);
    }
    Ok(all)
}
