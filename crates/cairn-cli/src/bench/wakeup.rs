//! The wakeup scenario: a worker waits in a long poll on an empty queue, a producer enqueues one job, and the
//! sample is the time from just before the enqueue call to the worker's dequeue returning that job. One sample at
//! a time, so nothing else is in flight; the worker and the producer have connections of their own.

use std::time::{Duration, Instant};

use anyhow::Context;
use cairn::{ClaimedJob, Dequeue, JobId};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::report::{Goal, ScenarioReport};
use super::stats::Samples;
use super::target::Target;
use super::{drain, job, progress};

/// The queue this scenario uses.
pub const QUEUE: &str = "bench-wakeup";

/// The wake-up latency a server should reach at p99 on loopback: the target this scenario is compared against.
pub const GOAL_P99: Duration = Duration::from_millis(2);

/// How long to let the worker's dequeue reach the writer and park before enqueueing. The engine's `cargo bench`
/// waits 3 ms; a request over HTTP has further to go.
const PARK_SETTLE: Duration = Duration::from_millis(5);

/// How long the worker's dequeue waits; far longer than any wake-up.
const WORKER_WAIT: Duration = Duration::from_secs(30);

/// A job the worker took, and when its dequeue returned.
type Taken = (Instant, ClaimedJob);

/// Takes `samples` wake-up samples: `worker` waits, `producer` enqueues.
///
/// # Errors
/// A failed request, or a worker whose wait ended without the job.
pub async fn run<T: Target>(
    worker: &T,
    producer: &T,
    samples: usize,
    over_http: bool,
) -> anyhow::Result<ScenarioReport> {
    let leftovers = drain::drain(std::slice::from_ref(producer), QUEUE).await?;
    let (ready_tx, ready) = mpsc::channel::<()>(1);
    let (taken_tx, taken) = mpsc::channel::<Taken>(1);
    // In a set of its own so that the worker's wait is abandoned however this function ends.
    let mut waiter = JoinSet::new();
    waiter.spawn(wait_loop(worker.clone(), ready_tx, taken_tx));
    let mut sampler = Sampler {
        producer,
        ready,
        taken,
        strays: 0,
    };
    let start = Instant::now();
    let Some(recorded) = sampler.sample(samples).await? else {
        return Err(waiter_error(waiter).await);
    };
    let elapsed = start.elapsed();

    let mut report = ScenarioReport::new(
        "wakeup",
        "a worker waits in a long poll on an empty queue; wake-up is the time from just before a producer's \
         enqueue call to the worker's dequeue returning that job (the enqueue's commit included; the claim does not wait for its fsync); after enqueue \
         is from the enqueue call returning (0 when the dequeue returned first)"
            .to_owned(),
        samples as u64,
        elapsed,
    )
    .with_latencies(recorded.into_latencies())
    .latency_only();
    if over_http {
        let p99 = report.latency("wake-up").map(|l| l.percentile(99.0));
        report.goal = Some(Goal {
            text: format!("wake-up p99 < {}ms on loopback", GOAL_P99.as_millis()),
            met: p99.is_some_and(|p99| p99 < GOAL_P99),
        });
    }
    let strays = leftovers + sampler.strays;
    if strays > 0 {
        report.notes.push(format!(
            "{strays} jobs left in {QUEUE} by an earlier run were finished and not counted"
        ));
    }
    Ok(report)
}

/// The producer's side of the samples.
struct Sampler<'a, T> {
    producer: &'a T,
    /// The worker says it is about to wait.
    ready: mpsc::Receiver<()>,
    /// What the worker took.
    taken: mpsc::Receiver<Taken>,
    /// Jobs from before the run that the worker took.
    strays: u64,
}

impl<T: Target> Sampler<'_, T> {
    /// Takes `samples` samples; `None` when the worker stopped.
    async fn sample(&mut self, samples: usize) -> anyhow::Result<Option<Samples>> {
        let bar = progress::bar("wakeup", samples as u64);
        let mut recorded = Samples::default();
        let mut sampled = 0;
        while sampled < samples {
            if self.ready.recv().await.is_none() {
                return Ok(None);
            }
            tokio::time::sleep(PARK_SETTLE).await;
            let called = Instant::now();
            let enqueued = self.producer.enqueue(job(QUEUE, sampled as u64)).await?;
            let enqueue_returned = Instant::now();
            recorded.record("enqueue", enqueue_returned - called);
            match self.take(enqueued.id).await? {
                Taking::Woke(returned) => {
                    recorded.record("wake-up", returned.saturating_duration_since(called));
                    // The hand-off alone: the job rides in the enqueue's commit, so both replies wait for it.
                    recorded.record(
                        "after enqueue",
                        returned.saturating_duration_since(enqueue_returned),
                    );
                    sampled += 1;
                    bar.inc(1);
                }
                // Not a wake-up: the worker took an older job first, then found this one ready.
                Taking::AfterStray => {}
                Taking::WorkerStopped => return Ok(None),
            }
        }
        bar.finish_and_clear();
        Ok(Some(recorded))
    }

    /// Receives what the worker took until it is job `id`, finishing each job.
    async fn take(&mut self, id: JobId) -> anyhow::Result<Taking> {
        let mut clean = true;
        loop {
            let Some((returned, claimed)) = self.taken.recv().await else {
                return Ok(Taking::WorkerStopped);
            };
            self.producer
                .finish(&claimed.lease)
                .await
                .context("finishing the job the worker took")?;
            if claimed.job.id == id {
                return Ok(if clean {
                    Taking::Woke(returned)
                } else {
                    Taking::AfterStray
                });
            }
            // A job from before the run: the worker goes back to waiting and will find this sample's job at once.
            self.strays += 1;
            clean = false;
            if self.ready.recv().await.is_none() {
                return Ok(Taking::WorkerStopped);
            }
        }
    }
}

/// The worker: says it is about to wait, waits for a job, hands over what it took; again until stopped.
async fn wait_loop<T: Target>(
    target: T,
    ready: mpsc::Sender<()>,
    taken: mpsc::Sender<Taken>,
) -> cairn::Result<()> {
    loop {
        if ready.send(()).await.is_err() {
            return Ok(());
        }
        let request = Dequeue::new("bench-waker").queue(QUEUE).wait(WORKER_WAIT);
        let jobs = target.dequeue(request).await?;
        let returned = Instant::now();
        if jobs.is_empty() {
            return Err(cairn::Error::from_parts(
                cairn::ErrorKind::Unavailable,
                None,
                format!("the worker waited {WORKER_WAIT:?} without a job, though one was enqueued"),
            ));
        }
        for claimed in jobs {
            if taken.send((returned, claimed)).await.is_err() {
                return Ok(());
            }
        }
    }
}

/// How taking a sample's job went.
enum Taking {
    /// The waiting worker's dequeue returned the job at this instant.
    Woke(Instant),
    /// An older job reached the worker first; the sample's job was taken after it.
    AfterStray,
    /// The worker stopped (see its task for why).
    WorkerStopped,
}

/// Why the worker stopped.
async fn waiter_error(mut waiter: JoinSet<cairn::Result<()>>) -> anyhow::Error {
    match waiter.join_next().await {
        Some(Ok(Err(e))) => anyhow::Error::new(e).context("the waiting worker failed"),
        Some(Err(e)) => anyhow::Error::new(e).context("the waiting worker stopped"),
        Some(Ok(Ok(()))) | None => anyhow::anyhow!("the waiting worker stopped early"),
    }
}
