//! The worker's loop: take jobs while there is room, run each in its own task with automatic heartbeats, map the
//! handler's outcome to finish, retry or fail, and on stop drain within the deadline.
//!
//! A job's slot is free once its handler has returned and its outcome is handed over: a finish goes to the
//! completer, which reports it with others, and the loop counts its answer when it comes. So the worker takes its
//! next jobs while the last ones' finishes are on their way, rather than one round trip after them, and a durable
//! finish's fsync is shared by the jobs that ended while it ran. Once `max_concurrency` finishes (and at least 32)
//! wait for their answers, it takes no more jobs until some are answered, so that a worker whose finishes go
//! unanswered (a server that stalls) holds a bounded number of jobs: its slots' worth, plus that many.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;

use crate::error::{Error, ErrorKind, Result};
use crate::lease::Lease;
use crate::names::JobId;
use crate::names::{NamePattern, QueueName, WorkerId};
use crate::ops::claim::{ClaimedJob, Dequeue, QueueOrder};
use crate::worker::backend::Backend;
use crate::worker::completer::Completer;
use crate::worker::context::JobContext;
use crate::worker::handler::Handler;
use crate::worker::job_error::JobErrorKind;
use crate::worker::patient::patiently;
use crate::worker::report::WorkerReport;

/// A worker's validated settings.
pub(crate) struct Settings {
    pub id: WorkerId,
    pub queues: Vec<QueueName>,
    pub order: QueueOrder,
    /// Jobs per turn for each queue, with round-robin order; empty when every queue has weight 1.
    pub weights: Vec<u32>,
    pub handlers: BTreeMap<String, Handler>,
    /// The handlers' names as patterns that match each name exactly (GLOB's characters escaped).
    pub patterns: Vec<NamePattern>,
    pub min_concurrency: u32,
    pub max_concurrency: u32,
    pub wait: Duration,
}

/// How a job's run ended, for the report.
enum Ended {
    Finished,
    Retried,
    Failed,
    Lost,
    Suspended,
}

/// What a job's task leaves when its handler is done: how it ended, or a finish handed to the completer, whose
/// answer is still to come.
enum Outcome {
    Ended(Ended),
    Finishing(JobId, oneshot::Receiver<Result<()>>),
}

type Fetch = Pin<Box<dyn Future<Output = Result<Vec<ClaimedJob>>> + Send>>;

/// The leases of running jobs, so that jobs still running at the shutdown deadline can be given back.
type Running = Arc<Mutex<HashMap<JobId, Lease>>>;

/// Runs until told to stop (the watched value becomes the shutdown deadline) or the queue closes.
pub(crate) async fn run(
    queue: Arc<dyn Backend>,
    settings: Settings,
    mut stop: watch::Receiver<Option<Duration>>,
) -> WorkerReport {
    let settings = Arc::new(settings);
    let completer = Completer::start(queue.clone());
    let running: Running = Arc::default();
    let mut tasks: JoinSet<(u32, Outcome)> = JoinSet::new();
    // The answers to finishes handed to the completer.
    let mut finishing: JoinSet<Ended> = JoinSet::new();
    let mut report = WorkerReport::default();
    let mut in_flight = 0u32;
    let mut fetch: Option<Fetch> = None;
    let mut deadline = None;

    while deadline.is_none() {
        if fetch.is_none()
            && in_flight < settings.min_concurrency
            && finishing.len() < unanswered_finishes(settings.max_concurrency)
        {
            if !tasks.is_empty() {
                // Jobs that end together end in the same turn of the runtime, one task after another: let their
                // slots free before asking, so that one request takes jobs for all of them rather than one each.
                tokio::task::yield_now().await;
                while let Some(done) = tasks.try_join_next() {
                    job_done(&mut report, &mut in_flight, &mut finishing, done);
                }
            }
            let (queue, request) = (
                queue.clone(),
                request(&settings, settings.max_concurrency - in_flight),
            );
            fetch = Some(Box::pin(async move { queue.dequeue(request).await }));
        }
        tokio::select! {
            changed = stop.changed() => {
                deadline = Some(match changed { Ok(()) => stop.borrow().unwrap_or(Duration::ZERO), Err(_) => Duration::ZERO });
            }
            claimed = async { fetch.as_mut().expect("polled only when set").await }, if fetch.is_some() => {
                fetch = None;
                match claimed {
                    Ok(jobs) => {
                        for claimed in jobs {
                            in_flight = in_flight.saturating_add(claimed.job.weight);
                            running.lock().expect("running lock is never poisoned").insert(claimed.job.id, claimed.lease.clone());
                            tasks.spawn(run_job(queue.clone(), completer.clone(), settings.clone(), running.clone(), claimed));
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::Closed => {
                        tracing::info!(worker = %settings.id, "queue closed; worker stopping");
                        deadline = Some(Duration::ZERO);
                    }
                    Err(e) => {
                        tracing::error!(worker = %settings.id, error = %e, "taking jobs failed; trying again in a second");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                job_done(&mut report, &mut in_flight, &mut finishing, done);
            }
            Some(answered) = finishing.join_next(), if !finishing.is_empty() => {
                count(&mut report, answered);
            }
        }
    }
    // Dropping an unanswered request is safe with the embedded queue: a job claimed for it is given back. Over HTTP,
    // an answer already on its way when the request is dropped leaves its jobs leased until the lease expires.
    drop(fetch);
    drain(
        &queue,
        (&mut tasks, &mut finishing),
        &running,
        deadline.unwrap_or_default(),
        &mut report,
        &mut in_flight,
    )
    .await;
    // Stopped, not lost: the activity log says so. A queue that cannot be reached will count it lost instead.
    if let Err(e) = queue.worker_stopped(settings.id.as_str()).await {
        tracing::debug!(error = %e, "could not say the worker stopped");
    }
    report
}

/// How many finishes may wait for their answers before the worker stops taking jobs: its slots' worth, and at least
/// [`MIN_UNANSWERED_FINISHES`].
fn unanswered_finishes(max_concurrency: u32) -> usize {
    (max_concurrency as usize).max(MIN_UNANSWERED_FINISHES)
}

/// A worker of few slots still takes its next jobs while this many finishes wait for one fsync: otherwise a
/// one-slot worker runs one job per fsync, and a durable commit's wait, not the work, sets its pace.
const MIN_UNANSWERED_FINISHES: usize = 32;

fn request(settings: &Settings, room: u32) -> Dequeue {
    Dequeue {
        worker: settings.id.to_string(),
        queues: settings.queues.iter().map(|q| q.to_string()).collect(),
        order: settings.order,
        weights: settings.weights.clone(),
        names: settings
            .patterns
            .iter()
            .map(|p| p.as_str().to_owned())
            .collect(),
        limit: room,
        max_weight: Some(room),
        wait: settings.wait,
        lease_timeout: None,
        priority: None,
    }
}

/// A job's task is done: its slot is free, and its outcome is counted, or its finish's answer awaited.
fn job_done(
    report: &mut WorkerReport,
    in_flight: &mut u32,
    finishing: &mut JoinSet<Ended>,
    done: std::result::Result<(u32, Outcome), tokio::task::JoinError>,
) {
    let Ok((weight, outcome)) = done else {
        // Job tasks catch handler panics themselves; a failed join means the task was aborted at shutdown.
        return;
    };
    *in_flight = in_flight.saturating_sub(weight);
    match outcome {
        Outcome::Ended(ended) => count(report, Ok(ended)),
        Outcome::Finishing(job, answer) => {
            finishing.spawn(async move {
                let result = answer.await.unwrap_or_else(|_| Err(Error::closed()));
                recorded(job, result, Ended::Finished)
            });
        }
    }
}

fn count(report: &mut WorkerReport, ended: std::result::Result<Ended, tokio::task::JoinError>) {
    // A failed join means the task was aborted at shutdown.
    let Ok(ended) = ended else {
        return;
    };
    match ended {
        Ended::Finished => report.finished += 1,
        Ended::Retried => report.retried += 1,
        Ended::Failed => report.failed += 1,
        Ended::Lost => report.lost += 1,
        Ended::Suspended => report.suspended += 1,
    }
}

/// Waits for running jobs and the answers to their finishes until the deadline, then aborts the rest and gives
/// back the jobs still running.
async fn drain(
    queue: &Arc<dyn Backend>,
    (tasks, finishing): (&mut JoinSet<(u32, Outcome)>, &mut JoinSet<Ended>),
    running: &Running,
    deadline: Duration,
    report: &mut WorkerReport,
    in_flight: &mut u32,
) {
    let _ = tokio::time::timeout(deadline, async {
        loop {
            tokio::select! {
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    job_done(report, in_flight, finishing, done);
                }
                Some(answered) = finishing.join_next(), if !finishing.is_empty() => {
                    count(report, answered);
                }
                else => break,
            }
        }
    })
    .await;
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    if !finishing.is_empty() {
        tracing::warn!(
            jobs = finishing.len(),
            "stopped before the finishes of some jobs were answered; each is finished, or back when its lease ends"
        );
        report.lost += finishing.len() as u64;
        finishing.abort_all();
        while finishing.join_next().await.is_some() {}
    }
    let leftover: Vec<Lease> = running
        .lock()
        .expect("running lock is never poisoned")
        .drain()
        .map(|(_, l)| l)
        .collect();
    for lease in leftover {
        match queue.release(&lease).await {
            Ok(()) => report.released += 1,
            Err(e) => {
                tracing::warn!(job = %lease.job, error = %e, "could not give back a job at shutdown")
            }
        }
    }
}

/// Aborts the wrapped task when dropped, so that aborting a job's task also stops its handler.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one job: the handler in its own task (so a panic is caught), heartbeats meanwhile, then the outcome.
async fn run_job(
    queue: Arc<dyn Backend>,
    completer: Completer,
    settings: Arc<Settings>,
    running: Running,
    claimed: ClaimedJob,
) -> (u32, Outcome) {
    let ClaimedJob { job, lease } = claimed;
    let weight = job.weight;
    let handler = settings
        .handlers
        .get(job.name.as_str())
        .cloned()
        .expect("only jobs with a handler are taken");
    let every = (job.lease_timeout / 3).max(Duration::from_millis(50));
    let ctx = JobContext::new(queue.clone(), job, lease.clone());
    let span = job_span(ctx.job());
    let mut handler_task = AbortOnDrop(tokio::spawn(handler(ctx.clone()).instrument(span)));
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let outcome = loop {
        tokio::select! {
            outcome = &mut handler_task.0 => break outcome,
            _ = ticker.tick() => match queue.heartbeat(&lease, None).await {
                Ok(_) => {}
                Err(e) if e.is_lease_lost() => {
                    tracing::warn!(job = %lease.job, error = %e, "lease lost; stopping the handler");
                    running.lock().expect("running lock is never poisoned").remove(&lease.job);
                    return (weight, Outcome::Ended(Ended::Lost));
                }
                Err(e) => tracing::warn!(job = %lease.job, error = %e, "heartbeat failed; will try again"),
            },
        }
    };
    let (result, ended) = match outcome {
        // A sleep gave up the lease, and the handler went on and returned anyway: the run ended with the sleep.
        Ok(_) if ctx.suspended() => (Ok(()), Ended::Suspended),
        Ok(Ok(())) => {
            // Done: the finish goes with others (see `Completer`), and the slot is free meanwhile.
            let sent = completer.send(&lease, ctx.take_ending());
            running
                .lock()
                .expect("running lock is never poisoned")
                .remove(&lease.job);
            return match sent {
                Ok(answer) => (weight, Outcome::Finishing(lease.job, answer)),
                Err(e) => (
                    weight,
                    Outcome::Ended(recorded(lease.job, Err(e), Ended::Finished)),
                ),
            };
        }
        Ok(Err(error)) => match error.kind {
            JobErrorKind::Retry { message, delay } => (
                patiently("retrying a job", || queue.retry(&lease, &message, delay))
                    .await
                    .map(|_| ()),
                Ended::Retried,
            ),
            JobErrorKind::Fail { group, message } => (
                patiently("failing a job", || queue.fail(&lease, &group, &message)).await,
                Ended::Failed,
            ),
            // The sleep ended the lease in the same transaction that recorded it: nothing is left to say.
            JobErrorKind::Suspended { .. } => (Ok(()), Ended::Suspended),
        },
        Err(join_error) => {
            let message = panic_message(join_error);
            (
                patiently("retrying a job", || queue.retry(&lease, &message, None))
                    .await
                    .map(|_| ()),
                Ended::Retried,
            )
        }
    };
    running
        .lock()
        .expect("running lock is never poisoned")
        .remove(&lease.job);
    (weight, Outcome::Ended(recorded(lease.job, result, ended)))
}

/// The span a job's handler runs in: `cairn.job`, with the job's id, name, queue and attempt, and, when it was
/// pushed with a W3C trace context, that trace's id and the pushing span's id (`trace_id`, `parent_id`, and
/// `traceparent` whole), so that logs and traces of the handler join the request that enqueued the job. With the
/// `opentelemetry` feature and a `tracing-opentelemetry` layer, the span is a child of that context.
fn job_span(job: &crate::job::Job) -> tracing::Span {
    let span = tracing::info_span!(
        "cairn.job",
        job = job.id.0,
        name = job.name.as_str(),
        queue = job.queue.as_str(),
        attempt = job.attempt,
        trace_id = tracing::field::Empty,
        parent_id = tracing::field::Empty,
        traceparent = tracing::field::Empty,
    );
    if let Some(parent) = &job.trace_parent {
        span.record("trace_id", parent.trace_id());
        span.record("parent_id", parent.parent_id());
        span.record("traceparent", parent.as_str());
        #[cfg(feature = "opentelemetry")]
        super::otel::follow(&span, parent);
    }
    span
}

/// How a job ended once its outcome was recorded (`result`): as meant, or lost.
fn recorded(job: JobId, result: Result<()>, ended: Ended) -> Ended {
    match result {
        Ok(()) => ended,
        Err(e) if e.is_lease_lost() => {
            tracing::warn!(job = %job, error = %e, "the job was taken away before its outcome was recorded");
            Ended::Lost
        }
        Err(e) => {
            tracing::error!(job = %job, error = %e, "could not record the job's outcome; its lease will expire");
            Ended::Lost
        }
    }
}

fn panic_message(error: tokio::task::JoinError) -> String {
    match error.try_into_panic() {
        Ok(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string payload".to_owned());
            format!("the handler panicked: {text}")
        }
        Err(_) => "the handler was cancelled".to_owned(),
    }
}
