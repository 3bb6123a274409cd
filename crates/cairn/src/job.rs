//! What a job is, as callers see it: [`Job`], its [`JobState`] and the [`Attempt`] records of its history.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::error::Error;
use crate::names::{
    ConcurrencyKey, DebounceKey, JobId, JobName, QueueName, Tag, ThrottleKey, UniqueKey, WorkerId,
};
use crate::retry_policy::RetryPolicy;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting for its `run_at` to arrive.
    Scheduled,
    /// Ready to be taken by a worker.
    Queued,
    /// Waiting on other jobs (dependencies or children).
    Waiting,
    /// Leased to one worker.
    Running,
    /// Finished successfully.
    Completed,
    /// Retries exhausted, or failed on purpose.
    Failed,
    /// Cancelled before it finished.
    Cancelled,
}

impl JobState {
    /// Every state, in life order.
    pub const ALL: [JobState; 7] = [
        JobState::Scheduled,
        JobState::Queued,
        JobState::Waiting,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// The state's name as stored and shown: `scheduled`, `queued`, …
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Scheduled => "scheduled",
            JobState::Queued => "queued",
            JobState::Waiting => "waiting",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Whether the job has not finished yet (it still holds its unique key).
    pub fn is_live(self) -> bool {
        matches!(
            self,
            JobState::Scheduled | JobState::Queued | JobState::Waiting | JobState::Running
        )
    }

    /// Whether the job has finished, one way or another.
    pub fn is_finished(self) -> bool {
        !self.is_live()
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobState {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        JobState::ALL.into_iter().find(|state| state.as_str() == s).ok_or_else(|| {
            Error::invalid(
                "state",
                format!("must be one of scheduled, queued, waiting, running, completed, failed, cancelled, got {s:?}"),
            )
        })
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    /// The worker finished the job.
    Completed,
    /// The worker reported a transient error, and the job was retried. One that finds no attempt left is `Failed`.
    Retried,
    /// The worker failed the job permanently, or reported an error with no attempt left.
    Failed,
    /// The lease ran out before the worker finished.
    LeaseExpired,
    /// The job was cancelled or deleted while running.
    Cancelled,
    /// The process that held the job died; the job was recovered when the database was opened again.
    Crashed,
    /// The worker gave the job back without running it to the end (shutdown); the attempt does not count.
    Released,
    /// Someone requeued the job while it ran; its worker was refused from then on.
    Requeued,
    /// The handler slept ([`JobContext::sleep`](crate::JobContext::sleep)): the job gave up its worker until a
    /// time, and runs again then, replaying its steps; the attempt does not count.
    Suspended,
}

impl AttemptOutcome {
    /// The outcome's name as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Completed => "completed",
            AttemptOutcome::Retried => "retried",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::LeaseExpired => "lease_expired",
            AttemptOutcome::Cancelled => "cancelled",
            AttemptOutcome::Crashed => "crashed",
            AttemptOutcome::Released => "released",
            AttemptOutcome::Requeued => "requeued",
            AttemptOutcome::Suspended => "suspended",
        }
    }

    /// The outcome named `s` (as [`AttemptOutcome::as_str`] names it), if any.
    pub fn parse(s: &str) -> Option<Self> {
        [
            AttemptOutcome::Completed,
            AttemptOutcome::Retried,
            AttemptOutcome::Failed,
            AttemptOutcome::LeaseExpired,
            AttemptOutcome::Cancelled,
            AttemptOutcome::Crashed,
            AttemptOutcome::Released,
            AttemptOutcome::Requeued,
            AttemptOutcome::Suspended,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One attempt at running a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    /// The worker that held the job.
    pub worker: WorkerId,
    /// When the worker took the job.
    pub started_at: Timestamp,
    /// When the attempt ended; `None` while it runs.
    pub finished_at: Option<Timestamp>,
    /// How it ended; `None` while it runs.
    pub outcome: Option<AttemptOutcome>,
    /// The error the attempt ended with, if any.
    pub error: Option<String>,
    /// What the attempt's process used, when its worker measured it (the `cairn work` manager does).
    pub usage: Option<RunUsage>,
    /// The result a completed attempt finished with, if it gave one.
    pub result: Option<Value>,
}

/// What one attempt's process used, as measured by its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunUsage {
    /// Wall-clock time from start to exit.
    pub run_time: Duration,
    /// CPU time, user plus system.
    pub cpu_time: Duration,
    /// Peak resident memory, in bytes.
    pub peak_memory: u64,
}

/// Whose the children are that a job's runs create: the run's (the default) or the job's. It decides what becomes
/// of them when a run does not finish, and whether a child that fails holds its parent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Children {
    /// The run's, as a step of work: a child starts when the run that created it finishes, and is cancelled if that
    /// run ends any other way (the next run creates its own); a child that fails holds its waiting parent until it
    /// is requeued and completes, or is cancelled or deleted.
    #[default]
    OfTheRun,
    /// The job's, as in Bedrock: a child starts when a run of the job finishes, whichever run created it, so a run
    /// that times out, is retried, released or requeued leaves it waiting (a run that fails the job for good still
    /// cancels it). A child that fails does not hold its parent once another child completes, or is cancelled or
    /// deleted, last: the parent runs again and finds the failed child among its children. A child whose failure
    /// is the last thing to happen leaves its parent waiting, as in Bedrock, until it is requeued, cancelled or
    /// deleted.
    OfTheJob,
}

impl Children {
    /// Its name on the wire: `run` or `job`.
    pub fn as_str(self) -> &'static str {
        match self {
            Children::OfTheRun => "run",
            Children::OfTheJob => "job",
        }
    }

    /// The value named `name`.
    pub fn parse(name: &str) -> Option<Children> {
        [Children::OfTheRun, Children::OfTheJob]
            .into_iter()
            .find(|c| c.as_str() == name)
    }
}

/// Everything about one job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The job's id.
    pub id: JobId,
    /// The queue it is in.
    pub queue: QueueName,
    /// Its name (type), which workers match.
    pub name: JobName,
    /// Its state.
    pub state: JobState,
    /// The data the next attempt starts from (a checkpoint replaces it; a finish may replace it).
    pub data: Value,
    /// What the running (or last) attempt reported with heartbeat or update, if anything.
    pub progress: Option<Value>,
    /// The result its last finish gave, if it gave one: apart from its data (see
    /// [`Finish::result`](crate::Finish::result)). A run that finished without one leaves none.
    pub result: Option<Value>,
    /// Higher runs first.
    pub priority: i32,
    /// How much of a worker's concurrency it uses.
    pub weight: u32,
    /// When it is (or was) due.
    pub run_at: Timestamp,
    /// Attempts started so far.
    pub attempt: u32,
    /// Attempts, backoff and jitter.
    pub retry: RetryPolicy,
    /// How long a worker holds it without a heartbeat.
    pub lease_timeout: Duration,
    /// The longest one attempt may run, heartbeats or not, if limited.
    pub timeout: Option<Duration>,
    /// The key that no other live job may hold, if any.
    pub unique_key: Option<UniqueKey>,
    /// The debounce key its pushes shared, if it was debounced (see [`Debounce`](crate::Debounce)).
    pub debounce_key: Option<DebounceKey>,
    /// The key it holds for its throttle's period, if it was throttled (see [`Throttle`](crate::Throttle)).
    pub throttle_key: Option<ThrottleKey>,
    /// Its concurrency key, if it has one (see [`Concurrency`](crate::Concurrency)).
    pub concurrency_key: Option<ConcurrencyKey>,
    /// Its own limit for its key, instead of its queue's, if it has one.
    pub concurrency_limit: Option<u32>,
    /// The W3C trace context it was pushed with, if any: its worker runs it as part of that trace.
    pub trace_parent: Option<crate::names::TraceParent>,
    /// The batch it belongs to, if any (see [`CreateBatch`](crate::CreateBatch)).
    pub batch: Option<crate::BatchId>,
    /// Its tags, sorted.
    pub tags: Vec<Tag>,
    /// Its parent job, if any.
    pub parent: Option<JobId>,
    /// Whether someone marked it to keep an eye on (see [`Track`](crate::Track)).
    pub tracked: bool,
    /// While it is a child waiting for the run of its parent that created it to finish.
    pub awaits_parent: bool,
    /// Whose the children are that its runs create.
    pub children: Children,
    /// When its current run was first due: `run_at` moves when an attempt is retried, this does not (for a
    /// recurring job, the slot the run is for).
    pub due_at: Timestamp,
    /// The jobs it still waits for, sorted: its dependencies that have not completed yet.
    pub depends_on: Vec<JobId>,
    /// The worker holding it, while running.
    pub worker: Option<WorkerId>,
    /// When its lease runs out, while running.
    pub lease_expires_at: Option<Timestamp>,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// When its first attempt started.
    pub started_at: Option<Timestamp>,
    /// When it completed, failed or was cancelled.
    pub finished_at: Option<Timestamp>,
    /// The last attempt's error message.
    pub error: Option<String>,
    /// The failure group, once failed (for a recurring job: of its last failed run).
    pub failure_group: Option<String>,
    /// For a recurring job, its schedule: a repeat specification (upper-cased) or a cron expression.
    pub schedule: Option<String>,
    /// For a cron schedule, its time zone.
    pub time_zone: Option<String>,
    /// One record per attempt, oldest first. Filled by [`Jobs::get`](crate::Jobs::get); empty in listings.
    pub history: Vec<Attempt>,
    /// How many steps its handler has recorded ([`RecordStep`](crate::RecordStep)).
    pub step_count: u32,
    /// The steps its handler has recorded, in the order they were: filled by [`Jobs::get`](crate::Jobs::get) and
    /// for a worker's claim, so that a handler that runs again finds them; empty in listings.
    pub steps: Vec<Step>,
    /// The key of the signal its handler waits for ([`WaitForSignal`](crate::WaitForSignal)), while it waits: the
    /// job is `scheduled` until the signal comes or the wait times out (its `run_at`).
    pub awaits_signal: Option<crate::SignalKey>,
    /// When its handler suspended it (a sleep, a wait for a signal or for its children), while it stays so: it is
    /// `scheduled` until its time (or a signal), or `waiting` for its children.
    pub suspended_at: Option<Timestamp>,
}

/// A step a job's handler recorded: a piece of its run whose result is kept, so that a later attempt reads it
/// instead of running that piece again (see [`JobContext::step`](crate::JobContext::step)).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Its name within the job (a name the handler used again in one run is numbered: `charge#2`).
    pub name: String,
    /// What it produced.
    pub result: Value,
    /// The attempt that recorded it.
    pub attempt: u32,
    /// When it was recorded.
    pub recorded_at: Timestamp,
}
