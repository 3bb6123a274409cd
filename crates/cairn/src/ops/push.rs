//! Enqueueing: [`Push`] (one job) and [`PushBatch`] (many, all or nothing).

use crate::ops::events::{ActivityKind, JobRef};
use crate::ops::limits::{MAX_KEY_CONCURRENCY, MAX_LEASE_TIMEOUT, MAX_TAGS, MIN_LEASE_TIMEOUT};
use std::borrow::Borrow;
use std::time::Duration;

use crate::store::db::{MultiRow, Params, Sql, ToValue, Value as DbValue, params};
use jiff::Timestamp;
use serde_json::Value;

use crate::clock::{duration_millis, to_millis};
use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::names::{
    ConcurrencyKey, DebounceKey, JobName, QueueName, Tag, ThrottleKey, TraceParent, UniqueKey,
};
use crate::ops::batch_jobs::{self, BatchId};
use crate::ops::waiting::{DependencyOn, check_dependency, record_dependency};
use crate::ops::{Limits, Operation, WriteCtx, encode_json, parse_stored_state};
use crate::retry_policy::{RetryOverrides, RetryPolicy};
use crate::schedule::Schedule;

/// A job to enqueue. Fields are outside input: they are validated when the job is pushed, and a bad field fails
/// the push with an error naming it, writing nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Push {
    /// The queue, `default` unless set.
    pub queue: String,
    /// The job's name (its type), which workers match.
    pub name: String,
    /// The job's input, handed to the worker. `{}` unless set.
    pub data: Value,
    /// Higher runs first; 0 unless set.
    pub priority: i32,
    /// How much of a worker's concurrency the job uses; at least 1.
    pub weight: u32,
    /// When the job becomes ready. Cannot be combined with `delay`.
    pub run_at: Option<Timestamp>,
    /// How long from now until the job becomes ready. Cannot be combined with `run_at`.
    pub delay: Option<Duration>,
    /// Attempts and backoff: what it sets, the default policy (`default_retry`) for the rest.
    pub retry: RetryOverrides,
    /// How long a worker may hold the job between heartbeats; the queue's default unless set.
    pub lease_timeout: Option<Duration>,
    /// The longest one attempt may run, heartbeats or not (at most a day): then its lease expires and the job is
    /// retried. No limit unless set.
    pub timeout: Option<Duration>,
    /// While a live job holds this key, pushing another job with it returns the existing job instead.
    pub unique_key: Option<String>,
    /// Tags, for finding the job later.
    pub tags: Vec<String>,
    /// The job's parent, which must be running or waiting for its children. A child created by a running job
    /// starts when that run finishes (and is cancelled if the run ends any other way); the parent then waits for
    /// its children and runs again when they have all ended.
    pub parent: Option<JobId>,
    /// Jobs that must complete before this one runs; until then it is `waiting`. Each must exist and not be
    /// cancelled; a completed one counts as met.
    pub depends_on: Vec<JobId>,
    /// Makes the job recurring: a Bedrock repeat specification (`FINISHED, +1 HOUR`, `DAILY`) or a cron
    /// expression (`0 4 * * *`). When a run ends (finished, failed, or out of retries), the job is scheduled again
    /// for its next run, with the data it finished with.
    pub schedule: Option<String>,
    /// The IANA time zone of a cron schedule; `UTC` unless set.
    pub time_zone: Option<String>,
    /// Debounces the job: a push whose key a pending job holds lands in that job instead (see [`Debounce`]).
    /// Cannot be combined with `run_at`, `delay`, `unique_key`, `parent`, `depends_on` or `schedule`.
    pub debounce: Option<Debounce>,
    /// At most one job per key per period, whatever became of the earlier one (see [`Throttle`]).
    pub throttle: Option<Throttle>,
    /// The job's concurrency key, and maybe its own limit (see [`Concurrency`]).
    pub concurrency: Option<Concurrency>,
    /// The W3C trace context of the request that pushed the job (`traceparent`, version 00; see
    /// [`TraceParent`]): the job keeps it, and its worker runs the job as part of that trace.
    pub trace_parent: Option<String>,
    /// The batch the job joins (see [`CreateBatch`](crate::CreateBatch)), which must not have completed. Cannot be
    /// combined with `schedule`, `unique_key`, `debounce` or `throttle`: a job of a batch is one run, made by this
    /// push.
    pub batch: Option<BatchId>,
    /// Whose the children are that the job's runs create (see [`Children`](crate::Children)): the run's unless set.
    pub children: crate::Children,
}

/// A job's concurrency group. Jobs with a key take turns by key when workers claim them, so that a key with a
/// million ready jobs delays another key's job by at most one claim per worker; and at most `limit` jobs of one
/// key run at once (the job's own limit, else its queue's limit per key, else none), across all workers and
/// nodes. Claims pass over a key at its limit without blocking the jobs behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concurrency {
    /// The key, such as `customer:42`. Keys are per queue.
    pub key: String,
    /// The most jobs of this key that may run at once when this job is next to start, instead of the queue's
    /// limit per key; 1 to [`MAX_KEY_CONCURRENCY`].
    pub limit: Option<u32>,
}

/// Unique for a period: a push whose key a job created less than `period` ago holds (in one of `states`, or in any
/// state when `states` is empty) answers with that job (`existing: true`) and writes nothing. Unlike a unique key,
/// which holds only while its job is live, it also holds after the job ended: "at most one welcome email a day".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Throttle {
    /// The key, such as `welcome:ada@example.com`.
    pub key: String,
    /// How long after a job was created its key refuses another.
    pub period: Duration,
    /// The states of the earlier job that count; empty for any.
    pub states: Vec<JobState>,
}

/// The longest period a throttle may hold a key: a year.
pub const MAX_THROTTLE: Duration = Duration::from_secs(366 * 24 * 3600);

/// Debouncing: pushes of the same `key` in a burst make one job, which runs `delay` after the latest of them, and
/// no later than `max_wait` after the first.
///
/// A push whose key a pending job (scheduled or queued, not yet started) holds, within `max_wait` of the push that
/// created it, replaces that job's data with its own and moves its run to `delay` from now (never past the first
/// push's `max_wait`); it answers with that job (`existing: true`). Otherwise it creates a job, due `delay` from now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debounce {
    /// The key the pushes of a burst share, such as `reindex:customer:42`.
    pub key: String,
    /// How long after the latest push the job runs.
    pub delay: Duration,
    /// The longest the job waits after the first push of its burst; at least `delay`.
    pub max_wait: Duration,
}

/// The longest a debounced job may wait: 30 days.
pub const MAX_DEBOUNCE: Duration = Duration::from_secs(30 * 24 * 3600);

impl Push {
    /// A job named `name` with default settings, in the `default` queue, with data `{}`.
    pub fn new(name: impl Into<String>) -> Self {
        Push {
            queue: QueueName::default().as_str().to_owned(),
            name: name.into(),
            data: Value::Object(Default::default()),
            priority: 0,
            weight: 1,
            run_at: None,
            delay: None,
            retry: RetryOverrides::default(),
            lease_timeout: None,
            timeout: None,
            unique_key: None,
            tags: Vec::new(),
            parent: None,
            depends_on: Vec::new(),
            schedule: None,
            time_zone: None,
            debounce: None,
            throttle: None,
            concurrency: None,
            trace_parent: None,
            batch: None,
            children: crate::Children::OfTheRun,
        }
    }

    /// Sets the queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }

    /// Sets the data.
    pub fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    /// Sets the data from JSON text.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on the field `data` when the text is not JSON.
    pub fn data_json(mut self, json: &str) -> Result<Self> {
        self.data = serde_json::from_str(json)
            .map_err(|e| Error::invalid("data", format!("must be valid JSON: {e}")))?;
        Ok(self)
    }

    /// Sets the priority (higher runs first).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Sets the weight.
    pub fn weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    /// Runs the job no earlier than `at`.
    pub fn run_at(mut self, at: Timestamp) -> Self {
        self.run_at = Some(at);
        self
    }

    /// Runs the job no earlier than `delay` from now.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// Sets the retry policy: a whole [`RetryPolicy`], or the [`RetryOverrides`] of some of its parts.
    pub fn retry(mut self, retry: impl Into<RetryOverrides>) -> Self {
        self.retry = retry.into();
        self
    }

    /// Gives the job `attempts` attempts in all, counting the first (1: no retry), with the default backoff.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.retry.max_attempts = Some(attempts);
        self
    }

    /// Sets the lease timeout.
    pub fn lease_timeout(mut self, timeout: Duration) -> Self {
        self.lease_timeout = Some(timeout);
        self
    }

    /// Sets the longest one attempt may run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the unique key.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets the parent job.
    pub fn parent(mut self, parent: JobId) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Adds a job that must complete before this one runs.
    pub fn depends_on(mut self, job: JobId) -> Self {
        self.depends_on.push(job);
        self
    }

    /// Makes the job recurring with a Bedrock repeat specification or a cron expression.
    pub fn schedule(mut self, spec: impl Into<String>) -> Self {
        self.schedule = Some(spec.into());
        self
    }

    /// Sets the time zone of a cron schedule.
    pub fn time_zone(mut self, zone: impl Into<String>) -> Self {
        self.time_zone = Some(zone.into());
        self
    }

    /// Allows one job per `key` per `period`, whatever became of it (see [`Throttle`]).
    pub fn throttle(mut self, key: impl Into<String>, period: Duration) -> Self {
        self.throttle = Some(Throttle {
            key: key.into(),
            period,
            states: Vec::new(),
        });
        self
    }

    /// Puts the job in the concurrency group `key`, under its queue's limit per key (see [`Concurrency`]).
    pub fn concurrency_key(mut self, key: impl Into<String>) -> Self {
        let limit = self.concurrency.take().and_then(|c| c.limit);
        self.concurrency = Some(Concurrency {
            key: key.into(),
            limit,
        });
        self
    }

    /// Lets at most `limit` jobs of the job's concurrency key run at once when it is next to start, instead of its
    /// queue's limit per key. Needs a key ([`Push::concurrency_key`]).
    pub fn concurrency_limit(mut self, limit: u32) -> Self {
        let key = self.concurrency.take().map(|c| c.key).unwrap_or_default();
        self.concurrency = Some(Concurrency {
            key,
            limit: Some(limit),
        });
        self
    }

    /// Runs the job as part of the trace of W3C trace context `traceparent` (see [`Push::trace_parent`]).
    pub fn trace_parent(mut self, traceparent: impl Into<String>) -> Self {
        self.trace_parent = Some(traceparent.into());
        self
    }

    /// Adds the job to `batch`.
    pub fn batch(mut self, batch: BatchId) -> Self {
        self.batch = Some(batch);
        self
    }

    /// Makes the children the job's runs create the run's or the job's (see [`Children`](crate::Children)).
    pub fn children(mut self, children: crate::Children) -> Self {
        self.children = children;
        self
    }

    /// Debounces the job under `key`: it runs `delay` after the latest push with the key, at most `max_wait` after
    /// the first (see [`Debounce`]).
    pub fn debounce(mut self, key: impl Into<String>, delay: Duration, max_wait: Duration) -> Self {
        self.debounce = Some(Debounce {
            key: key.into(),
            delay,
            max_wait,
        });
        self
    }
}

/// The result of a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// The job's id.
    pub id: JobId,
    /// Its state right after the push.
    pub state: JobState,
    /// True when a live job already held the unique key, and `id` is that job.
    pub existing: bool,
}

/// The heaviest a job may be: the most concurrency a worker can have.
pub const MAX_WEIGHT: u32 = crate::ops::limits::MAX_DEQUEUE;

/// The most jobs one job may depend on.
pub const MAX_DEPENDENCIES: usize = 1000;

/// A push whose every field passed validation.
pub(crate) struct ValidPush {
    priority: i32,
    weight: u32,
    parent: Option<JobId>,
    depends_on: Vec<JobId>,
    queue: QueueName,
    name: JobName,
    data: String,
    run_at: i64,
    retry: RetryPolicy,
    lease_timeout_ms: i64,
    timeout_ms: Option<i64>,
    unique_key: Option<UniqueKey>,
    tags: Vec<Tag>,
    schedule: Option<Schedule>,
    /// The queue's priority aging, which every job carries for its claim order (see [`crate::ops::aging`]).
    aging_ms: Option<i64>,
    /// The debounce key, and when the job's window closes (the first push's `max_wait`), and its delay.
    debounce: Option<ValidDebounce>,
    /// The throttle key, its period in milliseconds, and the states that count (empty for any).
    throttle: Option<(ThrottleKey, i64, Vec<JobState>)>,
    /// The concurrency key, and the job's own limit for it.
    concurrency: Option<(ConcurrencyKey, Option<u32>)>,
    trace_parent: Option<TraceParent>,
    batch: Option<BatchId>,
    children: crate::Children,
}

/// A [`Debounce`] whose every field passed validation, in milliseconds.
struct ValidDebounce {
    key: DebounceKey,
    delay_ms: i64,
    max_wait_ms: i64,
}

/// A job of a batch is one run, made by its push: it cannot be recurring, or land in another job.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) naming `schedule`, `unique_key`, `debounce` or
/// `throttle`.
pub(crate) fn check_batch_job(push: &Push) -> Result<()> {
    let alone = [
        ("schedule", push.schedule.is_some()),
        ("unique_key", push.unique_key.is_some()),
        ("debounce", push.debounce.is_some()),
        ("throttle", push.throttle.is_some()),
    ];
    match alone.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(Error::invalid(
            field,
            "cannot be combined with batch: a job of a batch is one run, made by its push",
        )),
        None => Ok(()),
    }
}

/// Validates one push: [`check`], the queue's aging, and that its batch takes jobs.
pub(crate) fn validate(push: &Push, ctx: &WriteCtx<'_>) -> Result<ValidPush> {
    let valid = validate_alone(push, ctx)?;
    if let Some(batch) = valid.batch {
        batch_jobs::check_takes_jobs(ctx, batch)?;
    }
    Ok(valid)
}

/// [`validate`] but for the batch, which a caller validating many pushes checks once for all.
fn validate_alone(push: &Push, ctx: &WriteCtx<'_>) -> Result<ValidPush> {
    let mut valid = check(push, ctx.now_ms, ctx.limits())?;
    valid.aging_ms = ctx.settings.get(valid.queue.as_str()).aging_ms;
    Ok(valid)
}

/// Validates many pushes before anything is written, each batch they join checked once; errors name the push's
/// position (`jobs[3].name`).
pub(crate) fn validate_all(pushes: &[Push], ctx: &WriteCtx<'_>) -> Result<Vec<ValidPush>> {
    let valid = pushes
        .iter()
        .enumerate()
        .map(|(index, push)| validate_alone(push, ctx).map_err(|e| e.in_batch(index)))
        .collect::<Result<Vec<_>>>()?;
    let mut checked: Vec<BatchId> = Vec::new();
    for (index, v) in valid.iter().enumerate() {
        if let Some(batch) = v.batch
            && !checked.contains(&batch)
        {
            batch_jobs::check_takes_jobs(ctx, batch).map_err(|e| e.in_batch(index))?;
            checked.push(batch);
        }
    }
    Ok(valid)
}

/// Inserts validated pushes in order, runs of plain ones in as few statements as [`insert_plain_many`] allows.
pub(crate) fn insert_all(valid: &[ValidPush], ctx: &mut WriteCtx<'_>) -> Result<Vec<Enqueued>> {
    let mut out = Vec::with_capacity(valid.len());
    let mut rest = valid;
    while !rest.is_empty() {
        // A run of plain jobs goes in as few statements as INSERT_PLAIN allows: fewer statements is most of a
        // batch's speed.
        let plain = rest.iter().take_while(|v| v.is_plain()).count();
        if plain > 1 {
            out.extend(insert_plain_many(&rest[..plain], ctx)?);
            rest = &rest[plain..];
        } else {
            let index = out.len();
            out.push(insert_valid(&rest[0], ctx).map_err(|e| e.in_batch(index))?);
            rest = &rest[1..];
        }
    }
    Ok(out)
}

/// The checks of [`validate`] that need no transaction: every field against `limits` at `now_ms`. The queue's
/// aging is left unset.
pub(crate) fn check(push: &Push, now_ms: i64, limits: &Limits) -> Result<ValidPush> {
    let queue = QueueName::parse(push.queue.as_str())?;
    let name = JobName::parse(push.name.as_str())?;
    if !(1..=MAX_WEIGHT).contains(&push.weight) {
        return Err(Error::invalid(
            "weight",
            format!("must be between 1 and {MAX_WEIGHT}, got {}", push.weight),
        ));
    }
    let run_at = match (push.run_at, push.delay) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid("run_at", "cannot be combined with delay"));
        }
        (Some(at), None) => to_millis(at),
        (None, Some(delay)) => now_ms.saturating_add(duration_millis(delay)),
        (None, None) => now_ms,
    };
    if push.depends_on.len() > MAX_DEPENDENCIES {
        return Err(Error::invalid(
            "depends_on",
            format!(
                "must list at most {MAX_DEPENDENCIES} jobs, got {}",
                push.depends_on.len()
            ),
        ));
    }
    let retry = push.retry.over(limits.default_retry);
    retry.validate()?;
    let lease_timeout = push.lease_timeout.unwrap_or(limits.default_lease_timeout);
    if !(MIN_LEASE_TIMEOUT..=MAX_LEASE_TIMEOUT).contains(&lease_timeout) {
        return Err(Error::invalid(
            "lease_timeout",
            format!(
                "must be between {MIN_LEASE_TIMEOUT:?} and {MAX_LEASE_TIMEOUT:?}, got {lease_timeout:?}"
            ),
        ));
    }
    if let Some(timeout) = push.timeout
        && !(MIN_LEASE_TIMEOUT..=MAX_LEASE_TIMEOUT).contains(&timeout)
    {
        return Err(Error::invalid(
            "timeout",
            format!(
                "must be between {MIN_LEASE_TIMEOUT:?} and {MAX_LEASE_TIMEOUT:?}, got {timeout:?}"
            ),
        ));
    }
    let unique_key = push
        .unique_key
        .as_deref()
        .map(UniqueKey::parse)
        .transpose()?;
    let mut tags = push
        .tags
        .iter()
        .map(|t| Tag::parse(t.as_str()))
        .collect::<Result<Vec<_>>>()?;
    tags.sort();
    tags.dedup();
    if tags.len() > MAX_TAGS {
        return Err(Error::invalid(
            "tags",
            format!("a job holds at most {MAX_TAGS} tags, got {}", tags.len()),
        ));
    }
    let data = encode_json("data", &push.data, limits)?;
    if push.time_zone.is_some() && push.schedule.is_none() {
        return Err(Error::invalid(
            "time_zone",
            "applies only to a job with a schedule",
        ));
    }
    let schedule = push
        .schedule
        .as_deref()
        .map(|s| Schedule::parse(s, push.time_zone.as_deref()))
        .transpose()?;
    let debounce = push
        .debounce
        .as_ref()
        .map(|d| check_debounce(push, d))
        .transpose()?;
    let throttle = push.throttle.as_ref().map(check_throttle).transpose()?;
    let concurrency = push
        .concurrency
        .as_ref()
        .map(check_concurrency)
        .transpose()?;
    // Last, as the schema's `cairn_push` checks it (migration 0013).
    let trace_parent = push
        .trace_parent
        .as_deref()
        .map(TraceParent::parse)
        .transpose()?;
    if trace_parent.is_some() && push.schedule.is_some() {
        return Err(Error::invalid(
            "trace_parent",
            "cannot be combined with schedule: each run of a recurring job is a trace of its own",
        ));
    }
    if push.batch.is_some() {
        check_batch_job(push)?;
    }
    let run_at = match &debounce {
        Some(d) => now_ms.saturating_add(d.delay_ms),
        None => run_at,
    };
    Ok(ValidPush {
        debounce,
        throttle,
        concurrency,
        trace_parent,
        batch: push.batch,
        children: push.children,
        aging_ms: None,
        schedule,
        priority: push.priority,
        weight: push.weight,
        parent: push.parent,
        depends_on: {
            let mut ids = push.depends_on.clone();
            ids.sort_unstable();
            ids.dedup();
            ids
        },
        queue,
        name,
        data,
        run_at,
        retry,
        lease_timeout_ms: duration_millis(lease_timeout),
        timeout_ms: push.timeout.map(duration_millis),
        unique_key,
        tags,
    })
}

/// A concurrency key's own rules.
fn check_concurrency(c: &Concurrency) -> Result<(ConcurrencyKey, Option<u32>)> {
    let key = ConcurrencyKey::parse(c.key.as_str())?;
    if let Some(limit) = c.limit
        && !(1..=MAX_KEY_CONCURRENCY).contains(&limit)
    {
        return Err(Error::invalid(
            "concurrency.limit",
            format!("must be between 1 and {MAX_KEY_CONCURRENCY}, got {limit}"),
        ));
    }
    Ok((key, c.limit))
}

/// A throttle's own rules.
fn check_throttle(t: &Throttle) -> Result<(ThrottleKey, i64, Vec<JobState>)> {
    let key = ThrottleKey::parse(t.key.as_str())?;
    if t.period.is_zero() || t.period > MAX_THROTTLE {
        return Err(Error::invalid(
            "throttle.period",
            format!(
                "must be more than 0 and at most {MAX_THROTTLE:?}, got {:?}",
                t.period
            ),
        ));
    }
    let mut states = t.states.clone();
    states.sort_by_key(|s| s.as_str());
    states.dedup();
    Ok((key, duration_millis(t.period), states))
}

/// A debounce's own rules, and the fields it cannot be combined with.
fn check_debounce(push: &Push, d: &Debounce) -> Result<ValidDebounce> {
    let conflicts = [
        ("run_at", push.run_at.is_some()),
        ("delay", push.delay.is_some()),
        ("unique_key", push.unique_key.is_some()),
        ("parent", push.parent.is_some()),
        ("depends_on", !push.depends_on.is_empty()),
        ("schedule", push.schedule.is_some()),
    ];
    if let Some((field, _)) = conflicts.iter().find(|(_, set)| *set) {
        return Err(Error::invalid(
            "debounce",
            format!(
                "cannot be combined with {field}: a debounced job's run is timed by its pushes"
            ),
        ));
    }
    let key = DebounceKey::parse(d.key.as_str())?;
    if d.max_wait > MAX_DEBOUNCE {
        return Err(Error::invalid(
            "debounce.max_wait",
            format!("must be at most {MAX_DEBOUNCE:?}, got {:?}", d.max_wait),
        ));
    }
    if d.delay > d.max_wait {
        return Err(Error::invalid(
            "debounce.delay",
            format!(
                "must not exceed debounce.max_wait ({:?}), got {:?}",
                d.max_wait, d.delay
            ),
        ));
    }
    Ok(ValidDebounce {
        key,
        delay_ms: duration_millis(d.delay),
        max_wait_ms: duration_millis(d.max_wait),
    })
}

const SELECT_LIVE_BY_UNIQUE_KEY: Sql = Sql::both(concat!(
    "SELECT id, state FROM jobs WHERE unique_key = $1 AND ",
    crate::ops::live!()
));

/// A would-be parent's state, and whether it waits for anything but its children. Locked, so that a child is not
/// added while another node ends the parent's run (which would miss the child it starts or cancels).
const SELECT_PARENT: Sql = Sql {
    sqlite: "SELECT state, awaits_parent = TRUE \
             OR EXISTS (SELECT 1 FROM job_dependencies WHERE job_id = $1) FROM jobs WHERE id = $1",
    postgres: "SELECT state, awaits_parent = TRUE \
               OR EXISTS (SELECT 1 FROM job_dependencies WHERE job_id = $1) FROM jobs WHERE id = $1 FOR UPDATE",
};

const AWAIT_PARENT: Sql = Sql::both("UPDATE jobs SET awaits_parent = TRUE WHERE id = $1");
const MARK_HAS_CHILDREN: Sql =
    Sql::both("UPDATE jobs SET has_children = TRUE WHERE id = $1 AND has_children = FALSE");

/// The columns [`INSERT_JOB`] and [`INSERT_PLAIN`] fill, [`COLUMNS_PER_JOB`] per job, in the order of
/// [`job_values`].
macro_rules! insert_jobs_into {
    () => {
        "INSERT INTO jobs (queue, name, state, data, priority, weight, run_at, max_attempts, backoff_initial_ms, \
         backoff_multiplier, backoff_max_ms, backoff_jitter, lease_timeout_ms, unique_key, parent_id, created_at, \
         schedule, time_zone, slot_at, timeout_ms, aging_ms, concurrency_key, concurrency_limit, trace_parent, batch_id, \
         children_of_job)"
    };
}

/// Plain jobs, many at once, in as few statements as [`MultiRow`] allows (one on PostgreSQL, its arrays in the
/// order of [`job_values`]): the runs of plain jobs in a [`PushBatch`], and on PostgreSQL the single pushes of a
/// writer's batch (see `ops/bulk.rs`). The ids come back in the order the jobs were given.
static INSERT_PLAIN: MultiRow = MultiRow::new(
    COLUMNS_PER_JOB,
    insert_jobs_into!(),
    "",
    concat!(
        insert_jobs_into!(),
        " SELECT c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, c21, \
         c22, c23, c24, c25, c26 \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::json[], $5::bigint[], $6::bigint[], $7::bigint[], \
         $8::bigint[], $9::bigint[], $10::double precision[], $11::bigint[], $12::double precision[], \
         $13::bigint[], $14::text[], $15::bigint[], $16::bigint[], $17::text[], $18::text[], $19::bigint[], \
         $20::bigint[], $21::bigint[], $22::text[], $23::bigint[], $24::text[], $25::bigint[], $26::boolean[]) \
         WITH ORDINALITY AS u (c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, \
         c19, c20, c21, c22, c23, c24, c25, c26, ord) ORDER BY ord RETURNING id"
    ),
);

/// Inserts plain jobs (see [`ValidPush::is_plain`]) in a few statements; what each became, in order.
pub(crate) fn insert_plain_many<V: Borrow<ValidPush>>(
    valid: &[V],
    ctx: &mut WriteCtx<'_>,
) -> Result<Vec<Enqueued>> {
    let valid: Vec<&ValidPush> = valid.iter().map(Borrow::borrow).collect();
    let states: Vec<JobState> = valid.iter().map(|v| v.state(ctx.now_ms)).collect();
    let mut values = Vec::with_capacity(valid.len() * COLUMNS_PER_JOB);
    for (v, state) in valid.iter().zip(&states) {
        job_values(&mut values, v, *state, ctx.now_ms);
    }
    let ids = INSERT_PLAIN.insert(&ctx.db, values)?;
    assert_eq!(ids.len(), valid.len(), "one id per inserted row");
    batch_jobs::count_added(ctx, valid.iter().map(|v| v.batch))?;
    let mut out = Vec::with_capacity(valid.len());
    for ((v, state), id) in valid.iter().zip(states).zip(ids) {
        if v.concurrency.is_some() {
            crate::ops::queues::mark_keyed(ctx, v.queue.as_str())?;
        }
        if state == JobState::Queued {
            ctx.ready.mark(v.queue.as_str());
        }
        v.record_added(ctx, JobId(id));
        out.push(Enqueued {
            id: JobId(id),
            state,
            existing: false,
        });
    }
    Ok(out)
}

/// [`INSERT_PLAIN`]'s texts (SQLite's for two rows), for the tests to prepare.
pub(crate) fn insert_plain_texts() -> (String, String) {
    let sqlite = INSERT_PLAIN.sqlite_text(2).unwrap_or_default().to_owned();
    (sqlite, INSERT_PLAIN.postgres().to_owned())
}

/// One job, [`COLUMNS_PER_JOB`] values in the order of [`job_values`].
const INSERT_JOB: Sql = Sql::both(concat!(
    insert_jobs_into!(),
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, \
     $22, $23, $24, $25, $26) \
     RETURNING id"
));

/// The values one job binds in INSERT_JOB and INSERT_PLAIN.
const COLUMNS_PER_JOB: usize = 26;

/// Appends one job's [`COLUMNS_PER_JOB`] values, in the order of [`insert_jobs_into!`].
fn job_values<'v>(values: &mut Vec<DbValue<'v>>, valid: &'v ValidPush, state: JobState, now: i64) {
    let retry = &valid.retry;
    let (schedule, time_zone) = valid.schedule.as_ref().map(Schedule::to_stored).unzip();
    values.extend([
        valid.queue.as_str().to_value(),
        valid.name.as_str().to_value(),
        state.as_str().to_value(),
        valid.data.as_str().to_value(),
        valid.priority.to_value(),
        valid.weight.to_value(),
        valid.run_at.to_value(),
        retry.max_attempts.to_value(),
        duration_millis(retry.initial_delay).to_value(),
        retry.multiplier.to_value(),
        duration_millis(retry.max_delay).to_value(),
        retry.jitter.to_value(),
        valid.lease_timeout_ms.to_value(),
        valid.unique_key.as_ref().map(|k| k.as_str()).to_value(),
        valid.parent.to_value(),
        now.to_value(),
        schedule.to_value(),
        time_zone.flatten().to_value(),
        valid.run_at.to_value(),
        valid.timeout_ms.to_value(),
        valid.aging_ms.to_value(),
        valid
            .concurrency
            .as_ref()
            .map(|(k, _)| k.as_str())
            .to_value(),
        valid.concurrency.as_ref().and_then(|(_, l)| *l).to_value(),
        valid.trace_parent.as_ref().map(|t| t.as_str()).to_value(),
        valid.batch.map(|b| b.0).to_value(),
        (valid.children == crate::Children::OfTheJob).to_value(),
    ]);
}

impl ValidPush {
    /// Makes the job one of `batch`'s (checked by its caller, [`CreateBatch`](crate::CreateBatch)).
    pub(crate) fn join(&mut self, batch: BatchId) {
        self.batch = Some(batch);
    }

    /// Notes the new job in the activity log and the statistics.
    fn record_added(&self, ctx: &mut WriteCtx<'_>, id: JobId) {
        let job = JobRef {
            id: id.0,
            queue: self.queue.as_str(),
            name: self.name.as_str(),
        };
        ctx.events
            .job(ctx.now_ms, ActivityKind::Added, job, None, None);
    }

    fn state(&self, now: i64) -> JobState {
        if self.run_at <= now {
            JobState::Queued
        } else {
            JobState::Scheduled
        }
    }

    /// Whether the job needs more than its row: a unique-key, debounce, throttle or parent check, or tags.
    pub(crate) fn is_plain(&self) -> bool {
        self.unique_key.is_none()
            && self.debounce.is_none()
            && self.throttle.is_none()
            && self.parent.is_none()
            && self.depends_on.is_empty()
            && self.tags.is_empty()
    }
}

const INSERT_TAG: Sql = Sql::both("INSERT INTO job_tags (job_id, tag) VALUES ($1, $2)");

/// Validates and inserts one job on `ctx.db`. Also used by [`Queue::enqueue_in`](crate::Queue::enqueue_in) on the
/// application's own connection.
pub(crate) fn insert(push: &Push, ctx: &mut WriteCtx<'_>) -> Result<Enqueued> {
    let valid = validate(push, ctx)?;
    insert_valid(&valid, ctx)
}

/// The pending job a debounced push lands in: the newest scheduled or queued one holding the key whose window is
/// still open. Locked on PostgreSQL, so that a claim on another node either took it first (then it is no longer
/// pending, and the push makes a new job) or waits for this push.
const SELECT_DEBOUNCED: Sql = Sql {
    sqlite: "SELECT id, debounce_until FROM jobs WHERE debounce_key = $1 \
             AND (state = 'scheduled' OR state = 'queued') AND debounce_until > $2 ORDER BY id DESC LIMIT 1",
    postgres: "SELECT id, debounce_until FROM jobs WHERE debounce_key = $1 \
               AND (state = 'scheduled' OR state = 'queued') AND debounce_until > $2 ORDER BY id DESC LIMIT 1 \
               FOR UPDATE",
};

/// A debounced push landing in a pending job: its data, and its run moved (back to `scheduled` if it was due).
const DEBOUNCE_JOB: Sql =
    Sql::both("UPDATE jobs SET data = $1, run_at = $2, slot_at = $2, state = $3 WHERE id = $4");

/// The jobs a throttle key's period still holds, newest first: at most one, but for those whose state did not
/// count when later ones were pushed.
const SELECT_THROTTLED: Sql = Sql::both(
    "SELECT id, state FROM jobs WHERE throttle_key = $1 AND created_at > $2 ORDER BY id DESC LIMIT 1000",
);

/// A new throttled job's key.
const MARK_THROTTLED: Sql = Sql::both("UPDATE jobs SET throttle_key = $1 WHERE id = $2");

/// The job of the period that holds a throttle key, if one does.
fn throttled_by(
    key: &ThrottleKey,
    period_ms: i64,
    states: &[JobState],
    ctx: &mut WriteCtx<'_>,
) -> Result<Option<Enqueued>> {
    // Pushes of the key take turns across nodes until their transactions end, so that two nodes cannot both find
    // it free and both make a job (SQLite's one writer needs no lock: its dialect takes none).
    ctx.db.dialect().lock_throttle_key(&ctx.db, key.as_str())?;
    let since = ctx.now_ms.saturating_sub(period_ms);
    let held: Vec<(JobId, String)> =
        ctx.db
            .query(SELECT_THROTTLED, &params![key.as_str(), since], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
    for (id, state) in held {
        let state = parse_stored_state(&state)?;
        if states.is_empty() || states.contains(&state) {
            return Ok(Some(Enqueued {
                id,
                state,
                existing: true,
            }));
        }
    }
    Ok(None)
}

/// A new debounced job's key and window.
const MARK_DEBOUNCED: Sql =
    Sql::both("UPDATE jobs SET debounce_key = $1, debounce_until = $2 WHERE id = $3");

/// Lands a debounced push in the pending job that holds its key, if one does.
fn debounce_into_pending(
    valid: &ValidPush,
    d: &ValidDebounce,
    ctx: &mut WriteCtx<'_>,
) -> Result<Option<Enqueued>> {
    // As a throttle key's (see `throttled_by`).
    ctx.db
        .dialect()
        .lock_debounce_key(&ctx.db, d.key.as_str())?;
    let pending: Option<(JobId, i64)> = ctx.db.query_row(
        SELECT_DEBOUNCED,
        &params![d.key.as_str(), ctx.now_ms],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let Some((id, until)) = pending else {
        return Ok(None);
    };
    let run_at = ctx.now_ms.saturating_add(d.delay_ms).min(until);
    let state = if run_at <= ctx.now_ms {
        JobState::Queued
    } else {
        JobState::Scheduled
    };
    ctx.db.execute(
        DEBOUNCE_JOB,
        &params![valid.data.as_str(), run_at, state.as_str(), id],
    )?;
    if state == JobState::Queued {
        ctx.ready.mark(valid.queue.as_str());
    }
    let job = JobRef {
        id: id.0,
        queue: valid.queue.as_str(),
        name: valid.name.as_str(),
    };
    let detail = format!("run at {}", crate::clock::from_millis(run_at));
    ctx.events.job(
        ctx.now_ms,
        ActivityKind::Debounced,
        job,
        None,
        Some(&detail),
    );
    Ok(Some(Enqueued {
        id,
        state,
        existing: true,
    }))
}

/// Inserts one validated job: returns the live job holding its unique key instead, if there is one, and lands a
/// debounced push in the pending job holding its key.
fn insert_valid(valid: &ValidPush, ctx: &mut WriteCtx<'_>) -> Result<Enqueued> {
    if let Some((key, period_ms, states)) = &valid.throttle
        && let Some(held) = throttled_by(key, *period_ms, states, ctx)?
    {
        return Ok(held);
    }
    if let Some(d) = &valid.debounce
        && let Some(landed) = debounce_into_pending(valid, d, ctx)?
    {
        // The push's throttle key goes with the job it landed in, as it would with a job it created.
        if let Some((key, _, _)) = &valid.throttle {
            ctx.db
                .execute(MARK_THROTTLED, &params![key.as_str(), landed.id])?;
        }
        return Ok(landed);
    }
    if let Some(key) = &valid.unique_key {
        let existing =
            ctx.db
                .query_row(SELECT_LIVE_BY_UNIQUE_KEY, &params![key.as_str()], |row| {
                    Ok((row.get::<i64>(0)?, row.get::<String>(1)?))
                })?;
        if let Some((id, state)) = existing {
            let state = parse_stored_state(&state)?;
            return Ok(Enqueued {
                id: JobId(id),
                state,
                existing: true,
            });
        }
    }
    // A child of a running job waits for that run to finish.
    let awaits_parent = match valid.parent {
        Some(parent) => parent_state(ctx, parent)? == JobState::Running,
        None => false,
    };
    let mut pending = Vec::new();
    for &on in &valid.depends_on {
        if let DependencyOn::Pending = check_dependency(ctx, None, valid.parent, on)? {
            pending.push(on);
        }
    }
    let state = if awaits_parent || !pending.is_empty() {
        JobState::Waiting
    } else {
        valid.state(ctx.now_ms)
    };
    let mut values = Vec::with_capacity(COLUMNS_PER_JOB);
    job_values(&mut values, valid, state, ctx.now_ms);
    let id = ctx
        .db
        .query_one(INSERT_JOB, &Params(values), |r| r.get::<JobId>(0))?;
    batch_jobs::count_added(ctx, [valid.batch])?;
    if let Some(parent) = valid.parent {
        ctx.db.execute(MARK_HAS_CHILDREN, &params![parent])?;
        if awaits_parent {
            ctx.db.execute(AWAIT_PARENT, &params![id])?;
        }
    }
    for on in pending {
        record_dependency(ctx, id, on)?;
    }
    if !valid.tags.is_empty() {
        for tag in &valid.tags {
            ctx.db.execute(INSERT_TAG, &params![id, tag.as_str()])?;
        }
    }
    if let Some((key, _, _)) = &valid.throttle {
        ctx.db.execute(MARK_THROTTLED, &params![key.as_str(), id])?;
    }
    if valid.concurrency.is_some() {
        crate::ops::queues::mark_keyed(ctx, valid.queue.as_str())?;
    }
    if let Some(d) = &valid.debounce {
        let until = ctx.now_ms.saturating_add(d.max_wait_ms);
        ctx.db
            .execute(MARK_DEBOUNCED, &params![d.key.as_str(), until, id])?;
    }
    if state == JobState::Queued {
        ctx.ready.mark(valid.queue.as_str());
    }
    valid.record_added(ctx, id);
    Ok(Enqueued {
        id,
        state,
        existing: false,
    })
}

/// The state of a would-be parent: it must exist, and be running (its children start when the run finishes) or
/// waiting for its children (a child adding a sibling).
fn parent_state(ctx: &WriteCtx<'_>, parent: JobId) -> Result<JobState> {
    let row: Option<(String, bool)> = ctx.db.query_row(SELECT_PARENT, &params![parent.0], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })?;
    let Some((state, waits_for_others)) = row else {
        return Err(Error::invalid(
            "parent",
            format!("job {parent} does not exist"),
        ));
    };
    match parse_stored_state(&state)? {
        JobState::Running => Ok(JobState::Running),
        // A job waiting on its dependencies or on its own parent's run has not run: it has no children to wait for.
        JobState::Waiting if !waits_for_others => Ok(JobState::Waiting),
        state => Err(Error::invalid_state(format!(
            "parent: job {parent} is {state}; only a running job, or one waiting for its children, can have new children"
        ))),
    }
}

impl Operation for Push {
    type Output = Enqueued;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Enqueued> {
        insert(self, ctx)
    }
}

/// Many jobs pushed in one transaction: all are enqueued, or (if any is invalid) none.
#[derive(Debug, Clone, PartialEq)]
pub struct PushBatch {
    /// The jobs, in order.
    pub jobs: Vec<Push>,
}

impl Operation for PushBatch {
    type Output = Vec<Enqueued>;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Vec<Enqueued>> {
        // Everything is validated before anything is written, so a bad batch writes nothing.
        let valid = validate_all(&self.jobs, ctx)?;
        insert_all(&valid, ctx)
    }
}
