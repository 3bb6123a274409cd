//! The due scenario: how late timed work comes under load. While every client runs the throughput loop (enqueue
//! one job, take it, finish it) as fast as it can, a maker gives `--samples` jobs a due time, one every
//! [`PACE`], by three kinds of path, each a different part of the timed work:
//! - a delayed push: the job becomes ready at its `run_at`;
//! - a lease that expires: the job is taken and abandoned, and its retry (with no backoff) is ready when the lease
//!   runs out;
//! - a worker's retry with a delay: the job is taken and sent back to run again later.
//!
//! Delays are spread from half a second to 7.5 s, past a term of PostgreSQL's lead of the timed work (5 s). A
//! collector waits in long polls for the jobs, as a worker would, and the sample is how late each came: the time its
//! dequeue returned less the time it was due. With `--also`, the maker and the collector use the second server, so
//! that the due times are made on a node that does not lead the timed work (the first server started leads it).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use cairn::{Dequeue, JobId, Push, RetryPolicy};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::report::{Goal, ScenarioReport};
use super::stats::Samples;
use super::target::Target;
use super::{drain, job, progress};

/// The queue the due jobs come due in.
pub const QUEUE: &str = "bench-due";

/// The queue of the traffic beside them.
pub const TRAFFIC_QUEUE: &str = "bench-due-traffic";

/// How late a job may come at p99: the target this scenario is compared against.
pub const GOAL_P99: Duration = Duration::from_secs(1);

/// Time between two due times made.
const PACE: Duration = Duration::from_millis(30);

/// The shortest delay, and the spread of the others above it.
const MIN_DELAY_MS: u64 = 500;
const DELAY_SPREAD_MS: u64 = 7_000;

/// How long the collector waits after the last due time for the jobs still to come.
const GRACE: Duration = Duration::from_secs(30);

/// How long each of the collector's long polls waits, as a `cairn::Worker`'s does: a wait that ran out would wake
/// the writer, and a short one every second would hide a writer that no longer wakes for its due times.
const COLLECTOR_WAIT: Duration = Duration::from_secs(30);

/// The kinds of due time, as the job's data names them.
const KINDS: [&str; 3] = ["delayed push", "lease expiry", "retry delay"];

/// Runs the scenario: `traffic` clients loop, `maker` makes `samples` due times and collects them.
///
/// # Errors
/// A failed request, or due jobs that did not come within [`GRACE`] of the last one's time.
pub async fn run<T: Target>(
    traffic: &[T],
    in_flight: usize,
    maker: &T,
    samples: usize,
    over_http: bool,
) -> anyhow::Result<ScenarioReport> {
    let leftovers = drain::drain(std::slice::from_ref(maker), QUEUE).await?
        + drain::drain(traffic, TRAFFIC_QUEUE).await?;
    let (stop_tx, stop) = watch::channel(false);
    let mut load = JoinSet::new();
    for (i, handle) in traffic.iter().enumerate() {
        for j in 0..in_flight {
            load.spawn(traffic_loop(
                handle.clone(),
                format!("bench-due-{i}-{j}"),
                stop.clone(),
            ));
        }
    }
    let collector = tokio::spawn(collect(maker.clone(), samples));
    let start = Instant::now();
    let made = make(maker, samples).await;
    let collected = match made {
        Ok(()) => collector.await.context("the collector stopped")?,
        Err(e) => {
            collector.abort();
            Err(e)
        }
    };
    let elapsed = start.elapsed();
    let _ = stop_tx.send(true);
    let mut traffic_jobs = 0;
    while let Some(done) = load.join_next().await {
        traffic_jobs += done.context("a traffic loop stopped")??;
    }
    let late = collected?;

    let mut report = ScenarioReport::new(
        "due",
        format!(
            "{} clients x {in_flight} loops of enqueue, take, finish as fast as they can ({traffic_jobs} jobs); \
             meanwhile one due time made every {}ms (delayed pushes, lease expiries, retries with a delay, in turn; \
             delays of 0.5-7.5 s) and taken by a worker waiting in long polls; lateness is when its dequeue \
             returned less when it was due",
            traffic.len(),
            PACE.as_millis(),
        ),
        samples as u64,
        elapsed,
    )
    .with_latencies(late.into_latencies())
    .latency_only();
    let p99 = report.latency("all").map(|l| l.percentile(99.0));
    report.goal = Some(Goal {
        text: format!("lateness p99 < {}s", GOAL_P99.as_secs()),
        met: p99.is_some_and(|p99| p99 < GOAL_P99),
    });
    if !over_http {
        report
            .notes
            .push("embedded: no HTTP between the worker and the queue".to_owned());
    }
    Ok(report.with_leftovers(leftovers, QUEUE))
}

/// The delay of due time `i`: spread over the range, the same for every run.
fn delay(i: usize) -> Duration {
    Duration::from_millis(MIN_DELAY_MS + (i as u64 * 7_919) % DELAY_SPREAD_MS)
}

/// Makes `samples` due times, one every [`PACE`], the kinds in turn.
async fn make<T: Target>(maker: &T, samples: usize) -> anyhow::Result<()> {
    let bar = progress::bar("due", samples as u64);
    let mut pace = tokio::time::interval(PACE);
    for i in 0..samples {
        pace.tick().await;
        let kind = i % KINDS.len();
        let delay = delay(i);
        let push = Push::new("bench.due")
            .queue(QUEUE)
            .data(json!({ "kind": kind, "delay_ms": delay.as_millis() as u64 }));
        let push = match kind {
            0 => push.delay(delay),
            // Taken by the collector, which abandons it; its retry is due when the lease runs out.
            1 => push.lease_timeout(delay).retry(RetryPolicy::immediate(2)),
            // Taken by the collector, which sends it back to run after the delay.
            _ => push.retry(RetryPolicy::immediate(2)),
        };
        maker.enqueue(push).await?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Takes the due jobs as they come: a lease's or a retry's first attempt is abandoned or sent back, and every other
/// job's lateness recorded, until `samples` are recorded or [`GRACE`] passes with none coming.
async fn collect<T: Target>(target: T, samples: usize) -> anyhow::Result<Samples> {
    let mut late = Samples::default();
    // When the leases the collector took of the lease kind's jobs, and abandoned, run out.
    let mut leases: HashMap<JobId, Timestamp> = HashMap::new();
    let mut recorded = 0;
    let mut last_progress = Instant::now();
    while recorded < samples {
        if last_progress.elapsed() > GRACE {
            anyhow::bail!(
                "{} due jobs had not come {GRACE:?} after they were due",
                samples - recorded
            );
        }
        let taken = target
            .dequeue(
                Dequeue::new("bench-due-collector")
                    .queue(QUEUE)
                    .limit(100)
                    .wait(COLLECTOR_WAIT),
            )
            .await?;
        let came = Timestamp::now();
        for claimed in taken {
            last_progress = Instant::now();
            let kind = claimed.job.data["kind"].as_u64().unwrap_or(0) as usize;
            let delay = Duration::from_millis(claimed.job.data["delay_ms"].as_u64().unwrap_or(0));
            let first = claimed.job.attempt <= 1;
            let due_at = match (kind, first) {
                // Abandoned: the lease runs out by itself, and the retry is due then.
                (1, true) => {
                    leases.insert(claimed.job.id, claimed.lease.expires_at);
                    continue;
                }
                (1, false) => leases.remove(&claimed.job.id),
                (2, true) => {
                    target.retry(&claimed.lease, delay).await?;
                    continue;
                }
                _ => Some(claimed.job.run_at),
            };
            let due_at = due_at.context("a lease's second attempt came before its first")?;
            let lateness = came.duration_since(due_at).max(SignedDuration::ZERO);
            let lateness = Duration::try_from(lateness).unwrap_or_default();
            late.record(KINDS[kind.min(KINDS.len() - 1)], lateness);
            late.record("all", lateness);
            recorded += 1;
            target.finish(&claimed.lease).await?;
        }
    }
    Ok(late)
}

/// One traffic loop until stopped: enqueue one job, take it, finish it. Returns how many jobs it finished.
async fn traffic_loop<T: Target>(
    target: T,
    worker: String,
    stop: watch::Receiver<bool>,
) -> cairn::Result<u64> {
    let mut finished = 0;
    let mut i = 0;
    while !*stop.borrow() {
        target.enqueue(job(TRAFFIC_QUEUE, i)).await?;
        i += 1;
        let request = Dequeue::new(worker.as_str())
            .queue(TRAFFIC_QUEUE)
            .wait(Duration::from_secs(1));
        for claimed in target.dequeue(request).await? {
            target.finish(&claimed.lease).await?;
            finished += 1;
        }
    }
    Ok(finished)
}
