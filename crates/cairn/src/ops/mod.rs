//! Operations: one file each, each a plain struct stating intent with an `apply` against the writer's transaction.
//!
//! The writer (`engine`) runs `apply` inside a batch transaction and replies only after the batch
//! commits; an operation that fails after writing makes the writer run the batch again with a savepoint around each
//! operation, so a failed operation never leaves a write behind. Helpers shared by several operations (lease fencing, ending an attempt, retrying after an
//! error) live here.

use crate::ops::events::ActivityKind;
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use crate::clock::{duration_millis, from_millis, to_millis};
use crate::error::{Error, Result};
use crate::job::{AttemptOutcome, JobState, RunUsage};
use crate::lease::Lease;
use crate::name_families::NameFamilies;
use crate::names::JobId;
use crate::ops::rows::retry_policy_from_row;
use crate::retry_policy::RetryPolicy;
use crate::schedule::Schedule;
use crate::schedule::repeat::RunTimes;
use crate::store::db::{Db, Row, Sql, params};

pub(crate) mod aging;
pub(crate) mod audit;
pub(crate) mod batch_jobs;
pub(crate) mod batches;
pub(crate) mod bulk;
pub(crate) mod bulk_action;
pub(crate) mod cancel;
pub(crate) mod checkpoint;
pub(crate) mod claim;
pub(crate) mod config;
pub(crate) mod delete;
pub(crate) mod dependencies;
pub(crate) mod events;
pub(crate) mod fail;
pub(crate) mod failures;
pub(crate) mod fan_out;
pub(crate) mod finish;
pub(crate) mod heartbeat;
pub(crate) mod limits;
pub(crate) mod maintenance;
pub(crate) mod move_job;
pub(crate) mod push;
pub(crate) mod queues;
pub(crate) mod rate_limit;
pub(crate) mod recurring;
pub(crate) mod release;
pub(crate) mod rename;
pub(crate) mod requeue;
pub(crate) mod reschedule;
pub(crate) mod retry;
pub(crate) mod rows;
pub(crate) mod set_data;
pub(crate) mod set_priority;
pub(crate) mod set_schedule;
pub(crate) mod signal;
pub(crate) mod step;
pub(crate) mod stored_push;
pub(crate) mod tags;
pub(crate) mod track;
pub(crate) mod update;
pub(crate) mod waiting;
pub(crate) mod watch;
pub(crate) mod workers;

/// The operations' public types, which `lib.rs` re-exports: an operation added here is in the crate's API.
pub mod public {
    pub use super::aging::{AgeQueue, MAX_AGING_STEP, MIN_AGING_STEP};
    pub use super::audit::{MAX_AUDIT_DETAIL, RecordAudit};
    pub use super::batch_jobs::BatchId;
    pub use super::batches::{
        AddToBatch, Batch, BatchCallback, BatchCreated, BatchFilter, BatchState, CloseBatch,
        CreateBatch, MAX_BATCH_DESCRIPTION, MAX_CALLBACK_FAILED_IDS,
    };
    pub use super::bulk_action::{BulkAction, BulkOutcome, BulkSelection, MAX_BULK_IDS};
    pub use super::cancel::Cancel;
    pub use super::checkpoint::Checkpoint;
    pub use super::claim::{
        ClaimedJob, Dequeue, MAX_DEQUEUE_NAMES, MAX_DEQUEUE_QUEUES, MAX_QUEUE_WEIGHT, MAX_WAIT,
        QueueOrder,
    };
    pub use super::config::{
        ConfigEntry, ConfigKey, ConfigUnit, ConfigValue, SetConfig, UnsetConfig,
    };
    pub use super::delete::Delete;
    pub use super::dependencies::ChangeDependencies;
    pub use super::events::{ActivityKind, WORKER_LOST_AFTER};
    pub use super::fail::Fail;
    pub use super::failures::{FailureGroup, MAX_UNFAIL, Unfail};
    pub use super::fan_out::{Join, Joined, JoinedChild, MAX_SPAWN, Spawn};
    pub use super::finish::{Continue, Finish, FinishAndTake, MAX_FINISH_MANY};
    pub use super::heartbeat::Heartbeat;
    pub use super::limits::{MAX_DEQUEUE, MAX_KEY_CONCURRENCY, MAX_TAGS};
    pub use super::move_job::MoveJob;
    pub use super::push::{
        Concurrency, Debounce, Enqueued, MAX_DEBOUNCE, MAX_DEPENDENCIES, MAX_THROTTLE, Push,
        PushBatch, Throttle,
    };
    pub use super::queues::{
        KeyStats, LimitKeys, LimitQueue, MAX_KEY_WEIGHT, PauseQueue, QueueStats, ResumeQueue,
        TOP_KEYS, WeighKey,
    };
    pub use super::rate_limit::{RateLimit, RateLimitQueue};
    pub use super::recurring::{
        MissedSlots, Overlap, PauseRecurring, Recurring, RecurringInfo, RemoveRecurring,
        ResumeRecurring, RunRecurring, SetRecurring,
    };
    pub use super::release::Release;
    pub use super::rename::Rename;
    pub use super::requeue::Requeue;
    pub use super::reschedule::Reschedule;
    pub use super::retry::Retry;
    pub use super::set_data::SetData;
    pub use super::set_priority::SetPriority;
    pub use super::set_schedule::SetSchedule;
    pub use super::signal::{SendSignal, SignalSent, SignalWait, WaitForSignal};
    pub use super::step::{MAX_STEP_BYTES_PER_DATA, MAX_STEPS, RecordStep, Sleep, Slept, Wake};
    pub use super::tags::ChangeTags;
    pub use super::track::{Track, Untrack};
    pub use super::update::Update;
    pub use super::workers::WorkerStopped;
    pub use super::workers::{WorkerInfo, WorkerStatus};
}

/// An operation the writer applies in a transaction.
pub(crate) trait Operation: Send + 'static {
    /// What the caller gets back once the transaction commits.
    type Output: Send + 'static;

    /// Whether the reply must wait for a durable (fsynced) commit. Lease bookkeeping (claims, heartbeats) need not:
    /// fencing stays correct if a crash rolls them back, because tokens are never reused.
    fn is_durable(&self) -> bool {
        true
    }

    /// Validates and writes. A failed operation writes nothing: most fail before their first write, and for the
    /// others the writer rolls the batch back and runs it again with a savepoint around each operation.
    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Self::Output>;

    /// Leases in an output that could not be delivered (the caller went away); the writer gives them back.
    fn undelivered_leases(_output: &Self::Output) -> Vec<Lease> {
        Vec::new()
    }
}

/// Defaults and limits operations need, taken from [`QueueOptions`](crate::QueueOptions).
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub default_retry: RetryPolicy,
    pub default_lease_timeout: Duration,
    pub max_data_bytes: usize,
    /// How the statistics group job names.
    pub name_families: NameFamilies,
}

/// What an operation sees of the writer: the transaction, the time, and where to note newly ready jobs.
pub(crate) struct WriteCtx<'a> {
    /// The transaction, on either database (`store/db/`).
    pub db: Db<'a>,
    pub now_ms: i64,
    pub ready: &'a mut ReadyQueues,
    pub tokens: &'a mut TokenSource,
    /// Advances on every round-robin claim, so successive claims start at different queues.
    pub rotation: &'a mut usize,
    /// The queues' settings (paused, concurrency limit), kept in memory by the writer.
    pub settings: &'a mut queues::SettingsCache,
    /// What the transaction did, for the activity log and the statistics, written at its end.
    pub events: &'a mut events::EventLog,
}

impl WriteCtx<'_> {
    /// The defaults and limits in force (the queue's options, with any set at run time over them).
    pub fn limits(&self) -> &Limits {
        &self.settings.config.limits
    }
}

/// The queues that gained ready jobs in the current transaction, so the writer knows which waiting workers to serve.
#[derive(Debug, Default)]
pub(crate) struct ReadyQueues {
    queues: HashSet<String>,
}

impl ReadyQueues {
    pub fn mark(&mut self, queue: &str) {
        if !self.queues.contains(queue) {
            self.queues.insert(queue.to_owned());
        }
    }

    pub fn contains(&self, queue: &str) -> bool {
        self.queues.contains(queue)
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.queues.iter().map(String::as_str)
    }
}

/// Fresh lease tokens: a per-process random seed and a counter, mixed. Never read from the database, so a crash
/// that rolls back unsynced commits cannot make a token repeat.
#[derive(Debug)]
pub(crate) struct TokenSource {
    seed: u64,
    counter: u64,
}

impl TokenSource {
    pub fn new() -> Self {
        TokenSource {
            seed: RandomState::new().hash_one(std::process::id()),
            counter: 0,
        }
    }

    pub fn next_token(&mut self) -> i64 {
        self.counter += 1;
        let mut z = self
            .seed
            .wrapping_add(self.counter.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as i64
    }
}

/// Reads a state from the database. The schema has no CHECK on states (see the migration), so a row written by
/// hand or by a newer Cairn is an error, not a panic of the writer.
pub(crate) fn parse_stored_state(state: &str) -> Result<JobState> {
    state.parse().map_err(|_| {
        Error::new(
            crate::ErrorKind::Storage,
            format!("the database holds a job in an unknown state {state:?}"),
        )
    })
}

/// A job's queue and name, for an event about a change that loaded neither.
const SELECT_JOB_REF: Sql = Sql::both("SELECT queue, name FROM jobs WHERE id = $1");

/// Records `kind` for job `id` as it stands now (its queue and name read back), with `detail`: the changes made
/// from outside a lease, which load nothing else of the job. A job that is gone records nothing.
pub(crate) fn job_changed(
    ctx: &mut WriteCtx<'_>,
    id: JobId,
    kind: ActivityKind,
    detail: Option<&str>,
) -> Result<()> {
    let job: Option<(String, String)> = ctx.db.query_row(SELECT_JOB_REF, &params![id.0], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })?;
    if let Some((queue, name)) = job {
        let job = events::JobRef {
            id: id.0,
            queue: &queue,
            name: &name,
        };
        ctx.events.job(ctx.now_ms, kind, job, None, detail);
    }
    Ok(())
}

/// Records that someone changed `queue`'s settings, as `detail` says.
pub(crate) fn queue_changed(ctx: &mut WriteCtx<'_>, queue: &str, detail: &str) {
    ctx.events.other(
        ctx.now_ms,
        ActivityKind::QueueChanged,
        Some(queue),
        None,
        Some(detail),
    );
}

/// Checks that job data fits the size limit and returns it as JSON text.
pub(crate) fn encode_json(
    field: &'static str,
    value: &serde_json::Value,
    limits: &Limits,
) -> Result<String> {
    let text = serde_json::to_string(value).expect("serde_json::Value always serializes");
    if text.len() > limits.max_data_bytes {
        return Err(Error::invalid(
            field,
            format!(
                "must be at most {} bytes of JSON, got {}",
                limits.max_data_bytes,
                text.len()
            ),
        ));
    }
    Ok(text)
}

/// What fenced operations need to know about the running job a lease names.
#[derive(Debug)]
pub(crate) struct HeldJob {
    pub id: JobId,
    pub queue: String,
    pub worker: String,
    pub attempt_started_at: i64,
    pub attempt: u32,
    pub claims: u32,
    pub retry: RetryPolicy,
    /// A recurring job's schedule, and a cron schedule's time zone.
    pub schedule: Option<String>,
    pub time_zone: Option<String>,
    /// When the current run was due.
    pub slot_at: i64,
    /// Its parent, if it is a child.
    pub parent: Option<JobId>,
    /// Whether it ever had children or dependents: when not, ending it needs no lookups for them.
    pub has_children: bool,
    pub has_dependents: bool,
    /// Its name and when it was created, for the activity log and the statistics.
    pub name: String,
    pub created_at: i64,
    /// Whose the children are that its runs create.
    pub children: crate::Children,
}

/// How many columns [`held_job_columns!`] selects: the index of the first column a statement adds after them.
pub(crate) const HELD_JOB_COLUMNS: usize = 20;

/// The columns [`held_job_from_row`] reads, from index 0. A macro so that statements can `concat!` it.
macro_rules! held_job_columns {
    () => {
        "id, queue, attempt, max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, \
         worker, attempt_started_at, claims, schedule, time_zone, slot_at, parent_id, has_children, has_dependents, \
         name, created_at, children_of_job"
    };
}
pub(crate) use held_job_columns;

/// Reads a [`HeldJob`] from a row selected with [`held_job_columns!`].
pub(crate) fn held_job_from_row(row: &Row<'_>) -> Result<HeldJob> {
    Ok(HeldJob {
        id: JobId(row.get(0)?),
        queue: row.get(1)?,
        attempt: row.get(2)?,
        retry: retry_policy_from_row(row, 3)?,
        worker: row.get::<Option<String>>(8)?.unwrap_or_default(),
        attempt_started_at: row.get::<Option<i64>>(9)?.unwrap_or(0),
        claims: row.get(10)?,
        schedule: row.get(11)?,
        time_zone: row.get(12)?,
        slot_at: row.get(13)?,
        parent: row.get::<Option<i64>>(14)?.map(JobId),
        has_children: row.get(15)?,
        has_dependents: row.get(16)?,
        name: row.get(17)?,
        created_at: row.get(18)?,
        children: crate::ops::rows::children_from(row.get(19)?),
    })
}

/// The job's row, locked on PostgreSQL until the transaction ends (SQLite's one writer needs no lock).
const SELECT_HELD_JOB: Sql = Sql {
    sqlite: concat!(
        "SELECT ",
        held_job_columns!(),
        ", state, lease_token, lease_expires_at FROM jobs WHERE id = $1"
    ),
    postgres: concat!(
        "SELECT ",
        held_job_columns!(),
        ", state, lease_token, lease_expires_at FROM jobs WHERE id = $1 FOR UPDATE"
    ),
};

/// Loads the running job that `job`/`token` hold, or refuses with [`ErrorKind::LeaseLost`](crate::ErrorKind) saying why.
pub(crate) fn held_job(ctx: &WriteCtx<'_>, job: JobId, token: i64) -> Result<HeldJob> {
    let row = ctx.db.query_row(SELECT_HELD_JOB, &params![job], |row| {
        Ok((
            row.get::<String>(HELD_JOB_COLUMNS)?,
            row.get::<Option<i64>>(HELD_JOB_COLUMNS + 1)?,
            row.get::<Option<i64>>(HELD_JOB_COLUMNS + 2)?,
            held_job_from_row(row)?,
        ))
    })?;
    let Some((state, stored_token, expires, held)) = row else {
        return Err(Error::lease_lost(format!("job {job} no longer exists")));
    };
    if state != JobState::Running.as_str() {
        return Err(Error::lease_lost(format!(
            "job {job} is {state}, no longer running under this lease"
        )));
    }
    if stored_token != Some(token) {
        return Err(Error::lease_lost(format!(
            "job {job} was leased again; this lease is stale"
        )));
    }
    if expires.is_some_and(|at| at <= ctx.now_ms) {
        return Err(Error::lease_lost(format!(
            "the lease on job {job} expired at {}",
            from_millis(expires.unwrap_or(0))
        )));
    }
    Ok(held)
}

const INSERT_ENDED_ATTEMPT: Sql = Sql::both(
    "INSERT INTO job_attempts \
     (job_id, claim, attempt, worker, started_at, finished_at, outcome, error, run_ms, cpu_ms, peak_memory, \
     result) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
);

/// What an attempt ended with, for its row in the job's history: the error, what its process used, and (for a
/// completed one) its result as JSON.
#[derive(Default)]
pub(crate) struct Ending<'a> {
    pub error: Option<&'a str>,
    pub usage: Option<&'a RunUsage>,
    pub result: Option<&'a str>,
}

/// Records how the held attempt ended in the job's history.
pub(crate) fn end_attempt(
    ctx: &mut WriteCtx<'_>,
    held: &HeldJob,
    outcome: AttemptOutcome,
    ending: Ending<'_>,
) -> Result<()> {
    let Ending {
        error,
        usage,
        result,
    } = ending;
    ctx.db.execute(
        INSERT_ENDED_ATTEMPT,
        &params![
            held.id,
            held.claims,
            held.attempt,
            &held.worker,
            held.attempt_started_at,
            ctx.now_ms,
            outcome.as_str(),
            error,
            usage.map(|u| duration_millis(u.run_time)),
            usage.map(|u| duration_millis(u.cpu_time)),
            usage.map(|u| i64::try_from(u.peak_memory).unwrap_or(i64::MAX)),
            result
        ],
    )?;
    // A queue at its concurrency limit, or a key at its own, has room again: workers waiting on it look again.
    let settings = ctx.settings.get(&held.queue);
    if settings.concurrency.is_some() || settings.keyed {
        ctx.ready.mark(&held.queue);
    }
    Ok(())
}

/// The job's running attempt, if it is running (whoever holds it).
pub(crate) fn running_job(ctx: &WriteCtx<'_>, job: JobId) -> Result<Option<HeldJob>> {
    const SELECT_RUNNING_JOB: Sql = Sql::both(concat!(
        "SELECT ",
        held_job_columns!(),
        " FROM jobs WHERE id = $1 AND ",
        is_running!()
    ));
    ctx.db
        .query_row(SELECT_RUNNING_JOB, &params![job], held_job_from_row)
}

/// The condition that a job is live (it has not completed, failed or been cancelled): `live!()` on the statement's
/// own table, `live!("c")` on a row named `c`. An `OR` chain, never an `IN` list (see the migrations).
macro_rules! live {
    () => {
        "(state = 'scheduled' OR state = 'queued' OR state = 'waiting' OR state = 'running')"
    };
    ($alias:literal) => {
        concat!(
            "(",
            $alias,
            ".state = 'scheduled' OR ",
            $alias,
            ".state = 'queued' OR ",
            $alias,
            ".state = 'waiting' OR ",
            $alias,
            ".state = 'running')"
        )
    };
}
pub(crate) use live;

/// The condition that a job found by its id runs: `is_running!()` on the statement's own table, `is_running!("j")`
/// on a row named `j`.
///
/// Why `IS TRUE`: PostgreSQL may serve a plain `state = 'running'` from any partial index on running jobs
/// (`jobs_by_worker`, `jobs_leases`), and it does when its statistics say few jobs run, which they always do: a
/// finish of 16 jobs then scanned every running job once per job (70 µs a job, where the primary key takes 10).
/// Wrapped, the condition implies no index's predicate, and the primary key is the only way in.
macro_rules! is_running {
    () => {
        "(state = 'running') IS TRUE"
    };
    ($alias:literal) => {
        concat!("(", $alias, ".state = 'running') IS TRUE")
    };
}
pub(crate) use is_running;

/// The condition every statement made under a lease adds to its `WHERE`: the job runs under this exact, live lease.
/// Its arguments are the statement's parameters for the job's id, the lease's token and now:
/// `lease_is_held!("$1", "$2", "$3")`.
macro_rules! lease_is_held {
    ($id:literal, $token:literal, $now:literal) => {
        concat!(
            "id = ",
            $id,
            " AND ",
            $crate::ops::is_running!(),
            " AND lease_token = ",
            $token,
            " AND lease_expires_at > ",
            $now
        )
    };
}
pub(crate) use lease_is_held;

/// A lease extended by a heartbeat: a full lease timeout from now (the parameter `$now`), never shorter than it was,
/// and never past the attempt's timeout, if the job has one. In each dialect's words for the larger and smaller of
/// two values: `extended_lease!(sqlite, "$1")`, `extended_lease!(postgres, "$1")`.
macro_rules! extended_lease {
    (sqlite, $now:literal) => {
        concat!(
            "CASE WHEN timeout_ms IS NULL THEN MAX(lease_expires_at, ",
            $now,
            " + lease_timeout_ms) ELSE MIN(MAX(lease_expires_at, ",
            $now,
            " + lease_timeout_ms), attempt_started_at + timeout_ms) END"
        )
    };
    (postgres, $now:literal) => {
        concat!(
            "CASE WHEN timeout_ms IS NULL THEN GREATEST(lease_expires_at, ",
            $now,
            " + lease_timeout_ms) ELSE LEAST(GREATEST(lease_expires_at, ",
            $now,
            " + lease_timeout_ms), attempt_started_at + timeout_ms) END"
        )
    };
}
pub(crate) use extended_lease;

/// The error for a fenced statement that matched no row: says why the lease is not held.
pub(crate) fn lease_refusal(ctx: &WriteCtx<'_>, job: JobId, token: i64) -> Error {
    match held_job(ctx, job, token) {
        Err(e) => e,
        Ok(_) => Error::lease_lost(format!("job {job} is no longer held under this lease")),
    }
}

const REQUEUE_JOB: Sql = Sql::both(
    "UPDATE jobs SET state = $1, run_at = $2, error = COALESCE($3, error), \
     lease_token = NULL, lease_expires_at = NULL WHERE id = $4",
);

const FAIL_JOB: Sql = Sql::both(
    "UPDATE jobs SET state = 'failed', finished_at = $1, error = $2, \
     failure_group = $3, lease_token = NULL, lease_expires_at = NULL WHERE id = $4",
);

/// The failure group of jobs that ran out of attempts.
pub(crate) const RETRIES_EXHAUSTED: &str = "retries-exhausted";

/// Ends the held attempt with `outcome`, then schedules the next attempt after the backoff (or at `run_at_ms`), or
/// fails the job when its attempts are used up. A worker's retry that finds no attempt left is recorded as the
/// failure it is, not as a retry. Returns the job's new state.
pub(crate) fn retry_or_fail(
    ctx: &mut WriteCtx<'_>,
    held: &HeldJob,
    outcome: AttemptOutcome,
    error: &str,
    run_at_ms: Option<i64>,
    usage: Option<&RunUsage>,
) -> Result<JobState> {
    let exhausted = held.attempt >= held.retry.max_attempts;
    let recorded = match outcome {
        AttemptOutcome::Retried if exhausted => AttemptOutcome::Failed,
        other => other,
    };
    end_attempt(
        ctx,
        held,
        recorded,
        Ending {
            error: Some(error),
            usage,
            result: None,
        },
    )?;
    run_did_not_finish(ctx, held, !exhausted)?;
    // The worker ended the attempt itself (not a lost lease or a crash): its run time counts.
    let by_worker = outcome == AttemptOutcome::Retried;
    if exhausted {
        ctx.events.attempt_ended(
            ctx.now_ms,
            ActivityKind::Failed,
            held,
            by_worker,
            true,
            Some(error),
        );
        ctx.db.execute(
            FAIL_JOB,
            &params![ctx.now_ms, error, RETRIES_EXHAUSTED, held.id],
        )?;
        return run_failed(ctx, held);
    }
    ctx.events.attempt_ended(
        ctx.now_ms,
        ActivityKind::Retried,
        held,
        by_worker,
        false,
        Some(error),
    );
    let run_at = run_at_ms.unwrap_or_else(|| {
        let backoff = held.retry.delay_after(held.id, held.attempt);
        ctx.now_ms.saturating_add(duration_millis(backoff))
    });
    requeue(ctx, held.id, &held.queue, run_at, Some(error))
}

/// What every end of a run other than finishing does: the children the run created are cancelled, unless the job
/// `runs_again` and its children are the job's ([`Children::OfTheJob`](crate::Children::OfTheJob)): they then wait
/// for a run that finishes.
pub(crate) fn run_did_not_finish(
    ctx: &mut WriteCtx<'_>,
    held: &HeldJob,
    runs_again: bool,
) -> Result<()> {
    let kept = runs_again && held.children == crate::Children::OfTheJob;
    if held.has_children && !kept {
        waiting::discard_unstarted_children(ctx, held.id)?;
    }
    Ok(())
}

/// After a run failed for good (the job is `failed` now): a recurring job keeps its schedule, and the next run is
/// due as usual; otherwise the job has ended, and its parent may run again. Returns the job's new state.
pub(crate) fn run_failed(ctx: &mut WriteCtx<'_>, held: &HeldJob) -> Result<JobState> {
    if let Some(state) = schedule_next_run(ctx, held)? {
        return Ok(state);
    }
    waiting::job_ended(
        ctx,
        held.id,
        held.parent,
        held.has_dependents,
        waiting::Ending::Failed,
    )?;
    Ok(JobState::Failed)
}

const NEXT_RUN: Sql = Sql::both(
    "UPDATE jobs SET state = $1, run_at = $2, slot_at = $2, attempt = 0, step_count = 0, step_bytes = 0, \
     signal_key = NULL, signal_step = NULL, signal_until = NULL, suspended_at = NULL, \
     finished_at = NULL, progress = NULL, lease_token = NULL, lease_expires_at = NULL WHERE id = $3",
);

/// For a recurring job whose run just ended (finished, failed, or out of retries): schedules its next run from its
/// repeat, resetting its attempts. Returns the new state, or `None` for a job that does not recur. A repeat that
/// cannot give a next run (it would fall outside the years 0000 to 9999) ends the recurrence, and says so in the
/// job's error.
pub(crate) fn schedule_next_run(
    ctx: &mut WriteCtx<'_>,
    held: &HeldJob,
) -> Result<Option<JobState>> {
    let Some(spec) = &held.schedule else {
        return Ok(None);
    };
    let parsed = Schedule::parse(spec, held.time_zone.as_deref());
    let run = RunTimes {
        scheduled: from_millis(held.slot_at),
        started: (held.attempt_started_at > 0).then(|| from_millis(held.attempt_started_at)),
        now: from_millis(ctx.now_ms),
    };
    let next = match parsed.and_then(|schedule| schedule.next_run(run)) {
        Ok(next) => to_millis(next),
        Err(e) => {
            tracing::warn!(job = %held.id, error = %e, "a recurring job has no next run; its recurrence ends");
            let note = format!("the recurrence ended: {e}");
            ctx.db.execute(
                Sql::both("UPDATE jobs SET error = $1 WHERE id = $2"),
                &params![note, held.id],
            )?;
            return Ok(None);
        }
    };
    let state = if next <= ctx.now_ms {
        JobState::Queued
    } else {
        JobState::Scheduled
    };
    ctx.db
        .execute(NEXT_RUN, &params![state.as_str(), next, held.id])?;
    // The steps were the run's; the next run records its own.
    crate::ops::step::forget_steps(ctx, held.id)?;
    if state == JobState::Queued {
        ctx.ready.mark(&held.queue);
    }
    Ok(Some(state))
}

/// Puts a job back in its queue to run at `run_at`, clearing any lease; returns `queued` or `scheduled`.
pub(crate) fn requeue(
    ctx: &mut WriteCtx<'_>,
    id: JobId,
    queue: &str,
    run_at: i64,
    error: Option<&str>,
) -> Result<JobState> {
    let state = if run_at <= ctx.now_ms {
        JobState::Queued
    } else {
        JobState::Scheduled
    };
    ctx.db
        .execute(REQUEUE_JOB, &params![state.as_str(), run_at, error, id])?;
    if state == JobState::Queued {
        ctx.ready.mark(queue);
    }
    Ok(state)
}

/// Runs `f` in a savepoint: kept if it succeeds, rolled back if it fails.
pub(crate) fn in_savepoint<T>(
    ctx: &mut WriteCtx<'_>,
    f: impl FnOnce(&mut WriteCtx<'_>) -> Result<T>,
) -> Result<T> {
    savepoint(&ctx.db)?;
    let mark = ctx.events.mark();
    let result = f(ctx);
    if result.is_err() {
        ctx.events.undo_to(mark);
        // What it wrote of workers is rolled back: read them again when needed.
        ctx.settings.seen.clear();
    }
    end_savepoint(&ctx.db, result.is_ok())?;
    result
}

pub(crate) fn savepoint(db: &Db<'_>) -> Result<()> {
    db.batch(Sql::both("SAVEPOINT op"))
}

pub(crate) fn end_savepoint(db: &Db<'_>, keep: bool) -> Result<()> {
    if !keep {
        db.batch(Sql::both("ROLLBACK TO op"))?;
    }
    db.batch(Sql::both("RELEASE op"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_do_not_repeat_within_a_process() {
        let mut tokens = TokenSource::new();
        let seen: HashSet<i64> = (0..100_000).map(|_| tokens.next_token()).collect();
        assert_eq!(seen.len(), 100_000);
    }
}
