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

/// What the handler does besides nothing, as a durable workflow's would.
#[derive(Debug, Clone, Copy, Default)]
pub struct Durable {
    /// Steps each job records (`--steps`).
    pub steps: u32,
    /// Jobs that sleep or wait for a signal an hour in the same queue and workers, suspended before the clock
    /// starts (`--waiting`).
    pub waiting: u64,
}

/// The name of the jobs that sleep or wait beside the measured ones.
const WAITER: &str = "bench.waiter";

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
    durable: Durable,
    over_http: bool,
) -> anyhow::Result<ScenarioReport> {
    let Durable { steps, waiting } = durable;
    let leftovers = drain::drain(handles, QUEUE).await?;
    if shape.batch_groups {
        drain::drain(handles, batch::CALLBACKS).await?;
    }
    let bar = progress::bar("workers", jobs);
    let ran = Arc::new(AtomicU64::new(0));
    let all_ran = Arc::new(Notify::new());
    let next = Arc::new(AtomicU64::new(0));
    let slots = u32::try_from(slots).context("--in-flight is too large")?;
    let suspended = Arc::new(AtomicU64::new(0));
    let all_suspended = Arc::new(Notify::new());
    let mut workers = Vec::with_capacity(handles.len());
    for (i, handle) in handles.iter().enumerate() {
        let (ran, all_ran, bar) = (ran.clone(), all_ran.clone(), bar.clone());
        let (suspended, all_suspended) = (suspended.clone(), all_suspended.clone());
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
            // `--waiting`: half sleep an hour, half wait that long for a signal nobody sends; each gives its slot
            // back at once.
            .handler(WAITER, move |job| {
                let (suspended, all_suspended) = (suspended.clone(), all_suspended.clone());
                async move {
                    let hour = Duration::from_secs(3600);
                    let outcome = if job.id().0 % 2 == 0 {
                        job.sleep("nap", hour).await
                    } else {
                        let key = format!("bench-waiter-{}", job.id());
                        job.wait_for_signal::<serde_json::Value>("approval", &key, hour)
                            .await
                            .map(drop)
                    };
                    if suspended.fetch_add(1, Ordering::SeqCst) + 1 == waiting {
                        all_suspended.notify_one();
                    }
                    outcome
                }
            })
            .start()
            .context("starting a worker")?;
        workers.push(worker);
    }
    if waiting > 0 {
        let waiters: Vec<cairn::Push> = (0..waiting)
            .map(|_| cairn::Push::new(WAITER).queue(QUEUE))
            .collect();
        for chunk in waiters.chunks(batch_size.max(1)) {
            handles[0]
                .enqueue_batch(chunk.to_vec())
                .await
                .context("pushing the waiting jobs")?;
        }
        all_suspended.notified().await;
    }
    let start = Instant::now();
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
    let elapsed = start.elapsed();
    let mut finished = 0;
    let mut slept = 0;
    for worker in workers {
        let report = worker
            .stop(STOP_DEADLINE)
            .await
            .context("stopping a worker")?;
        finished += report.finished;
        slept += report.suspended;
    }
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
    if waiting > 0 {
        anyhow::ensure!(
            slept == waiting,
            "{waiting} jobs were to sleep or wait, and the workers report {slept} suspended"
        );
        spread.push_str(&format!(
            ", beside {waiting} jobs of the same queue and workers sleeping or waiting for a signal an hour"
        ));
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
