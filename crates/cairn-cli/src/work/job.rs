//! One job, from start to recorded outcome: run the command with the job's data on stdin and its identity in the
//! environment, heartbeat the lease while it runs, stop it when the lease is lost or the manager gives up at once,
//! then record the outcome (finish on exit status 0, retry otherwise) with the run's usage. Taking jobs and
//! deciding when to stop is `manager`'s business; the child process itself is `runner`'s.

use cairn::Jobs;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use cairn::{ClaimedJob, Finish, Job, JobState, Lease, Retry, RunUsage};
use cairn_client::Client;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::work::backoff::{self, Backoff};
use crate::work::runner::{self, Finished, Signaller, Spec};

/// How long a command gets to exit after SIGTERM before it gets SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// The shortest heartbeat interval, whatever the lease timeout.
const MIN_HEARTBEAT: Duration = Duration::from_millis(50);

/// The command every job runs, and what its environment says about the server.
#[derive(Debug)]
pub(crate) struct JobCommand {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The server's URL, given to the command as `CAIRN_SERVER`.
    pub server: String,
    /// The server's token, given to the command as `CAIRN_TOKEN`.
    pub token: Option<String>,
}

/// How a job's run ended, for the logs and the manager's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The command exited 0 and the job was finished.
    Completed,
    /// The command failed and the job will run again.
    Retried,
    /// The command failed and the job is out of attempts.
    Failed,
    /// The lease was lost (cancelled, deleted, expired): the command was stopped, nothing recorded.
    Lost,
    /// The manager stopped at once: the command was stopped and the job given back.
    Released,
    /// The outcome could not be recorded; the lease will expire and the engine will retry the job.
    Unrecorded,
}

impl Ended {
    /// The name used in logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Ended::Completed => "completed",
            Ended::Retried => "retried",
            Ended::Failed => "failed",
            Ended::Lost => "lease_lost",
            Ended::Released => "released",
            Ended::Unrecorded => "unrecorded",
        }
    }
}

/// What to record for a run.
#[derive(Debug, Clone)]
enum Outcome {
    Finish,
    Retry(String),
}

/// How supervising the command ended.
enum Supervised {
    Exited(io::Result<Finished>),
    LeaseLost,
    Abandoned,
}

/// A heartbeat under way.
type Heartbeat = Pin<Box<dyn Future<Output = cairn::Result<jiff::Timestamp>> + Send>>;

/// Runs one claimed job to the end. `abandon` is cancelled when the manager stops at once: the command is then
/// stopped and the job released (the attempt does not count).
pub(crate) async fn run(
    client: Client,
    command: Arc<JobCommand>,
    claimed: ClaimedJob,
    abandon: CancellationToken,
) -> Ended {
    let ClaimedJob { job, lease } = claimed;
    let (signaller, mut finished) = match runner::start(spec(&command, &job, &lease)) {
        Ok(started) => started,
        Err(e) => {
            let message = format!("starting {:?}: {e}", command.argv[0]);
            tracing::error!(job = %job.id, name = %job.name, error = %message, "cannot start the command");
            let outcome = Outcome::Retry(message);
            let ended = record(&client, &job, &lease, outcome, None, &abandon).await;
            log_end(&job, ended, None);
            return ended;
        }
    };
    tracing::info!(job = %job.id, name = %job.name, queue = %job.queue, attempt = job.attempt, pid = signaller.pid(), "job started");
    let finished = match supervise(&client, &job, &lease, &signaller, &mut finished, &abandon).await
    {
        Supervised::Exited(finished) => finished,
        Supervised::LeaseLost => {
            let stopped = stop(&signaller, finished).await;
            log_end(&job, Ended::Lost, stopped.as_ref().ok());
            return Ended::Lost;
        }
        Supervised::Abandoned => {
            let stopped = stop(&signaller, finished).await;
            let ended = give_back(&client, &lease).await;
            log_end(&job, ended, stopped.as_ref().ok());
            return ended;
        }
    };
    let (outcome, usage) = match &finished {
        Ok(run) if run.exit.is_success() => (Outcome::Finish, Some(run.usage)),
        Ok(run) => (Outcome::Retry(run.error_message()), Some(run.usage)),
        Err(e) => (
            Outcome::Retry(format!("waiting for the command: {e}")),
            None,
        ),
    };
    let ended = record(&client, &job, &lease, outcome, usage, &abandon).await;
    log_end(&job, ended, finished.as_ref().ok());
    ended
}

/// The command's input and environment for one job.
fn spec<'a>(command: &'a JobCommand, job: &Job, lease: &Lease) -> Spec<'a> {
    let mut input = serde_json::to_vec(&job.data).expect("a JSON value always serializes");
    input.push(b'\n');
    let mut env = vec![
        ("CAIRN_JOB_ID", job.id.to_string()),
        ("CAIRN_JOB_NAME", job.name.to_string()),
        ("CAIRN_JOB_QUEUE", job.queue.to_string()),
        ("CAIRN_JOB_ATTEMPT", job.attempt.to_string()),
        ("CAIRN_LEASE_TOKEN", lease.token.to_string()),
        ("CAIRN_SERVER", command.server.clone()),
    ];
    // So that the command can call the server (progress, checkpoints) with the manager's credentials.
    if let Some(token) = &command.token {
        env.push(("CAIRN_TOKEN", token.clone()));
    }
    // The trace the job was pushed in, in the environment variable OpenTelemetry's SDKs read a parent context from.
    if let Some(parent) = &job.trace_parent {
        env.push(("TRACEPARENT", parent.to_string()));
    }
    Spec {
        argv: &command.argv,
        env,
        input,
    }
}

/// Heartbeats the lease (every third of the lease timeout) until the command exits, the lease is lost, or the
/// manager gives up at once.
async fn supervise(
    client: &Client,
    job: &Job,
    lease: &Lease,
    signaller: &Signaller,
    finished: &mut JoinHandle<io::Result<Finished>>,
    abandon: &CancellationToken,
) -> Supervised {
    let every = (job.lease_timeout / 3).max(MIN_HEARTBEAT);
    let mut ticker = tokio::time::interval_at(Instant::now() + every, every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The heartbeat runs beside the command, so that a slow server never delays noticing the command's exit.
    let mut beat: Option<Heartbeat> = None;
    loop {
        tokio::select! {
            result = &mut *finished => {
                return Supervised::Exited(result.unwrap_or_else(|e| Err(io::Error::other(e))));
            }
            () = abandon.cancelled() => {
                tracing::warn!(job = %job.id, pid = signaller.pid(), "stopping the command and giving the job back");
                return Supervised::Abandoned;
            }
            _ = ticker.tick(), if beat.is_none() => {
                let (client, lease) = (client.clone(), lease.clone());
                // One stalled request must not hold up the next heartbeat until the lease runs out: each gets
                // one interval, and the next tick sends a fresh one.
                beat = Some(Box::pin(async move {
                    tokio::time::timeout(every, client.heartbeat(&lease, None))
                        .await
                        .unwrap_or_else(|_| {
                            Err(cairn::Error::from_parts(
                                cairn::ErrorKind::Unavailable,
                                None,
                                format!("the heartbeat got no answer within {every:?}"),
                            ))
                        })
                }));
            }
            result = async { beat.as_mut().expect("polled only when set").await }, if beat.is_some() => {
                beat = None;
                match result {
                    Ok(_) => {}
                    Err(e) if is_lease_gone(&e) => {
                        tracing::warn!(job = %job.id, name = %job.name, pid = signaller.pid(), error = %e, "lease lost; stopping the command");
                        return Supervised::LeaseLost;
                    }
                    Err(e) => tracing::warn!(job = %job.id, error = %e, "heartbeat failed; will try again"),
                }
            }
        }
    }
}

/// Whether an error says the job is no longer ours: the lease expired, or the job was cancelled or deleted.
fn is_lease_gone(e: &cairn::Error) -> bool {
    e.is_lease_lost() || e.is_not_found() || e.kind() == cairn::ErrorKind::InvalidState
}

/// Stops the command: SIGTERM to its process group, SIGKILL if it is still there after [`KILL_GRACE`].
async fn stop(
    signaller: &Signaller,
    mut finished: JoinHandle<io::Result<Finished>>,
) -> io::Result<Finished> {
    signaller.signal(libc::SIGTERM);
    let result = match tokio::time::timeout(KILL_GRACE, &mut finished).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!(
                pid = signaller.pid(),
                "the command ignored SIGTERM; sending SIGKILL"
            );
            signaller.signal(libc::SIGKILL);
            finished.await
        }
    };
    // The command itself is gone; anything it started that ignored SIGTERM goes too, before the job is given back
    // or recorded, so that no process works on a job another worker may take next.
    signaller.kill_group();
    result.unwrap_or_else(|e| Err(io::Error::other(e)))
}

/// Releases the job unfinished: the attempt does not count.
async fn give_back(client: &Client, lease: &Lease) -> Ended {
    match client.release(lease).await {
        Ok(()) => Ended::Released,
        Err(e) => {
            tracing::warn!(job = %lease.job, error = %e, "cannot give the job back; its lease will expire");
            Ended::Unrecorded
        }
    }
}

/// Records the outcome, trying again while the server is unreachable, for as long as the lease could still be
/// held (a lease timeout from now): after that, the server would refuse it anyway.
async fn record(
    client: &Client,
    job: &Job,
    lease: &Lease,
    outcome: Outcome,
    usage: Option<RunUsage>,
    abandon: &CancellationToken,
) -> Ended {
    let give_up_at = Instant::now() + job.lease_timeout;
    let mut backoff = Backoff::default();
    loop {
        let result = match &outcome {
            Outcome::Finish => client
                .finish_with(Finish {
                    usage,
                    ..Finish::new(lease)
                })
                .await
                .map(|()| Ended::Completed),
            Outcome::Retry(message) => client
                .retry_with(Retry {
                    usage,
                    ..Retry::new(lease, message.as_str())
                })
                .await
                .map(|state| match state {
                    JobState::Failed => Ended::Failed,
                    _ => Ended::Retried,
                }),
        };
        let e = match result {
            Ok(ended) => return ended,
            Err(e) => e,
        };
        if is_lease_gone(&e) {
            tracing::warn!(job = %job.id, error = %e, "the job was taken away before its outcome was recorded");
            return Ended::Lost;
        }
        let delay = backoff.next_delay();
        if !backoff::is_transient(&e) || Instant::now() + delay > give_up_at {
            tracing::error!(job = %job.id, error = %e, "cannot record the job's outcome; the engine will retry it when its lease expires");
            return Ended::Unrecorded;
        }
        tracing::warn!(job = %job.id, error = %e, retry_in = ?delay, "cannot record the job's outcome; trying again");
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = abandon.cancelled() => return Ended::Unrecorded,
        }
    }
}

fn log_end(job: &Job, ended: Ended, finished: Option<&Finished>) {
    match finished {
        Some(run) => tracing::info!(
            job = %job.id,
            name = %job.name,
            outcome = ended.as_str(),
            exit = %run.exit,
            run_time = ?run.usage.run_time,
            cpu_time = ?run.usage.cpu_time,
            peak_memory_kib = run.usage.peak_memory / 1024,
            "job ended"
        ),
        None => {
            tracing::info!(job = %job.id, name = %job.name, outcome = ended.as_str(), "job ended")
        }
    }
}
