//! Enqueueing: [`Push`] (one job) and [`PushBatch`] (many, all or nothing).

use std::time::Duration;

use jiff::Timestamp;
use rusqlite::{OptionalExtension, named_params};
use serde_json::Value;

use crate::clock::{duration_millis, to_millis};
use crate::error::{Error, Result};
use crate::job::{JobId, JobState};
use crate::names::{JobName, QueueName, Tag, UniqueKey};
use crate::ops::{Operation, WriteCtx, encode_json};
use crate::retry_policy::RetryPolicy;

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
    /// Attempts and backoff; the queue's default unless set.
    pub retry: Option<RetryPolicy>,
    /// How long a worker may hold the job between heartbeats; the queue's default unless set.
    pub lease_timeout: Option<Duration>,
    /// While a live job holds this key, pushing another job with it returns the existing job instead.
    pub unique_key: Option<String>,
    /// Tags, for finding the job later.
    pub tags: Vec<String>,
    /// The job's parent, which must exist.
    pub parent: Option<JobId>,
}

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
            retry: None,
            lease_timeout: None,
            unique_key: None,
            tags: Vec::new(),
            parent: None,
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

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Sets the lease timeout.
    pub fn lease_timeout(mut self, timeout: Duration) -> Self {
        self.lease_timeout = Some(timeout);
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

/// The longest lease a job may ask for: a day. A lost worker then holds a job at most that long.
const MAX_LEASE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// The shortest lease: shorter leases expire before a heartbeat can arrive.
const MIN_LEASE_TIMEOUT: Duration = Duration::from_millis(100);

/// A push whose every field passed validation.
struct ValidPush {
    queue: QueueName,
    name: JobName,
    data: String,
    run_at: i64,
    retry: RetryPolicy,
    lease_timeout_ms: i64,
    unique_key: Option<UniqueKey>,
    tags: Vec<Tag>,
}

fn validate(push: &Push, ctx: &WriteCtx<'_>) -> Result<ValidPush> {
    let queue = QueueName::parse(push.queue.as_str())?;
    let name = JobName::parse(push.name.as_str())?;
    if push.weight == 0 {
        return Err(Error::invalid("weight", "must be at least 1, got 0"));
    }
    let run_at = match (push.run_at, push.delay) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid("run_at", "cannot be combined with delay"));
        }
        (Some(at), None) => to_millis(at),
        (None, Some(delay)) => ctx.now_ms.saturating_add(duration_millis(delay)),
        (None, None) => ctx.now_ms,
    };
    let retry = push.retry.unwrap_or(ctx.limits.default_retry);
    retry.validate()?;
    let lease_timeout = push
        .lease_timeout
        .unwrap_or(ctx.limits.default_lease_timeout);
    if !(MIN_LEASE_TIMEOUT..=MAX_LEASE_TIMEOUT).contains(&lease_timeout) {
        return Err(Error::invalid(
            "lease_timeout",
            format!(
                "must be between {MIN_LEASE_TIMEOUT:?} and {MAX_LEASE_TIMEOUT:?}, got {lease_timeout:?}"
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
    let data = encode_json("data", &push.data, ctx.limits)?;
    Ok(ValidPush {
        queue,
        name,
        data,
        run_at,
        retry,
        lease_timeout_ms: duration_millis(lease_timeout),
        unique_key,
        tags,
    })
}

const SELECT_LIVE_BY_UNIQUE_KEY: &str = "SELECT id, state FROM jobs WHERE unique_key = :key \
     AND (state = 'scheduled' OR state = 'queued' OR state = 'waiting' OR state = 'running')";

const SELECT_JOB_EXISTS: &str = "SELECT 1 FROM jobs WHERE id = :id";

const INSERT_JOB: &str = "INSERT INTO jobs (queue, name, state, data, priority, weight, run_at, max_attempts, \
     backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, lease_timeout_ms, unique_key, \
     parent_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)";

const INSERT_TAG: &str = "INSERT INTO job_tags (job_id, tag) VALUES (:id, :tag)";

/// Validates and inserts one job on `ctx.conn`. Also used by [`Queue::enqueue_in`](crate::Queue::enqueue_in) on the
/// application's own connection.
pub(crate) fn insert(push: &Push, ctx: &mut WriteCtx<'_>) -> Result<Enqueued> {
    let valid = validate(push, ctx)?;
    let conn = ctx.conn;
    if let Some(key) = &valid.unique_key {
        let existing = conn
            .prepare_cached(SELECT_LIVE_BY_UNIQUE_KEY)?
            .query_row(named_params! { ":key": key.as_str() }, |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .optional()?;
        if let Some((id, state)) = existing {
            let state = state.parse().expect("stored states are valid");
            return Ok(Enqueued {
                id: JobId(id),
                state,
                existing: true,
            });
        }
    }
    if let Some(parent) = push.parent {
        let exists = conn
            .prepare_cached(SELECT_JOB_EXISTS)?
            .exists(named_params! { ":id": parent.0 })?;
        if !exists {
            return Err(Error::invalid(
                "parent",
                format!("job {parent} does not exist"),
            ));
        }
    }
    let state = if valid.run_at <= ctx.now_ms {
        JobState::Queued
    } else {
        JobState::Scheduled
    };
    let retry = &valid.retry;
    conn.prepare_cached(INSERT_JOB)?.execute(rusqlite::params![
        valid.queue.as_str(),
        valid.name.as_str(),
        state.as_str(),
        valid.data,
        push.priority,
        push.weight,
        valid.run_at,
        retry.max_attempts,
        duration_millis(retry.initial_delay),
        retry.multiplier,
        duration_millis(retry.max_delay),
        retry.jitter,
        valid.lease_timeout_ms,
        valid.unique_key.as_ref().map(|k| k.as_str()),
        push.parent.map(|p| p.0),
        ctx.now_ms,
    ])?;
    let id = JobId(conn.last_insert_rowid());
    if !valid.tags.is_empty() {
        let mut insert_tag = conn.prepare_cached(INSERT_TAG)?;
        for tag in &valid.tags {
            insert_tag.execute(named_params! { ":id": id.0, ":tag": tag.as_str() })?;
        }
    }
    if state == JobState::Queued {
        ctx.ready.mark(valid.queue.as_str());
    }
    Ok(Enqueued {
        id,
        state,
        existing: false,
    })
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
        let mut out = Vec::with_capacity(self.jobs.len());
        for (index, push) in self.jobs.iter().enumerate() {
            let enqueued = insert(push, ctx).map_err(|e| e.in_batch(index))?;
            out.push(enqueued);
        }
        Ok(out)
    }
}
