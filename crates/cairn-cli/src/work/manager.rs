//! The manager's loop: ask the server for as many jobs as there is free room (one long poll at a time, never a
//! busy poll), start a `job` task for each, and decide when to stop: SIGTERM or Ctrl-C (twice: at once),
//! `--max-runtime`, `--exit-when-idle`. It holds back while the load is above `--max-load` and while the server is
//! unreachable. Running one job is `job`'s business.
//!
//! With `--exit-when-idle` every ask is answered at once (no long poll), and an empty answer while commands run
//! waits for one of them to end before asking again.
//!
//! Room is counted in job weight, as `cairn::Worker` counts it: `--concurrency 4` runs four jobs of weight 1, or
//! one of weight 3 and one of weight 1. A job heavier than the room left is still handed out when it is first in
//! line (the engine's rule, so that no job is too heavy to ever run); then no more are asked for until the total
//! drops below the concurrency.

use cairn::Jobs;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn::{ClaimedJob, Dequeue, QueueOrder};
use cairn_client::Client;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::work::backoff::{self, Backoff};
use crate::work::job::{self, Ended, JobCommand};
use crate::work::load::LoadGate;

/// How long one dequeue waits for a job; the server may cap it lower (its `--max-wait`).
const LONG_POLL: Duration = Duration::from_secs(30);

/// How often the load is read again while it is too high.
const LOAD_CHECK_EVERY: Duration = Duration::from_secs(5);

/// The manager's validated settings.
#[derive(Debug)]
pub(crate) struct Settings {
    /// Who takes the jobs.
    pub worker: String,
    /// The queues to take from, in order; `default` when empty.
    pub queues: Vec<String>,
    /// The job-name pattern.
    pub pattern: String,
    /// The most job weight running at once.
    pub concurrency: u32,
    /// Take no jobs while the 1-minute load average is above this.
    pub max_load: Option<f64>,
    /// Stop taking jobs after this long.
    pub max_runtime: Option<Duration>,
    /// Exit when no job is ready and nothing runs.
    pub exit_when_idle: bool,
    /// What to run for each job.
    pub command: Arc<JobCommand>,
}

/// Where the manager is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Taking jobs.
    Taking,
    /// Taking no more jobs; waiting for running commands to finish.
    Draining,
    /// Stopping running commands and giving their jobs back.
    Abandoning,
}

/// A dequeue under way.
type Fetch = Pin<Box<dyn Future<Output = cairn::Result<Vec<ClaimedJob>>> + Send>>;

/// How many runs ended each way.
#[derive(Debug, Default)]
struct Counts {
    completed: u32,
    retried: u32,
    failed: u32,
    lost: u32,
    released: u32,
    unrecorded: u32,
}

/// The loop's state: what runs, what is asked for, what holds it back.
struct Manager {
    client: Client,
    settings: Settings,
    phase: Phase,
    signals_seen: u32,
    /// One task per running job.
    tasks: JoinSet<Ended>,
    /// Each running task's job weight.
    weights: HashMap<tokio::task::Id, u32>,
    /// The total weight of the running jobs.
    in_flight: u32,
    fetch: Option<Fetch>,
    /// With `--exit-when-idle`: the last ask found nothing while commands ran, so ask again when one ends.
    is_waiting_for_a_command: bool,
    /// No fetch before this (the server is down, or the load is high).
    not_before: Option<Instant>,
    backoff: Backoff,
    load: Option<LoadGate>,
    /// Cancelled on the second signal: every job task stops its command and gives the job back.
    abandon: CancellationToken,
    /// An answer from the server that retrying will not change (a refused token, say).
    fatal: Option<cairn::Error>,
    counts: Counts,
}

/// Runs until told to stop, `--max-runtime` passes, or (with `--exit-when-idle`) there is nothing to do.
///
/// # Errors
/// When the signal handlers cannot be installed, or the server refuses the manager for good (a bad token); running
/// commands are let finish first.
pub(crate) async fn run(client: Client, settings: Settings) -> anyhow::Result<()> {
    let mut signals = Signals::new().context("installing the SIGTERM and SIGINT handlers")?;
    let runtime_end = settings.max_runtime.map(|d| Instant::now() + d);
    tracing::info!(worker = %settings.worker, pattern = %settings.pattern, queues = ?settings.queues, concurrency = settings.concurrency, "worker manager started");
    let mut m = Manager::new(client, settings);
    loop {
        if m.phase == Phase::Taking {
            m.start_fetch();
        }
        if m.phase != Phase::Taking && m.tasks.is_empty() {
            break;
        }
        let is_taking = m.phase == Phase::Taking;
        let is_fetching = m.fetch.is_some();
        let is_held_back = is_taking && !is_fetching && m.not_before.is_some();
        let has_tasks = !m.tasks.is_empty();
        let not_before = m.not_before;
        // The branches borrow two fields; the handlers, which run after the branches are dropped, use all of `m`.
        let (fetch, tasks) = (&mut m.fetch, &mut m.tasks);
        tokio::select! {
            signal = signals.recv() => m.on_signal(signal),
            () = sleep_until(runtime_end), if is_taking && runtime_end.is_some() => {
                tracing::info!(running = m.tasks.len(), "--max-runtime reached: taking no new jobs, letting running commands finish");
                m.stop_taking();
            }
            () = sleep_until(not_before), if is_held_back => m.not_before = None,
            claimed = async { fetch.as_mut().expect("polled only when set").await }, if is_fetching => {
                m.fetch = None;
                m.on_claimed(claimed);
            }
            Some(done) = tasks.join_next_with_id(), if has_tasks => m.on_done(done),
        }
    }
    let c = &m.counts;
    tracing::info!(
        completed = c.completed,
        retried = c.retried,
        failed = c.failed,
        lease_lost = c.lost,
        released = c.released,
        unrecorded = c.unrecorded,
        "worker manager stopped"
    );
    match m.fatal {
        Some(e) => Err(anyhow::Error::new(e).context("taking jobs from the server")),
        None => Ok(()),
    }
}

impl Manager {
    fn new(client: Client, settings: Settings) -> Self {
        Manager {
            client,
            load: settings.max_load.map(LoadGate::new),
            settings,
            phase: Phase::Taking,
            signals_seen: 0,
            tasks: JoinSet::new(),
            weights: HashMap::new(),
            in_flight: 0,
            fetch: None,
            is_waiting_for_a_command: false,
            not_before: None,
            backoff: Backoff::default(),
            abandon: CancellationToken::new(),
            fatal: None,
            counts: Counts::default(),
        }
    }

    /// Asks for jobs if there is room and nothing holds it back.
    fn start_fetch(&mut self) {
        let room = self.settings.concurrency.saturating_sub(self.in_flight);
        if self.fetch.is_some() || room == 0 || self.is_waiting_for_a_command {
            return;
        }
        if self.not_before.is_some_and(|t| t > Instant::now()) {
            return;
        }
        self.not_before = None;
        if let Some(gate) = &mut self.load
            && !gate.allows_work()
        {
            self.not_before = Some(Instant::now() + LOAD_CHECK_EVERY);
            return;
        }
        // With --exit-when-idle, never a long poll: an empty answer is what says it is time to exit. (Dropping a
        // long poll when the last command ends would race with a job being handed to it; that job would then sit
        // claimed, unseen, until its lease ran out.)
        let waits = !self.settings.exit_when_idle;
        let request = Dequeue {
            worker: self.settings.worker.clone(),
            queues: self.settings.queues.clone(),
            order: QueueOrder::Ordered,
            weights: Vec::new(),
            names: vec![self.settings.pattern.clone()],
            limit: room,
            max_weight: Some(room),
            wait: if waits { LONG_POLL } else { Duration::ZERO },
            // The manager heartbeats for its commands, so the jobs' own lease timeouts hold.
            lease_timeout: None,
            priority: None,
        };
        let client = self.client.clone();
        self.fetch = Some(Box::pin(async move { client.dequeue(request).await }));
    }

    fn on_claimed(&mut self, claimed: cairn::Result<Vec<ClaimedJob>>) {
        match claimed {
            Ok(jobs) => {
                self.backoff.reset();
                if jobs.is_empty() && self.settings.exit_when_idle {
                    if self.tasks.is_empty() {
                        tracing::info!(
                            "no job is ready and no command is running: exiting (--exit-when-idle)"
                        );
                        self.stop_taking();
                    } else {
                        self.is_waiting_for_a_command = true;
                    }
                }
                for claimed in jobs {
                    self.start_job(claimed);
                }
            }
            Err(e) if backoff::is_transient(&e) => {
                let delay = self.backoff.next_delay();
                tracing::warn!(error = %e, retry_in = ?delay, "cannot take jobs from the server; trying again");
                self.not_before = Some(Instant::now() + delay);
            }
            Err(e) => {
                tracing::error!(error = %e, running = self.tasks.len(), "the server refused to hand out jobs: taking no more, letting running commands finish");
                self.fatal = Some(e);
                self.stop_taking();
            }
        }
    }

    fn start_job(&mut self, claimed: ClaimedJob) {
        let weight = claimed.job.weight;
        let handle = self.tasks.spawn(job::run(
            self.client.clone(),
            self.settings.command.clone(),
            claimed,
            self.abandon.clone(),
        ));
        self.weights.insert(handle.id(), weight);
        self.in_flight = self.in_flight.saturating_add(weight);
    }

    fn on_done(&mut self, done: Result<(tokio::task::Id, Ended), JoinError>) {
        let id = match &done {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        let weight = self
            .weights
            .remove(&id)
            .expect("every task's weight is kept");
        self.in_flight = self.in_flight.saturating_sub(weight);
        match done {
            Ok((_, ended)) => self.counts.add(ended),
            Err(e) => tracing::error!(error = %e, "a job's task failed; its lease will expire"),
        }
        self.is_waiting_for_a_command = false;
    }

    fn on_signal(&mut self, signal: &'static str) {
        self.signals_seen += 1;
        match self.signals_seen {
            1 => {
                tracing::info!(
                    signal,
                    running = self.tasks.len(),
                    "stopping: taking no new jobs, letting running commands finish (signal again to stop them)"
                );
                self.stop_taking();
            }
            2 => {
                tracing::warn!(
                    signal,
                    running = self.tasks.len(),
                    "stopping now: terminating running commands and giving their jobs back"
                );
                self.stop_taking();
                self.phase = Phase::Abandoning;
                self.abandon.cancel();
            }
            _ => tracing::warn!(signal, "already stopping"),
        }
    }

    /// Takes no more jobs. Dropping a pending long poll is safe: the server gives back any job it claimed for a
    /// request that went away. (A job whose answer was already on its way when the poll was dropped stays claimed
    /// until its lease runs out, and then runs again; the window is the answer's time in flight.)
    fn stop_taking(&mut self) {
        if self.phase == Phase::Taking {
            self.phase = Phase::Draining;
        }
        self.fetch = None;
        self.not_before = None;
    }
}

impl Counts {
    fn add(&mut self, ended: Ended) {
        let count = match ended {
            Ended::Completed => &mut self.completed,
            Ended::Retried => &mut self.retried,
            Ended::Failed => &mut self.failed,
            Ended::Lost => &mut self.lost,
            Ended::Released => &mut self.released,
            Ended::Unrecorded => &mut self.unrecorded,
        };
        *count += 1;
    }
}

/// Sleeps until `at`, or for ever when there is no such time.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// SIGTERM, SIGINT and SIGHUP (a closed terminal or ssh session), listened to for the manager's whole life so
/// that no second signal is missed.
struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal's name.
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}
