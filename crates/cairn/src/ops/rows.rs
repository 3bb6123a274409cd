//! Mapping rows of `jobs` and `job_attempts` to [`Job`] and [`Attempt`].

use std::time::Duration;

use crate::clock::from_millis;
use crate::error::{Error, ErrorKind, Result};
use crate::job::{Attempt, AttemptOutcome, Job, JobState, RunUsage, Step};
use crate::lease::Lease;
use crate::names::JobId;
use crate::names::{
    ConcurrencyKey, DebounceKey, JobName, QueueName, SignalKey, Tag, ThrottleKey, TraceParent,
    UniqueKey, WorkerId,
};
use crate::retry_policy::RetryPolicy;
use crate::store::db::{Db, Row, Sql, params};

/// The columns [`job_from_row`] reads, in order. Tags come in one column, separated by the unit separator (0x1F,
/// written into the literal itself: SQLite spells the function that makes it `char`, PostgreSQL `chr`). A macro so
/// that statements can `concat!` it.
macro_rules! job_columns {
    () => {
        "id, queue, name, state, data, progress, priority, weight, run_at, attempt, \
         max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, lease_timeout_ms, \
         unique_key, parent_id, worker, lease_expires_at, created_at, started_at, finished_at, error, failure_group, \
         (SELECT string_agg(tag, '\u{1f}' ORDER BY tag) FROM job_tags WHERE job_id = jobs.id), \
         attempt_started_at, schedule, time_zone, awaits_parent, \
         (SELECT string_agg(CAST(depends_on AS TEXT), ',' ORDER BY depends_on) FROM job_dependencies \
          WHERE job_id = jobs.id), timeout_ms, tracked, debounce_key, throttle_key, \
          concurrency_key, concurrency_limit, result, trace_parent, batch_id, children_of_job, slot_at, step_count, \
          signal_key, suspended_at"
    };
}
pub(crate) use job_columns;

/// The columns as a constant, for statements built at run time.
pub(crate) const JOB_COLUMNS: &str = job_columns!();

/// How many columns [`JOB_COLUMNS`] selects: the index of the first column a statement adds after them.
pub(crate) const JOB_COLUMN_COUNT: usize = 45;

fn parse_json(text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text)
        .map_err(|e| Error::storage("the database holds a job whose data is not JSON", e))
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// Reads the five retry-policy columns (`max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms,
/// backoff_jitter`) starting at column `first`.
pub(crate) fn retry_policy_from_row(row: &Row<'_>, first: usize) -> Result<RetryPolicy> {
    Ok(RetryPolicy {
        max_attempts: row.get(first)?,
        initial_delay: millis(row.get(first + 1)?),
        multiplier: row.get(first + 2)?,
        max_delay: millis(row.get(first + 3)?),
        jitter: row.get(first + 4)?,
    })
}

/// Whose a job's children are, from its `children_of_job` column.
pub(crate) fn children_from(of_job: bool) -> crate::Children {
    if of_job {
        crate::Children::OfTheJob
    } else {
        crate::Children::OfTheRun
    }
}

/// Reads one job (without its history) from a row selected with [`JOB_COLUMNS`].
pub(crate) fn job_from_row(row: &Row<'_>) -> Result<Job> {
    let state: String = row.get(3)?;
    let data: String = row.get(4)?;
    let progress: Option<String> = row.get(5)?;
    let result: Option<String> = row.get(37)?;
    let tags: Option<String> = row.get(25)?;
    let state = state.parse::<JobState>().map_err(|_| {
        Error::new(
            ErrorKind::Storage,
            format!("the database holds a job in an unknown state {state:?}"),
        )
    })?;
    // The row keeps the last attempt's worker; callers see a worker only while it holds the job.
    let worker = match state {
        JobState::Running => row.get::<Option<String>>(18)?.map(WorkerId::from_trusted),
        _ => None,
    };
    Ok(Job {
        id: JobId(row.get(0)?),
        queue: QueueName::from_trusted(row.get(1)?),
        name: JobName::from_trusted(row.get(2)?),
        state,
        data: parse_json(&data)?,
        progress: progress.as_deref().map(parse_json).transpose()?,
        result: result.as_deref().map(parse_json).transpose()?,
        priority: row.get(6)?,
        weight: row.get(7)?,
        run_at: from_millis(row.get(8)?),
        attempt: row.get(9)?,
        retry: retry_policy_from_row(row, 10)?,
        lease_timeout: millis(row.get(15)?),
        unique_key: row.get::<Option<String>>(16)?.map(UniqueKey::from_trusted),
        parent: row.get::<Option<i64>>(17)?.map(JobId),
        worker,
        lease_expires_at: row.get::<Option<i64>>(19)?.map(from_millis),
        created_at: from_millis(row.get(20)?),
        started_at: row.get::<Option<i64>>(21)?.map(from_millis),
        finished_at: row.get::<Option<i64>>(22)?.map(from_millis),
        error: row.get(23)?,
        failure_group: row.get(24)?,
        tags: tags
            .map(|t| {
                t.split('\u{1f}')
                    .map(|s| Tag::from_trusted(s.to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
        schedule: row.get(27)?,
        time_zone: row.get(28)?,
        awaits_parent: row.get(29)?,
        tracked: row.get(32)?,
        debounce_key: row
            .get::<Option<String>>(33)?
            .map(DebounceKey::from_trusted),
        throttle_key: row
            .get::<Option<String>>(34)?
            .map(ThrottleKey::from_trusted),
        concurrency_key: row
            .get::<Option<String>>(35)?
            .map(ConcurrencyKey::from_trusted),
        concurrency_limit: row.get(36)?,
        trace_parent: row
            .get::<Option<String>>(38)?
            .map(TraceParent::from_trusted),
        batch: row.get::<Option<i64>>(39)?.map(crate::BatchId),
        children: children_from(row.get(40)?),
        due_at: from_millis(row.get(41)?),
        timeout: row.get::<Option<i64>>(31)?.map(millis),
        depends_on: row
            .get::<Option<String>>(30)?
            .map(|ids| {
                ids.split(',')
                    .filter_map(|id| id.parse().ok())
                    .map(JobId)
                    .collect()
            })
            .unwrap_or_default(),
        history: Vec::new(),
        step_count: row.get(42)?,
        steps: Vec::new(),
        // Kept on a job cancelled while it waited (so that a signal to it is refused), but no longer awaited.
        awaits_signal: row
            .get::<Option<String>>(43)?
            .filter(|_| state.is_live())
            .map(SignalKey::from_trusted),
        // Cleared when a worker takes the job; a suspended job cancelled or requeued by hand is no longer suspended.
        suspended_at: row
            .get::<Option<i64>>(44)?
            .filter(|_| matches!(state, JobState::Scheduled | JobState::Waiting))
            .map(from_millis),
    })
}

/// Reads a job's steps, in the order they were recorded. Only a job whose `step_count` is not 0 has any.
pub(crate) fn load_steps(db: &Db<'_>, id: JobId) -> Result<Vec<Step>> {
    const SELECT_STEPS: Sql = Sql::both(
        "SELECT name, result, attempt, recorded_at FROM job_steps WHERE job_id = $1 ORDER BY seq",
    );
    db.query(SELECT_STEPS, &params![id], |row| {
        let result: String = row.get(1)?;
        Ok(Step {
            name: row.get(0)?,
            result: parse_json(&result)?,
            attempt: row.get(2)?,
            recorded_at: from_millis(row.get(3)?),
        })
    })
}

/// Reads one job by id, without its history, and when its current (or last) attempt started.
fn load_job(db: &Db<'_>, id: JobId) -> Result<Option<(Job, Option<i64>)>> {
    const SELECT_JOB: Sql = Sql::both(concat!(
        "SELECT ",
        job_columns!(),
        " FROM jobs WHERE id = $1"
    ));
    db.query_row(SELECT_JOB, &params![id], |row| {
        Ok((job_from_row(row)?, row.get(26)?))
    })
}

/// Reads a job with its full history, or fails with not found. Readers run in one read transaction, so the job,
/// its history and its running attempt come from one snapshot.
pub(crate) fn load_job_with_history(db: &Db<'_>, id: JobId) -> Result<Job> {
    let (mut job, attempt_started_at) =
        load_job(db, id)?.ok_or_else(|| Error::not_found(format!("job {id}")))?;
    if job.step_count > 0 {
        job.steps = load_steps(db, id)?;
    }
    const SELECT_HISTORY: Sql = Sql::both(
        "SELECT attempt, worker, started_at, finished_at, outcome, error, run_ms, cpu_ms, peak_memory, result \
         FROM job_attempts WHERE job_id = $1 ORDER BY claim",
    );
    job.history = db.query(SELECT_HISTORY, &params![id], |row| {
        let outcome: String = row.get(4)?;
        let result: Option<String> = row.get(9)?;
        Ok(Attempt {
            number: row.get(0)?,
            worker: WorkerId::from_trusted(row.get(1)?),
            started_at: from_millis(row.get(2)?),
            finished_at: Some(from_millis(row.get(3)?)),
            outcome: AttemptOutcome::parse(&outcome),
            error: row.get(5)?,
            usage: usage_from_row(row.get(6)?, row.get(7)?, row.get(8)?),
            result: result.as_deref().map(parse_json).transpose()?,
        })
    })?;
    if let (JobState::Running, Some(worker)) = (job.state, &job.worker) {
        // The running attempt lives on the job row until it ends.
        job.history.push(Attempt {
            number: job.attempt,
            worker: worker.clone(),
            started_at: from_millis(attempt_started_at.unwrap_or(0)),
            finished_at: None,
            outcome: None,
            error: None,
            usage: None,
            result: None,
        });
    }
    Ok(job)
}

/// A history row's usage: all three columns are written together, or none.
fn usage_from_row(
    run_ms: Option<i64>,
    cpu_ms: Option<i64>,
    peak_memory: Option<i64>,
) -> Option<RunUsage> {
    let millis = |ms: i64| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    Some(RunUsage {
        run_time: millis(run_ms?),
        cpu_time: millis(cpu_ms?),
        peak_memory: u64::try_from(peak_memory?).unwrap_or(0),
    })
}

/// The lease of a running job, token included.
pub(crate) fn load_lease(db: &Db<'_>, id: JobId) -> Result<Option<Lease>> {
    db.query_row(
        Sql::both("SELECT lease_token, worker, lease_expires_at FROM jobs WHERE id = $1 AND state = 'running'"),
        &params![id],
        |row| {
            Ok(Lease {
                job: id,
                token: row.get(0)?,
                worker: WorkerId::from_trusted(row.get(1)?),
                expires_at: from_millis(row.get(2)?),
            })
        },
    )
}
