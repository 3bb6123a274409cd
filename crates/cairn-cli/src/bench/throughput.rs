//! The throughput scenario: jobs through enqueue, dequeue and finish. Each of `--clients` clients loops: enqueue one
//! job, dequeue one job (whichever is ready, waiting if none is), finish it. So every job costs three requests and,
//! with the default `--in-flight 1`, exactly `--clients` requests are in flight at any time, which is what "N
//! concurrent clients" means for a server that serves one request per connection at a time. `--in-flight N` runs N
//! such loops per client, sharing its connection pool, like a worker with N slots.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use cairn::Dequeue;
use indicatif::ProgressBar;
use tokio::task::JoinSet;

use super::report::ScenarioReport;
use super::stats::Samples;
use super::target::Target;
use super::{drain, job, progress};

/// The queue this scenario uses.
pub const QUEUE: &str = "bench-throughput";

/// The throughput a server should reach: the target this scenario is compared against.
pub const GOAL_JOBS_PER_SECOND: f64 = 20_000.0;

/// How long a client's dequeue waits. Every dequeue follows its client's own enqueue, so a job is always on its
/// way; a wait this long ending empty means something is wrong.
const DEQUEUE_WAIT: Duration = Duration::from_secs(10);

/// Runs `jobs` jobs through one client per handle.
///
/// # Errors
/// A failed request, or a dequeue that waited [`DEQUEUE_WAIT`] without a job.
pub async fn run<T: Target>(
    handles: &[T],
    in_flight: usize,
    jobs: u64,
    over_http: bool,
) -> anyhow::Result<ScenarioReport> {
    let leftovers = drain::drain(handles, QUEUE).await?;
    let bar = progress::bar("throughput", jobs);
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for (i, handle) in handles.iter().enumerate() {
        for j in 0..in_flight {
            tasks.spawn(client_loop(
                handle.clone(),
                format!("bench-{i}-{j}"),
                jobs,
                next.clone(),
                bar.clone(),
            ));
        }
    }
    let mut samples = Samples::default();
    let mut finished = 0;
    while let Some(done) = tasks.join_next().await {
        let (client_finished, client_samples) = done.context("a throughput client stopped")??;
        finished += client_finished;
        samples.merge(client_samples);
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();

    let clients = handles.len();
    let loops = if in_flight == 1 {
        "each looping".to_owned()
    } else {
        format!("each running {in_flight} loops of")
    };
    Ok(ScenarioReport::new(
        "throughput",
        format!(
            "{clients} clients, {loops}: enqueue one job, dequeue one job (waiting if none is ready), finish it; \
             3 requests per job, {} in flight",
            clients * in_flight
        ),
        finished,
        elapsed,
    )
    .with_latencies(samples.into_latencies())
    .with_rate_goal(over_http, GOAL_JOBS_PER_SECOND)
    .with_leftovers(leftovers, QUEUE))
}

/// One client: until `total` jobs are enqueued, enqueue one, take one, finish it. Returns how many jobs it
/// finished, and the latency of each call.
async fn client_loop<T: Target>(
    target: T,
    worker: String,
    total: u64,
    next: Arc<AtomicU64>,
    bar: ProgressBar,
) -> cairn::Result<(u64, Samples)> {
    let mut samples = Samples::default();
    let mut finished = 0;
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= total {
            return Ok((finished, samples));
        }
        let t = Instant::now();
        target.enqueue(job(QUEUE, i)).await?;
        samples.record("enqueue", t.elapsed());

        let t = Instant::now();
        let request = Dequeue::new(worker.as_str())
            .queue(QUEUE)
            .wait(DEQUEUE_WAIT);
        let claimed = target.dequeue(request).await?;
        samples.record("dequeue", t.elapsed());
        let claimed = claimed.into_iter().next().ok_or_else(|| {
            cairn::Error::from_parts(
                cairn::ErrorKind::Unavailable,
                None,
                format!("a dequeue waited {DEQUEUE_WAIT:?} without a job, though one was enqueued just before"),
            )
        })?;

        let t = Instant::now();
        target.finish(&claimed.lease).await?;
        samples.record("finish", t.elapsed());
        finished += 1;
        bar.inc(1);
    }
}
