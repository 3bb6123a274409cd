//! The workers scenario: jobs through enqueue, dequeue and finish as a fleet of `cairn::Worker`s moves them. Each of
//! `--clients` clients runs a producer, which enqueues the next `--batch-size` jobs per call until all are in, and a
//! `Worker` of `--in-flight` slots with a handler that does nothing. The worker takes as many jobs per dequeue as it
//! has free slots and reports the jobs that end together in one call (`POST /v1/finish`), as it does for any
//! application; so a job costs a share of a few calls, where the throughput scenario makes three for each.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use cairn::{Backend, Worker};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::report::ScenarioReport;
use super::stats::Samples;
use super::target::Target;
use super::{batch, drain, progress};

/// The queue this scenario uses.
pub const QUEUE: &str = "bench-workers";

/// The rate workers should see: issue 8's target for three nodes on PostgreSQL.
pub const GOAL_JOBS_PER_SECOND: f64 = 10_000.0;

/// How long the workers have, once every job has run, to report the last ones.
const STOP_DEADLINE: Duration = Duration::from_secs(60);

/// Runs `jobs` jobs through a producer and a worker per handle.
///
/// # Errors
/// A failed enqueue, a worker that would not start, or jobs that did not all finish.
pub async fn run<T: Target + Backend>(
    handles: &[T],
    slots: usize,
    jobs: u64,
    batch_size: usize,
    shape: batch::Shape,
    steps: u32,
    over_http: bool,
) -> anyhow::Result<ScenarioReport> {
    let leftovers = drain::drain(handles, QUEUE).await?;
    if shape.batch_groups {
        drain::drain(handles, batch::CALLBACKS).await?;
    }
    let bar = progress::bar("workers", jobs);
    let ran = Arc::new(AtomicU64::new(0));
    let all_ran = Arc::new(Notify::new());
    let next = Arc::new(AtomicU64::new(0));
    let slots = u32::try_from(slots).context("--in-flight is too large")?;
    let start = Instant::now();
    let mut workers = Vec::with_capacity(handles.len());
    for (i, handle) in handles.iter().enumerate() {
        let (ran, all_ran, bar) = (ran.clone(), all_ran.clone(), bar.clone());
        let worker = Worker::builder(handle, format!("bench-worker-{i}"))
            .queue(QUEUE)
            .max_concurrency(slots)
            // Take more once three quarters of the slots are free, so that jobs come in batches rather than one at a
            // time (half gave 6 % less on PostgreSQL with three nodes: smaller dequeues, more of them).
            .min_concurrency(slots.div_ceil(4))
            .handler("bench.noop", move |job| {
                let (ran, all_ran, bar) = (ran.clone(), all_ran.clone(), bar.clone());
                async move {
                    // `--steps`: each a recorded result, as a durable handler's would be.
                    for n in 0..steps {
                        job.step("bench", || async move { Ok::<_, cairn::JobError>(n) })
                            .await?;
                    }
                    bar.inc(1);
                    if ran.fetch_add(1, Ordering::SeqCst) + 1 == jobs {
                        all_ran.notify_one();
                    }
                    Ok(())
                }
            })
            .start()
            .context("starting a worker")?;
        workers.push(worker);
    }
    let mut producers = JoinSet::new();
    for handle in handles {
        producers.spawn(batch::enqueue_batches(
            handle.clone(),
            QUEUE,
            jobs,
            batch_size as u64,
            next.clone(),
            None,
            shape,
        ));
    }
    let mut samples = Samples::default();
    while let Some(done) = producers.join_next().await {
        samples.merge(done.context("a producer stopped")??);
    }
    all_ran.notified().await;
    let mut finished = 0;
    for worker in workers {
        let report = worker
            .stop(STOP_DEADLINE)
            .await
            .context("stopping a worker")?;
        finished += report.finished;
    }
    let elapsed = start.elapsed();
    bar.finish_and_clear();
    anyhow::ensure!(
        finished == jobs,
        "the workers ran {jobs} jobs but reported {finished} finished"
    );
    let batches = jobs.div_ceil(batch_size as u64);
    if shape.batch_groups {
        // Each batch's callback, made once by the commit that ended its last job.
        let callbacks = drain::drain(handles, batch::CALLBACKS).await?;
        anyhow::ensure!(
            callbacks == batches,
            "{batches} batches made {callbacks} callbacks, not one each"
        );
    }

    let clients = handles.len();
    let mut spread = shape
        .keys
        .map(|keys| format!(", the jobs spread over {keys} concurrency keys taking turns"))
        .unwrap_or_default();
    if shape.batch_groups {
        spread.push_str(&format!(
            ", each call's jobs a batch whose callback was made once ({batches} batches)"
        ));
    }
    if steps > 0 {
        spread.push_str(&format!(", the handler recording {steps} steps per job"));
    }
    Ok(ScenarioReport::new(
        "workers",
        format!(
            "{clients} producers enqueueing {batch_size} jobs per call, and {clients} cairn::Workers of {slots} \
             slots running a handler that does nothing (each takes as many jobs per dequeue as it has free slots, \
             and finishes those that end together in one call){spread}"
        ),
        finished,
        elapsed,
    )
    .with_latencies(samples.into_latencies())
    .with_rate_goal(over_http, GOAL_JOBS_PER_SECOND)
    .with_leftovers(leftovers, QUEUE))
}
