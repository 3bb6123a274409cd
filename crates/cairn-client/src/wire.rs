//! The JSON bodies of Cairn's HTTP API (`/v1/…`), shared by the server and this client so the two cannot drift.
//!
//! Conventions: times are RFC 3339 strings in UTC; durations are whole milliseconds in fields ending in `_ms`;
//! lease tokens are strings (they are 64-bit, more than a JavaScript number holds exactly); unknown fields are
//! refused, so a misspelt option is an error rather than silently ignored. Conversions to and from the engine's
//! types live here too; validation does not: the engine checks every field and names it in its errors.

use std::time::Duration;

use cairn::{
    ActivityEvent, ActivityPage, Attempt, AttemptOutcome, ChangeTags, ClaimedJob, ConfigEntry,
    ConfigKey, ConfigUnit, Continue, Counts, Dequeue, Enqueued, Error, ErrorKind, FailureGroup,
    Job, JobId, JobName, JobState, Lease, MissedSlots, Push, QueueName, QueueOrder, QueueStats,
    Recurring, RecurringInfo, RetryPolicy, RunUsage, Stats, Summary, Tag, Unfail, UniqueKey,
    WorkerId, WorkerInfo, WorkerStats,
};
use cairn::{SqlQuery, SqlResult};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// A job to enqueue. Only `name` is required.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// The queue; `default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// What the job is, such as `email.send`; workers take jobs by name.
    pub name: String,
    /// The job's input (any JSON value); `{}` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Higher runs first; 0 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// How much of a worker's concurrency the job takes; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Do not run before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub run_at: Option<Timestamp>,
    /// Do not run for this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Attempts and backoff; the queue's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicyBody>,
    /// How long a lease lasts without a heartbeat, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_timeout_ms: Option<u64>,
    /// The longest one attempt may run, heartbeats or not, in milliseconds (at most a day); no limit when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// While a live job holds this key, enqueueing another with it returns that job (`existing: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// Labels for listing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The job creating this one: it must be running (the child then starts when that run finishes) or waiting for
    /// its children (a child adding a sibling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<i64>,
    /// Jobs that must complete before this one runs; it is `waiting` until then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<i64>,
    /// Run again on this schedule: Bedrock's repeat syntax (`FINISHED, +5 MINUTES`) or a cron expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The IANA time zone of a cron `schedule`; UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// A job's attempts and the backoff between them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryPolicyBody {
    /// Attempts in all, counting the first.
    pub max_attempts: u32,
    /// The delay after the first failed attempt.
    pub initial_delay_ms: u64,
    /// Each further delay is this many times the previous one.
    pub multiplier: f64,
    /// No delay is longer than this.
    pub max_delay_ms: u64,
    /// The fraction by which a delay is randomly lengthened or shortened.
    pub jitter: f64,
}

/// Many jobs to enqueue in one transaction: all or none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PushBatchRequest {
    /// The jobs, in order.
    pub jobs: Vec<PushRequest>,
}

/// An enqueued job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EnqueuedBody {
    /// The job's id.
    pub id: i64,
    /// Its state: `queued`, or `scheduled` when it waits for its time.
    pub state: String,
    /// Whether a live job already held the unique key (and this is that job).
    pub existing: bool,
}

/// The jobs of a batch enqueue, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EnqueuedBatchBody {
    /// One entry per requested job.
    pub jobs: Vec<EnqueuedBody>,
}

/// A request for ready jobs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DequeueRequest {
    /// Who takes the jobs; recorded in their history.
    pub worker: String,
    /// Queues to take from; `["default"]` when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<String>,
    /// `ordered` (earlier queues first, the default) or `round_robin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// With `round_robin`, how many jobs each queue gives per turn, one weight per entry of `queues` (1 each when
    /// empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub weights: Vec<u32>,
    /// Job name patterns (GLOB: `email.*`; a `*`, `?` or `[` that a name holds is written `[*]`, `[?]`, `[[]`); any
    /// name when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// The most jobs to take; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The most total weight to take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_weight: Option<u32>,
    /// Wait up to this long for a job (a long poll), returning the moment one is ready; 0 or absent answers at
    /// once. The server caps it at its `max_wait`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    /// How long these leases last before their first heartbeat, instead of each job's lease timeout (for a
    /// worker that cannot heartbeat); heartbeats never shorten a lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_timeout_ms: Option<u64>,
    /// Only jobs of exactly this priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// Jobs taken, each with its lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct DequeueBody {
    /// Empty when no job was ready before the wait ended.
    pub jobs: Vec<ClaimedJobBody>,
}

/// A job taken by a worker, and the lease under which it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ClaimedJobBody {
    /// The job as the attempt starts.
    pub job: JobBody,
    /// The lease; send its `token` with every call about the job.
    pub lease: LeaseBody,
}

/// A lease on a running job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct LeaseBody {
    /// The job.
    pub job: i64,
    /// The fencing token: calls without this exact token are refused.
    pub token: String,
    /// The worker holding the lease.
    pub worker: String,
    /// When the lease runs out unless extended by a heartbeat.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub expires_at: Timestamp,
}

/// A job, as `GET /v1/jobs/{id}` and listings show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JobBody {
    /// The job's id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its name.
    pub name: String,
    /// `scheduled`, `queued`, `waiting`, `running`, `completed`, `failed` or `cancelled`.
    pub state: String,
    /// Its data: the input, the last checkpoint, or the result.
    pub data: Value,
    /// The last progress reported.
    pub progress: Option<Value>,
    /// Higher runs first.
    pub priority: i32,
    /// Its share of a worker's concurrency.
    pub weight: u32,
    /// When it may run (next).
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub run_at: Timestamp,
    /// Attempts started so far.
    pub attempt: u32,
    /// Attempts and backoff.
    pub retry: RetryPolicyBody,
    /// How long a lease lasts without a heartbeat.
    pub lease_timeout_ms: u64,
    /// The longest one attempt may run, heartbeats or not, if limited.
    pub timeout_ms: Option<u64>,
    /// Its unique key, if any.
    pub unique_key: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// The job that created it.
    pub parent: Option<i64>,
    /// True while it is a child waiting for the run of its parent that created it to finish.
    pub awaits_parent: bool,
    /// True when someone marked it to keep an eye on.
    pub tracked: bool,
    /// The jobs it still waits for: its dependencies that have not completed.
    pub depends_on: Vec<i64>,
    /// The worker holding it, while it runs.
    pub worker: Option<String>,
    /// When the running attempt's lease runs out.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub lease_expires_at: Option<Timestamp>,
    /// When it was enqueued.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub created_at: Timestamp,
    /// When its latest attempt started.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub started_at: Option<Timestamp>,
    /// When it finished.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub finished_at: Option<Timestamp>,
    /// The last error.
    pub error: Option<String>,
    /// Why it failed, for grouping alike failures.
    pub failure_group: Option<String>,
    /// Its repeat or cron schedule.
    pub schedule: Option<String>,
    /// The time zone of a cron schedule.
    pub time_zone: Option<String>,
    /// Its attempts, oldest first (empty in listings).
    pub history: Vec<AttemptBody>,
}

/// One attempt at running a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct AttemptBody {
    /// 1 for the first attempt.
    pub number: u32,
    /// The worker that held the job.
    pub worker: String,
    /// When the worker took the job.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub started_at: Timestamp,
    /// When it ended; null while it runs.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub finished_at: Option<Timestamp>,
    /// `completed`, `retried`, `failed`, `lease_expired`, `cancelled`, `crashed`, `released` or `requeued`; null
    /// while it runs.
    pub outcome: Option<String>,
    /// The error it ended with.
    pub error: Option<String>,
    /// What its process used, when the worker measured it.
    pub usage: Option<UsageBody>,
}

/// What an attempt's process used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UsageBody {
    /// Wall-clock run time.
    pub run_ms: u64,
    /// CPU time, user plus system.
    pub cpu_ms: u64,
    /// Peak resident memory, in bytes.
    pub peak_memory: u64,
}

/// A page of jobs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct JobPageBody {
    /// The jobs on this page.
    pub jobs: Vec<JobBody>,
    /// Pass as `before` for the next page; null on the last page.
    pub next: Option<i64>,
}

/// A call under a lease that carries nothing else (release).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// The lease's token.
    pub token: String,
}

/// Extend a lease, optionally reporting progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The lease's token.
    pub token: String,
    /// Progress to record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
}

/// A lease's new expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct LeaseExpiryBody {
    /// When the lease now runs out.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub lease_expires_at: Timestamp,
}

/// Save what a retry starts from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CheckpointRequest {
    /// The lease's token.
    pub token: String,
    /// The data the next attempt starts from.
    pub data: Value,
}

/// Record progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    /// The lease's token.
    pub token: String,
    /// The progress to record.
    pub progress: Value,
}

/// Complete the job, or with `next`, this step of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FinishRequest {
    /// The lease's token.
    pub token: String,
    /// The job's result, replacing its data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// What the attempt's process used, kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
    /// Instead of completing, the job goes on in another queue (the attempt ends and the job moves in one step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ContinueBody>,
}

/// Completes many jobs at once (`POST /v1/finish`): for a worker that reports several jobs together. Each job is
/// answered on its own, in `results`; only a malformed request is refused whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FinishManyRequest {
    /// The jobs, at most 1,000.
    pub jobs: Vec<FinishItem>,
}

/// One job of a [`FinishManyRequest`]: what `POST /v1/jobs/{id}/finish` takes, with the job's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FinishItem {
    /// The job's id.
    pub id: i64,
    /// The lease's token.
    pub token: String,
    /// The job's result, replacing its data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// What the attempt's process used, kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
    /// Instead of completing, the job goes on in another queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<ContinueBody>,
}

/// What became of each job of a [`FinishManyRequest`], in the request's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FinishManyBody {
    /// One per job.
    pub results: Vec<FinishResult>,
}

/// One job's answer: done (completed, or moved on to its next queue) unless `error` says why not, as the one-job
/// call's error would (`lease_lost`, say).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FinishResult {
    /// The job's id.
    pub id: i64,
    /// Why the job was not finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// Where a finished step of a job goes on: another queue, after a delay or once other jobs complete, with fresh
/// attempts and the data it finished with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ContinueBody {
    /// The queue the job goes on in.
    pub queue: String,
    /// How long from now until it is ready again, in milliseconds (at most a year); at once when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Jobs that must complete before it runs again (each must exist and not be cancelled; a completed one counts
    /// as met); it is `waiting` until then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<i64>,
}

/// Retry the job after a transient error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryRequest {
    /// The lease's token.
    pub token: String,
    /// What went wrong.
    pub error: String,
    /// Wait this long instead of the job's backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Run again at this time instead of after the job's backoff (give this or `delay_ms`, not both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub run_at: Option<Timestamp>,
    /// What the attempt's process used, kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
}

/// Fail the job for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FailRequest {
    /// The lease's token.
    pub token: String,
    /// The kind of failure, such as `invalid-address`.
    pub group: String,
    /// What happened.
    pub message: String,
    /// What the attempt's process used, kept in the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageBody>,
}

/// A job's state after a call that changes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct StateBody {
    /// The job's new state.
    pub state: String,
}

/// The answer of a call that has nothing to report but success: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct EmptyBody {}

/// Change a job's priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PriorityRequest {
    /// The new priority.
    pub priority: i32,
}

/// Move a job that has not started to another time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RescheduleRequest {
    /// When it may run.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub run_at: Timestamp,
}

/// Run a job again, whatever became of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RequeueRequest {
    /// When it may run; now when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub run_at: Option<Timestamp>,
}

/// Add and remove dependencies of a job that has not started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DependenciesRequest {
    /// Jobs it must now also wait for: each must exist, not be cancelled, and not wait (directly or not) for this
    /// job. A completed one counts as met.
    #[serde(default)]
    pub add: Vec<i64>,
    /// Jobs it no longer waits for.
    #[serde(default)]
    pub remove: Vec<i64>,
}

/// Add and remove tags of a job, in any state. Adding a tag it has, or removing one it lacks, is not an error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TagsRequest {
    /// Tags to add (each 1 to 128 bytes, no control characters).
    #[serde(default)]
    pub add: Vec<String>,
    /// Tags to remove.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// One queue: whether it is paused, and its jobs counted by state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct QueueStatsBody {
    /// The queue.
    pub queue: String,
    /// Whether it hands out nothing for now (everything else works).
    pub paused: bool,
    /// The most of its jobs that may run at once across all workers, if limited.
    pub concurrency: Option<u32>,
    /// How many of its jobs may start per period across all workers, if limited.
    pub rate_limit: Option<RateLimitBody>,
    /// With priority aging, a ready job gains one priority point per this many milliseconds of waiting.
    #[serde(default)]
    pub priority_aging_ms: Option<u64>,
    /// Jobs waiting for their `run_at`.
    pub scheduled: u64,
    /// Jobs ready to be taken.
    pub queued: u64,
    /// Jobs waiting on other jobs.
    pub waiting: u64,
    /// Jobs leased to a worker whose lease has not run out.
    pub running: u64,
    /// Jobs whose lease ran out and that the queue has not retried yet (their worker is lost or hung).
    pub stalled: u64,
    /// Failed jobs.
    pub failed: u64,
    /// Completed jobs (until retention deletes them).
    pub completed: u64,
    /// Cancelled jobs (until retention deletes them).
    pub cancelled: u64,
}

/// Set or remove a queue's concurrency limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyRequest {
    /// The most of the queue's jobs that may run at once across all workers; `null` removes the limit.
    pub concurrency: Option<u32>,
}

/// Set or remove a queue's rate limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RateRequest {
    /// At most this many of the queue's jobs start per period across all workers; `null` removes the limit.
    pub rate: Option<RateLimitBody>,
}

/// Turn a queue's priority aging on or off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AgingRequest {
    /// A ready job gains one priority point per this many milliseconds of waiting (1 to 86,400,000); `null` for
    /// strict priority.
    pub every_ms: Option<u64>,
}

/// A rate limit: at most `jobs` starts per `per_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RateLimitBody {
    /// How many jobs may start per period.
    pub jobs: u32,
    /// The period, in milliseconds.
    pub per_ms: u64,
}

impl From<cairn::RateLimit> for RateLimitBody {
    fn from(r: cairn::RateLimit) -> Self {
        RateLimitBody {
            jobs: r.jobs,
            per_ms: u64::try_from(r.per.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl From<RateLimitBody> for cairn::RateLimit {
    fn from(r: RateLimitBody) -> Self {
        cairn::RateLimit {
            jobs: r.jobs,
            per: Duration::from_millis(r.per_ms),
        }
    }
}

/// Every queue that has jobs or settings, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct QueueListBody {
    /// The queues.
    pub queues: Vec<QueueStatsBody>,
}

/// The next jobs a worker taking from a queue would get, in that order, without taking them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct PeekBody {
    /// The jobs, in claim order (without their history); empty while the queue is paused.
    pub jobs: Vec<JobBody>,
}

/// One failure group: how many failed jobs it holds, and when they failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FailureGroupBody {
    /// The group: `retries-exhausted`, or the group a worker failed the job with.
    pub group: String,
    /// How many jobs are failed in it.
    pub count: u64,
    /// When the first of them failed.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub first_failed_at: Timestamp,
    /// When the last of them failed.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub last_failed_at: Timestamp,
}

/// Every failure group that holds failed jobs, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct FailureGroupListBody {
    /// The groups.
    pub groups: Vec<FailureGroupBody>,
}

/// Put the oldest failed jobs of a failure group back in a queue, ready now, with fresh attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UnfailRequest {
    /// The queue to move them to; each job's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// How many at most, oldest first (1 to 1,000,000); all of them (up to 1,000,000) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// What an unfail did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct UnfailBody {
    /// How many jobs went back (a job whose unique key another live job holds stays failed).
    pub moved: u64,
}

/// A worker the queue has seen: when it took jobs or heartbeated, and what it holds now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct WorkerBody {
    /// The worker's id, as it named itself when taking jobs.
    pub id: String,
    /// When it first took jobs or heartbeated.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub first_seen: Timestamp,
    /// When it last did (to a second).
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub last_seen: Timestamp,
    /// The jobs it holds, oldest first.
    pub jobs: Vec<i64>,
    /// Those of its jobs whose lease ran out and that the queue has not retried yet.
    pub stalled: Vec<i64>,
}

/// Every worker the queue remembers, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct WorkerListBody {
    /// The workers.
    pub workers: Vec<WorkerBody>,
}

/// Replace the data of a job that is not running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetDataRequest {
    /// The new data.
    pub data: Value,
}

/// A recurring template: at every slot of `cron` in `time_zone`, a job like `job` is created, due at the slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RecurringRequest {
    /// A cron expression, such as `0 4 * * *`.
    pub cron: String,
    /// An IANA time zone such as `Europe/Berlin`; UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Slots that passed while the server was down: `skip` them, run `once` for all of them (the default), or run
    /// `all` of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<String>,
    /// The job to create at each slot; its `run_at`, `delay_ms`, `unique_key`, `parent` and `schedule` must be
    /// unset (the slot times each run).
    pub job: PushRequest,
}

/// A recurring template as stored, and when it runs next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct RecurringBody {
    /// The template's key.
    pub key: String,
    /// Its cron expression.
    pub cron: String,
    /// Its time zone.
    pub time_zone: String,
    /// The next slot, if the schedule has one.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub next_run: Option<Timestamp>,
    /// The latest slot a job was created for.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub last_run: Option<Timestamp>,
}

/// Every recurring template, by key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct RecurringListBody {
    /// The templates.
    pub recurring: Vec<RecurringBody>,
}

/// One engine option that can change at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ConfigEntryBody {
    /// The option's name, such as `retention.max_age`.
    pub key: String,
    /// What its values are: `ms` (a duration in milliseconds), `count` (a whole number) or `number`.
    pub unit: String,
    /// The value in force; `null` for off (keep forever, no limit).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub value: serde_json::Value,
    /// The value the server was started with, in force when nothing is set.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub default: serde_json::Value,
    /// When the value was set at run time; `null` when it is the default.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime))]
    pub set_at: Option<Timestamp>,
}

/// Every engine option that can change at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ConfigListBody {
    /// The options, in a fixed order.
    pub config: Vec<ConfigEntryBody>,
}

/// Set an option at run time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetConfigRequest {
    /// The new value in the option's unit (milliseconds for durations), or `null` for off where the option
    /// allows it. Required: `DELETE` goes back to the default.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub value: serde_json::Value,
}

impl From<&ConfigEntry> for ConfigEntryBody {
    fn from(entry: &ConfigEntry) -> Self {
        ConfigEntryBody {
            key: entry.key.as_str().to_owned(),
            unit: match entry.key.unit() {
                ConfigUnit::Duration => "ms",
                ConfigUnit::Count => "count",
                ConfigUnit::Number => "number",
            }
            .to_owned(),
            value: entry.value.to_json(),
            default: entry.default.to_json(),
            set_at: entry.set_at,
        }
    }
}

impl ConfigEntryBody {
    /// The engine's form of the entry.
    ///
    /// # Errors
    /// A key or value this version does not know.
    pub fn to_entry(&self) -> cairn::Result<ConfigEntry> {
        let key = ConfigKey::parse(&self.key)?;
        Ok(ConfigEntry {
            key,
            value: key.value_from_json(&self.value)?,
            default: key.value_from_json(&self.default)?,
            set_at: self.set_at,
        })
    }
}

/// Every error response: `{"error": {"kind", "field", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ErrorDetail {
    /// A stable name to branch on: `invalid_input`, `not_found`, `lease_lost`, `invalid_state`,
    /// `unauthorized`, `payload_too_large`, `method_not_allowed`, `unavailable`, `storage`.
    pub kind: String,
    /// For `invalid_input`, the field that broke a rule (a path such as `jobs[2].priority`).
    pub field: Option<String>,
    /// What happened, for people.
    pub message: String,
}

/// The server's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct HealthBody {
    /// `ok`.
    pub status: String,
    /// The server's version.
    pub version: String,
}

// ---- Conversions between the wire and the engine. ----

fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn to_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl From<RetryPolicyBody> for RetryPolicy {
    fn from(b: RetryPolicyBody) -> Self {
        RetryPolicy {
            max_attempts: b.max_attempts,
            initial_delay: millis(b.initial_delay_ms),
            multiplier: b.multiplier,
            max_delay: millis(b.max_delay_ms),
            jitter: b.jitter,
        }
    }
}

impl From<RetryPolicy> for RetryPolicyBody {
    fn from(p: RetryPolicy) -> Self {
        RetryPolicyBody {
            max_attempts: p.max_attempts,
            initial_delay_ms: to_millis(p.initial_delay),
            multiplier: p.multiplier,
            max_delay_ms: to_millis(p.max_delay),
            jitter: p.jitter,
        }
    }
}

impl From<PushRequest> for Push {
    fn from(r: PushRequest) -> Self {
        let mut push = Push::new(r.name);
        if let Some(queue) = r.queue {
            push.queue = queue;
        }
        if let Some(data) = r.data {
            push.data = data;
        }
        if let Some(priority) = r.priority {
            push.priority = priority;
        }
        if let Some(weight) = r.weight {
            push.weight = weight;
        }
        push.run_at = r.run_at;
        push.delay = r.delay_ms.map(millis);
        push.retry = r.retry.map(RetryPolicy::from);
        push.lease_timeout = r.lease_timeout_ms.map(millis);
        push.timeout = r.timeout_ms.map(millis);
        push.unique_key = r.unique_key;
        push.tags = r.tags;
        push.parent = r.parent.map(JobId);
        push.depends_on = r.depends_on.into_iter().map(JobId).collect();
        push.schedule = r.schedule;
        push.time_zone = r.time_zone;
        push
    }
}

impl From<Enqueued> for EnqueuedBody {
    fn from(e: Enqueued) -> Self {
        EnqueuedBody {
            id: e.id.0,
            state: e.state.as_str().to_owned(),
            existing: e.existing,
        }
    }
}

impl DequeueRequest {
    /// The engine's request, with the wait capped at `max_wait`.
    pub fn into_dequeue(self, max_wait: Duration) -> Result<Dequeue, Error> {
        let order = match self.order.as_deref() {
            None | Some("ordered") => QueueOrder::Ordered,
            Some("round_robin") => QueueOrder::RoundRobin,
            Some(other) => {
                return Err(Error::from_parts(
                    ErrorKind::InvalidInput,
                    Some("order".into()),
                    format!("order: must be ordered or round_robin, got {other:?}"),
                ));
            }
        };
        Ok(Dequeue {
            worker: self.worker,
            queues: self.queues,
            order,
            weights: self.weights,
            names: self.names,
            limit: self.limit.unwrap_or(1),
            max_weight: self.max_weight,
            wait: millis(self.wait_ms.unwrap_or(0)).min(max_wait),
            lease_timeout: self.lease_timeout_ms.map(millis),
            priority: self.priority,
        })
    }
}

impl From<&Dequeue> for DequeueRequest {
    fn from(d: &Dequeue) -> Self {
        DequeueRequest {
            worker: d.worker.clone(),
            queues: d.queues.clone(),
            order: Some(
                match d.order {
                    QueueOrder::RoundRobin => "round_robin",
                    _ => "ordered",
                }
                .to_owned(),
            ),
            weights: d.weights.clone(),
            names: d.names.clone(),
            limit: Some(d.limit),
            max_weight: d.max_weight,
            wait_ms: Some(to_millis(d.wait)),
            lease_timeout_ms: d.lease_timeout.map(to_millis),
            priority: d.priority,
        }
    }
}

impl From<&Lease> for LeaseBody {
    fn from(l: &Lease) -> Self {
        LeaseBody {
            job: l.job.0,
            token: l.token.to_string(),
            worker: l.worker.to_string(),
            expires_at: l.expires_at,
        }
    }
}

impl From<RunUsage> for UsageBody {
    fn from(u: RunUsage) -> Self {
        UsageBody {
            run_ms: to_millis(u.run_time),
            cpu_ms: to_millis(u.cpu_time),
            peak_memory: u.peak_memory,
        }
    }
}

impl From<UsageBody> for RunUsage {
    fn from(u: UsageBody) -> Self {
        RunUsage {
            run_time: millis(u.run_ms),
            cpu_time: millis(u.cpu_ms),
            peak_memory: u.peak_memory,
        }
    }
}

impl From<&Attempt> for AttemptBody {
    fn from(a: &Attempt) -> Self {
        AttemptBody {
            number: a.number,
            worker: a.worker.to_string(),
            started_at: a.started_at,
            finished_at: a.finished_at,
            outcome: a.outcome.map(|o| o.as_str().to_owned()),
            error: a.error.clone(),
            usage: a.usage.map(UsageBody::from),
        }
    }
}

impl From<&Job> for JobBody {
    fn from(j: &Job) -> Self {
        JobBody {
            id: j.id.0,
            queue: j.queue.to_string(),
            name: j.name.to_string(),
            state: j.state.as_str().to_owned(),
            data: j.data.clone(),
            progress: j.progress.clone(),
            priority: j.priority,
            weight: j.weight,
            run_at: j.run_at,
            attempt: j.attempt,
            retry: j.retry.into(),
            lease_timeout_ms: to_millis(j.lease_timeout),
            timeout_ms: j.timeout.map(to_millis),
            unique_key: j.unique_key.as_ref().map(|k| k.to_string()),
            tags: j.tags.iter().map(|t| t.to_string()).collect(),
            parent: j.parent.map(|p| p.0),
            awaits_parent: j.awaits_parent,
            tracked: j.tracked,
            depends_on: j.depends_on.iter().map(|d| d.0).collect(),
            worker: j.worker.as_ref().map(|w| w.to_string()),
            lease_expires_at: j.lease_expires_at,
            created_at: j.created_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
            error: j.error.clone(),
            failure_group: j.failure_group.clone(),
            schedule: j.schedule.clone(),
            time_zone: j.time_zone.clone(),
            history: j.history.iter().map(AttemptBody::from).collect(),
        }
    }
}

impl From<&ClaimedJob> for ClaimedJobBody {
    fn from(c: &ClaimedJob) -> Self {
        ClaimedJobBody {
            job: JobBody::from(&c.job),
            lease: LeaseBody::from(&c.lease),
        }
    }
}

/// An answer that did not read as Cairn's: the client reports it as [`ErrorKind::Unavailable`].
fn malformed(what: impl std::fmt::Display) -> Error {
    Error::from_parts(
        ErrorKind::Unavailable,
        None,
        format!("the server sent a malformed answer: {what}"),
    )
}

/// Parses a lease token as the wire carries it.
pub fn parse_token(field: &str, token: &str) -> Result<i64, Error> {
    token.parse().map_err(|_| {
        Error::from_parts(
            ErrorKind::InvalidInput,
            Some(field.to_owned()),
            format!("{field}: must be a lease token (a decimal integer), got {token:?}"),
        )
    })
}

impl LeaseBody {
    /// The engine's lease.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the body does not hold a valid lease.
    pub fn to_lease(&self) -> Result<Lease, Error> {
        Ok(Lease {
            job: JobId(self.job),
            token: self.token.parse().map_err(|_| malformed("lease.token"))?,
            worker: WorkerId::parse(self.worker.as_str()).map_err(malformed)?,
            expires_at: self.expires_at,
        })
    }
}

impl JobBody {
    /// The engine's job, as a handler sees it.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the body does not hold a valid job.
    pub fn to_job(&self) -> Result<Job, Error> {
        let history = self
            .history
            .iter()
            .map(|a| {
                Ok(Attempt {
                    number: a.number,
                    worker: WorkerId::parse(a.worker.as_str()).map_err(malformed)?,
                    started_at: a.started_at,
                    finished_at: a.finished_at,
                    outcome: a.outcome.as_deref().and_then(AttemptOutcome::parse),
                    error: a.error.clone(),
                    usage: a.usage.map(RunUsage::from),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Job {
            id: JobId(self.id),
            queue: QueueName::parse(self.queue.as_str()).map_err(malformed)?,
            name: JobName::parse(self.name.as_str()).map_err(malformed)?,
            state: self.state.parse::<JobState>().map_err(malformed)?,
            data: self.data.clone(),
            progress: self.progress.clone(),
            priority: self.priority,
            weight: self.weight,
            run_at: self.run_at,
            attempt: self.attempt,
            retry: self.retry.into(),
            lease_timeout: millis(self.lease_timeout_ms),
            timeout: self.timeout_ms.map(millis),
            unique_key: self
                .unique_key
                .as_deref()
                .map(UniqueKey::parse)
                .transpose()
                .map_err(malformed)?,
            tags: self
                .tags
                .iter()
                .map(|t| Tag::parse(t.as_str()))
                .collect::<Result<_, _>>()
                .map_err(malformed)?,
            parent: self.parent.map(JobId),
            awaits_parent: self.awaits_parent,
            tracked: self.tracked,
            depends_on: self.depends_on.iter().copied().map(JobId).collect(),
            worker: self
                .worker
                .as_deref()
                .map(WorkerId::parse)
                .transpose()
                .map_err(malformed)?,
            lease_expires_at: self.lease_expires_at,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            error: self.error.clone(),
            failure_group: self.failure_group.clone(),
            schedule: self.schedule.clone(),
            time_zone: self.time_zone.clone(),
            history,
        })
    }
}

impl ErrorBody {
    /// The wire form of an engine error.
    pub fn from_error(e: &Error) -> Self {
        ErrorBody {
            error: ErrorDetail {
                kind: e.kind().as_str().to_owned(),
                field: e.field().map(str::to_owned),
                message: e.to_string(),
            },
        }
    }

    /// The engine error this body stands for, as a client should see it: a server that is closing or cannot
    /// open its database is [`ErrorKind::Unavailable`] (try again later), never [`ErrorKind::Closed`], which
    /// would stop a worker for good.
    pub fn into_error(self) -> Error {
        let kind = match self.error.kind.as_str() {
            "invalid_input" | "payload_too_large" => ErrorKind::InvalidInput,
            "not_found" => ErrorKind::NotFound,
            "lease_lost" => ErrorKind::LeaseLost,
            "invalid_state" => ErrorKind::InvalidState,
            "storage" => ErrorKind::Storage,
            "unauthorized" => ErrorKind::Unauthorized,
            _ => ErrorKind::Unavailable,
        };
        Error::from_parts(kind, self.error.field, self.error.message)
    }
}

impl From<&Push> for PushRequest {
    fn from(p: &Push) -> Self {
        PushRequest {
            queue: Some(p.queue.clone()),
            name: p.name.clone(),
            data: Some(p.data.clone()),
            priority: Some(p.priority),
            weight: Some(p.weight),
            run_at: p.run_at,
            delay_ms: p.delay.map(to_millis),
            retry: p.retry.map(RetryPolicyBody::from),
            lease_timeout_ms: p.lease_timeout.map(to_millis),
            timeout_ms: p.timeout.map(to_millis),
            unique_key: p.unique_key.clone(),
            tags: p.tags.clone(),
            parent: p.parent.map(|j| j.0),
            depends_on: p.depends_on.iter().map(|j| j.0).collect(),
            schedule: p.schedule.clone(),
            time_zone: p.time_zone.clone(),
        }
    }
}

impl EnqueuedBody {
    /// The engine's answer.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] for an unknown state.
    pub fn to_enqueued(&self) -> Result<Enqueued, Error> {
        Ok(Enqueued {
            id: JobId(self.id),
            state: self.state.parse().map_err(malformed)?,
            existing: self.existing,
        })
    }
}

impl RecurringRequest {
    /// The engine's template under `key`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] on `missed` when it is not `skip`, `once` or `all`.
    pub fn into_recurring(self, key: String) -> Result<Recurring, Error> {
        let missed = match self.missed.as_deref() {
            None | Some("once") => MissedSlots::RunOnce,
            Some("skip") => MissedSlots::Skip,
            Some("all") => MissedSlots::RunAll,
            Some(other) => {
                return Err(Error::from_parts(
                    ErrorKind::InvalidInput,
                    Some("missed".into()),
                    format!("missed: must be skip, once or all, got {other:?}"),
                ));
            }
        };
        Ok(Recurring {
            key,
            cron: self.cron,
            time_zone: self.time_zone.unwrap_or_else(|| "UTC".to_owned()),
            missed,
            job: Push::from(self.job),
        })
    }
}

impl From<&Recurring> for RecurringRequest {
    fn from(r: &Recurring) -> Self {
        RecurringRequest {
            cron: r.cron.clone(),
            time_zone: Some(r.time_zone.clone()),
            missed: Some(
                match r.missed {
                    MissedSlots::Skip => "skip",
                    MissedSlots::RunAll => "all",
                    _ => "once",
                }
                .to_owned(),
            ),
            job: PushRequest::from(&r.job),
        }
    }
}

impl From<&RecurringInfo> for RecurringBody {
    fn from(info: &RecurringInfo) -> Self {
        RecurringBody {
            key: info.key.clone(),
            cron: info.cron.clone(),
            time_zone: info.time_zone.clone(),
            next_run: info.next_run,
            last_run: info.last_run,
        }
    }
}

impl From<RecurringBody> for RecurringInfo {
    fn from(body: RecurringBody) -> Self {
        RecurringInfo {
            key: body.key,
            cron: body.cron,
            time_zone: body.time_zone,
            next_run: body.next_run,
            last_run: body.last_run,
        }
    }
}

impl From<&QueueStats> for QueueStatsBody {
    fn from(s: &QueueStats) -> Self {
        QueueStatsBody {
            queue: s.queue.clone(),
            paused: s.paused,
            concurrency: s.concurrency,
            rate_limit: s.rate_limit.map(RateLimitBody::from),
            priority_aging_ms: s.priority_aging.map(to_millis),
            scheduled: s.scheduled,
            queued: s.queued,
            waiting: s.waiting,
            running: s.running,
            stalled: s.stalled,
            failed: s.failed,
            completed: s.completed,
            cancelled: s.cancelled,
        }
    }
}

impl From<QueueStatsBody> for QueueStats {
    fn from(b: QueueStatsBody) -> Self {
        QueueStats {
            queue: b.queue,
            paused: b.paused,
            concurrency: b.concurrency,
            rate_limit: b.rate_limit.map(cairn::RateLimit::from),
            priority_aging: b.priority_aging_ms.map(Duration::from_millis),
            scheduled: b.scheduled,
            queued: b.queued,
            waiting: b.waiting,
            running: b.running,
            stalled: b.stalled,
            failed: b.failed,
            completed: b.completed,
            cancelled: b.cancelled,
        }
    }
}

impl From<&FailureGroup> for FailureGroupBody {
    fn from(g: &FailureGroup) -> Self {
        FailureGroupBody {
            group: g.group.clone(),
            count: g.count,
            first_failed_at: g.first_failed_at,
            last_failed_at: g.last_failed_at,
        }
    }
}

impl From<FailureGroupBody> for FailureGroup {
    fn from(b: FailureGroupBody) -> Self {
        FailureGroup {
            group: b.group,
            count: b.count,
            first_failed_at: b.first_failed_at,
            last_failed_at: b.last_failed_at,
        }
    }
}

impl From<&Unfail> for UnfailRequest {
    fn from(u: &Unfail) -> Self {
        UnfailRequest {
            queue: u.queue.clone(),
            limit: Some(u.limit),
        }
    }
}

impl UnfailRequest {
    /// The engine's unfail of `group`; without a limit, as many as one unfail moves ([`cairn::MAX_UNFAIL`]).
    pub fn into_unfail(self, group: String) -> Unfail {
        Unfail {
            group,
            queue: self.queue,
            limit: self.limit.unwrap_or(cairn::MAX_UNFAIL),
        }
    }
}

impl From<&ChangeTags> for TagsRequest {
    fn from(c: &ChangeTags) -> Self {
        TagsRequest {
            add: c.add.clone(),
            remove: c.remove.clone(),
        }
    }
}

impl TagsRequest {
    /// The engine's change of `job`'s tags.
    pub fn into_change(self, job: JobId) -> ChangeTags {
        ChangeTags {
            job,
            add: self.add,
            remove: self.remove,
        }
    }
}

impl From<&Continue> for ContinueBody {
    fn from(c: &Continue) -> Self {
        ContinueBody {
            queue: c.queue.clone(),
            delay_ms: c.delay.map(to_millis),
            depends_on: c.depends_on.iter().map(|j| j.0).collect(),
        }
    }
}

impl From<ContinueBody> for Continue {
    fn from(b: ContinueBody) -> Self {
        Continue {
            queue: b.queue,
            delay: b.delay_ms.map(millis),
            depends_on: b.depends_on.into_iter().map(JobId).collect(),
        }
    }
}

impl From<&WorkerInfo> for WorkerBody {
    fn from(w: &WorkerInfo) -> Self {
        WorkerBody {
            id: w.id.to_string(),
            first_seen: w.first_seen,
            last_seen: w.last_seen,
            jobs: w.jobs.iter().map(|j| j.0).collect(),
            stalled: w.stalled.iter().map(|j| j.0).collect(),
        }
    }
}

impl WorkerBody {
    /// The engine's worker.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when the body does not hold a valid worker id.
    pub fn to_worker(&self) -> Result<WorkerInfo, Error> {
        Ok(WorkerInfo {
            id: WorkerId::parse(self.id.as_str()).map_err(malformed)?,
            first_seen: self.first_seen,
            last_seen: self.last_seen,
            jobs: self.jobs.iter().copied().map(JobId).collect(),
            stalled: self.stalled.iter().copied().map(JobId).collect(),
        })
    }
}

/// Transition counts over a window or a bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct CountsBody {
    /// Jobs created (or moved on to the queue).
    pub added: u64,
    /// Attempts started.
    pub started: u64,
    /// Attempts that completed their job.
    pub finished: u64,
    /// Attempts that ended with another one scheduled.
    pub retried: u64,
    /// Jobs that failed for good.
    pub failed: u64,
}

/// One bucket of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct StatsPointBody {
    /// The bucket's start.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub at: Timestamp,
    /// Jobs created in it.
    pub added: u64,
    /// Attempts started in it.
    pub started: u64,
    /// Attempts that completed their job in it.
    pub finished: u64,
    /// Attempts retried in it.
    pub retried: u64,
    /// Jobs that failed for good in it.
    pub failed: u64,
    /// The mean wait of the attempts that started in it.
    pub wait_mean_ms: Option<f64>,
    /// The longest wait.
    pub wait_max_ms: Option<u64>,
    /// The mean run time of the attempts that ended in it.
    pub run_mean_ms: Option<f64>,
    /// The longest run time.
    pub run_max_ms: Option<u64>,
}

/// One bucket of a histogram: durations from `from_ms` (inclusive) to `to_ms` (exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct HistogramBucketBody {
    /// The lower bound.
    pub from_ms: u64,
    /// The upper bound.
    pub to_ms: u64,
    /// How many durations fell in it.
    pub count: u64,
}

/// A summary of durations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SummaryBody {
    /// How many.
    pub count: u64,
    /// Their mean.
    pub mean_ms: Option<f64>,
    /// Their standard deviation (of the population); absent for service times.
    pub stddev_ms: Option<f64>,
    /// The shortest.
    pub min_ms: Option<u64>,
    /// The longest.
    pub max_ms: Option<u64>,
    /// Non-empty buckets, shortest first (qless's resolution: seconds under a minute, minutes under an hour, hours
    /// under a day, then days); empty for service times.
    #[serde(default)]
    pub histogram: Vec<HistogramBucketBody>,
}

/// Statistics over the last hour, day or week.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct StatsBody {
    /// `hour`, `day` or `week`.
    pub period: String,
    /// The window's start.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub from: Timestamp,
    /// The window's end (the end of the current bucket).
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub to: Timestamp,
    /// How long one point is: a minute for the hour, an hour for the day and the week.
    pub bucket_ms: u64,
    /// One point per bucket, oldest first.
    pub series: Vec<StatsPointBody>,
    /// Counts over the window.
    pub totals: CountsBody,
    /// Wait times: ready → started.
    pub wait: SummaryBody,
    /// Run times: started → ended by the worker.
    pub run: SummaryBody,
    /// Service times: added → finished or failed for good.
    pub service: SummaryBody,
}

/// One worker's use over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct WorkerUsageBody {
    /// The worker.
    pub worker: String,
    /// How long it ran jobs (summed over its attempts).
    pub busy_ms: u64,
    /// How long it was there.
    pub available_ms: u64,
    /// busy / available; above 1 for a worker running several jobs at once.
    pub utilization: Option<f64>,
    /// Attempts it ended.
    pub attempts: u64,
}

/// One queue's use of the workers that ran its jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct QueueUsageBody {
    /// The queue.
    pub queue: String,
    /// How long workers ran its jobs.
    pub busy_ms: u64,
    /// How long those workers were there, in the hours they ran its jobs.
    pub available_ms: u64,
    /// busy / available.
    pub utilization: Option<f64>,
}

/// Worker utilization over a window (kept per clock hour).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct WorkerStatsBody {
    /// Per worker.
    pub workers: Vec<WorkerUsageBody>,
    /// Per queue.
    pub queues: Vec<QueueUsageBody>,
}

/// One transition in the activity log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ActivityEventBody {
    /// Its position in the log.
    pub id: i64,
    /// When it happened.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub at: Timestamp,
    /// added, started, heartbeat_lost, retried, finished, failed, cancelled, released, requeued, unfailed,
    /// worker_started, worker_stopped or worker_lost.
    pub event: String,
    /// The job, for a job's transition.
    pub job: Option<i64>,
    /// The queue.
    pub queue: Option<String>,
    /// The job's name.
    pub name: Option<String>,
    /// The worker.
    pub worker: Option<String>,
    /// An error message, a reason, a count.
    pub detail: Option<String>,
}

/// A page of the activity log, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ActivityPageBody {
    /// The events.
    pub events: Vec<ActivityEventBody>,
    /// Pass as `before` for the next page; absent on the last.
    pub next_before: Option<i64>,
}

fn opt_ms(d: Option<Duration>) -> Option<u64> {
    d.map(to_millis)
}

fn mean_ms(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() * 1000.0)
}

impl From<&Summary> for SummaryBody {
    fn from(s: &Summary) -> Self {
        SummaryBody {
            count: s.count,
            mean_ms: mean_ms(s.mean),
            stddev_ms: mean_ms(s.stddev),
            min_ms: opt_ms(s.min),
            max_ms: opt_ms(s.max),
            histogram: s
                .histogram
                .iter()
                .map(|b| HistogramBucketBody {
                    from_ms: to_millis(b.from),
                    to_ms: to_millis(b.to),
                    count: b.count,
                })
                .collect(),
        }
    }
}

impl From<Counts> for CountsBody {
    fn from(c: Counts) -> Self {
        CountsBody {
            added: c.added,
            started: c.started,
            finished: c.finished,
            retried: c.retried,
            failed: c.failed,
        }
    }
}

impl From<&Stats> for StatsBody {
    fn from(s: &Stats) -> Self {
        StatsBody {
            period: s.period.as_str().to_owned(),
            from: s.from,
            to: s.to,
            bucket_ms: to_millis(s.bucket),
            series: s
                .series
                .iter()
                .map(|p| StatsPointBody {
                    at: p.at,
                    added: p.counts.added,
                    started: p.counts.started,
                    finished: p.counts.finished,
                    retried: p.counts.retried,
                    failed: p.counts.failed,
                    wait_mean_ms: mean_ms(p.wait_mean),
                    wait_max_ms: opt_ms(p.wait_max),
                    run_mean_ms: mean_ms(p.run_mean),
                    run_max_ms: opt_ms(p.run_max),
                })
                .collect(),
            totals: s.totals.into(),
            wait: (&s.wait).into(),
            run: (&s.run).into(),
            service: (&s.service).into(),
        }
    }
}

impl From<&WorkerStats> for WorkerStatsBody {
    fn from(w: &WorkerStats) -> Self {
        WorkerStatsBody {
            workers: w
                .workers
                .iter()
                .map(|u| WorkerUsageBody {
                    worker: u.worker.clone(),
                    busy_ms: to_millis(u.busy),
                    available_ms: to_millis(u.present),
                    utilization: u.utilization,
                    attempts: u.attempts,
                })
                .collect(),
            queues: w
                .queues
                .iter()
                .map(|u| QueueUsageBody {
                    queue: u.queue.clone(),
                    busy_ms: to_millis(u.busy),
                    available_ms: to_millis(u.present),
                    utilization: u.utilization,
                })
                .collect(),
        }
    }
}

impl From<&ActivityEvent> for ActivityEventBody {
    fn from(e: &ActivityEvent) -> Self {
        ActivityEventBody {
            id: e.id,
            at: e.at,
            event: e.kind.as_str().to_owned(),
            job: e.job.map(|j| j.0),
            queue: e.queue.clone(),
            name: e.name.clone(),
            worker: e.worker.clone(),
            detail: e.detail.clone(),
        }
    }
}

impl From<&ActivityPage> for ActivityPageBody {
    fn from(p: &ActivityPage) -> Self {
        ActivityPageBody {
            events: p.events.iter().map(ActivityEventBody::from).collect(),
            next_before: p.next_before,
        }
    }
}

/// One read-only SQL statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SqlRequest {
    /// One `SELECT` over the tables or the documented views (`cairn_jobs`, `cairn_attempts`, `cairn_activity`,
    /// `cairn_stats_minute`, `cairn_stats_hour`, `cairn_workers`).
    pub query: String,
    /// At most this many rows (1 to 10,000; 1,000 when absent).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Stop the query after this many milliseconds (at most 30,000; 5,000 when absent).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// What a query returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SqlBody {
    /// The columns' names.
    pub columns: Vec<String>,
    /// The rows, each value as JSON (a blob as an array of bytes).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Vec<Object>>))]
    pub rows: Vec<Vec<Value>>,
    /// Whether rows were cut off at the limit.
    pub truncated: bool,
}

impl SqlRequest {
    /// The engine's form, with the defaults filled in.
    pub fn to_query(&self) -> SqlQuery {
        let defaults = SqlQuery::new(self.query.clone());
        SqlQuery {
            limit: self.limit.unwrap_or(defaults.limit),
            timeout: self
                .timeout_ms
                .map_or(defaults.timeout, Duration::from_millis),
            ..defaults
        }
    }
}

impl From<SqlResult> for SqlBody {
    fn from(r: SqlResult) -> Self {
        SqlBody {
            columns: r.columns,
            rows: r.rows,
            truncated: r.truncated,
        }
    }
}

impl SqlBody {
    /// The engine's form.
    pub fn into_result(self) -> SqlResult {
        SqlResult {
            columns: self.columns,
            rows: self.rows,
            truncated: self.truncated,
        }
    }
}

impl From<&SqlQuery> for SqlRequest {
    fn from(q: &SqlQuery) -> Self {
        SqlRequest {
            query: q.sql.clone(),
            limit: Some(q.limit),
            timeout_ms: Some(to_millis(q.timeout)),
        }
    }
}

fn from_ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn from_mean(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

impl From<&SummaryBody> for Summary {
    fn from(b: &SummaryBody) -> Self {
        Summary {
            count: b.count,
            mean: b.mean_ms.map(from_mean),
            stddev: b.stddev_ms.map(from_mean),
            min: b.min_ms.map(from_ms),
            max: b.max_ms.map(from_ms),
            histogram: b
                .histogram
                .iter()
                .map(|h| cairn::HistogramBucket {
                    from: from_ms(h.from_ms),
                    to: from_ms(h.to_ms),
                    count: h.count,
                })
                .collect(),
        }
    }
}

impl From<CountsBody> for Counts {
    fn from(c: CountsBody) -> Self {
        Counts {
            added: c.added,
            started: c.started,
            finished: c.finished,
            retried: c.retried,
            failed: c.failed,
        }
    }
}

impl StatsBody {
    /// The engine's form.
    ///
    /// # Errors
    /// A period this version does not know.
    pub fn to_stats(&self) -> cairn::Result<Stats> {
        Ok(Stats {
            period: cairn::StatsPeriod::parse(&self.period)?,
            from: self.from,
            to: self.to,
            bucket: from_ms(self.bucket_ms),
            series: self
                .series
                .iter()
                .map(|p| cairn::StatsPoint {
                    at: p.at,
                    counts: Counts {
                        added: p.added,
                        started: p.started,
                        finished: p.finished,
                        retried: p.retried,
                        failed: p.failed,
                    },
                    wait_mean: p.wait_mean_ms.map(from_mean),
                    wait_max: p.wait_max_ms.map(from_ms),
                    run_mean: p.run_mean_ms.map(from_mean),
                    run_max: p.run_max_ms.map(from_ms),
                })
                .collect(),
            totals: self.totals.into(),
            wait: (&self.wait).into(),
            run: (&self.run).into(),
            service: (&self.service).into(),
        })
    }
}

impl From<&WorkerStatsBody> for WorkerStats {
    fn from(b: &WorkerStatsBody) -> Self {
        WorkerStats {
            workers: b
                .workers
                .iter()
                .map(|w| cairn::WorkerUsage {
                    worker: w.worker.clone(),
                    busy: from_ms(w.busy_ms),
                    present: from_ms(w.available_ms),
                    utilization: w.utilization,
                    attempts: w.attempts,
                })
                .collect(),
            queues: b
                .queues
                .iter()
                .map(|q| cairn::QueueUsage {
                    queue: q.queue.clone(),
                    busy: from_ms(q.busy_ms),
                    present: from_ms(q.available_ms),
                    utilization: q.utilization,
                })
                .collect(),
        }
    }
}

impl ActivityPageBody {
    /// The engine's form.
    ///
    /// # Errors
    /// An event kind this version does not know.
    pub fn to_page(&self) -> cairn::Result<ActivityPage> {
        let events = self
            .events
            .iter()
            .map(|e| {
                let kind = cairn::ActivityKind::parse(&e.event).ok_or_else(|| {
                    Error::from_parts(
                        ErrorKind::Unavailable,
                        Some("event".into()),
                        format!(
                            "the server sent an event this client does not know: {:?}",
                            e.event
                        ),
                    )
                })?;
                Ok(ActivityEvent {
                    id: e.id,
                    at: e.at,
                    kind,
                    job: e.job.map(JobId),
                    queue: e.queue.clone(),
                    name: e.name.clone(),
                    worker: e.worker.clone(),
                    detail: e.detail.clone(),
                })
            })
            .collect::<cairn::Result<_>>()?;
        Ok(ActivityPage {
            events,
            next_before: self.next_before,
        })
    }
}
