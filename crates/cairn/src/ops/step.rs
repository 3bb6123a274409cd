//! [`RecordStep`]: a handler records a step of its run, so that a later attempt reads the step's result instead of
//! running it again.
//!
//! These steps live inside one run of a handler. They are not a job's stages across queues (`Finish { next }`),
//! which move the whole job on.

use serde_json::Value;

use jiff::Timestamp;

use crate::clock::{from_millis, to_millis};
use crate::error::{Error, Result};
use crate::job::AttemptOutcome;
use crate::job::Step;
use crate::names::{JobId, StepName};
use crate::ops::events::{ActivityKind, JobRef};
use crate::ops::{
    Ending, Operation, WriteCtx, encode_json, end_attempt, extended_lease, held_job, lease_is_held,
    lease_refusal, requeue, waiting,
};
use crate::store::db::{Sql, params};

/// The most steps one job records.
pub const MAX_STEPS: u32 = 1000;

/// The most bytes of JSON a job's steps' results hold in all, as a multiple of the largest job data (8 MiB by
/// default): every claim of the job reads them all.
pub const MAX_STEP_BYTES_PER_DATA: u64 = 8;

/// Records the result of step `name` of the job's run, under the job's lease, and extends the lease as a heartbeat
/// does. A step already recorded (by this attempt, or an earlier one) keeps its first result: the answer is the
/// step as stored, so that a request sent again after its answer was lost changes nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordStep {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The step's name within the job.
    pub name: StepName,
    /// What the step produced.
    pub result: Value,
}

impl RecordStep {
    /// Records step `name` with `result` under `lease`.
    pub fn new(lease: &crate::Lease, name: StepName, result: Value) -> Self {
        RecordStep {
            job: lease.job,
            token: lease.token,
            name,
            result,
        }
    }
}

/// The job's attempt, step count and step bytes, queue, name and worker, with its lease extended, if job `$2` is held under token `$3` at
/// `$1`.
const HOLD_FOR_STEP: Sql = Sql {
    sqlite: concat!(
        "UPDATE jobs SET lease_expires_at = ",
        extended_lease!(sqlite, "$1"),
        " WHERE ",
        lease_is_held!("$2", "$3", "$1"),
        " RETURNING attempt, step_count, step_bytes, queue, name, worker"
    ),
    postgres: concat!(
        "UPDATE jobs SET lease_expires_at = ",
        extended_lease!(postgres, "$1"),
        " WHERE ",
        lease_is_held!("$2", "$3", "$1"),
        " RETURNING attempt, step_count, step_bytes, queue, name, worker"
    ),
};

const STORED_STEP: Sql =
    Sql::both("SELECT result, attempt, recorded_at FROM job_steps WHERE job_id = $1 AND name = $2");

/// Records a step unless one of that name is: `RETURNING` a row when it was inserted. A trigger counts it on its job
/// (`step_count`, `step_bytes`: migrations SQLite 0028, PostgreSQL 0025), so this is the one statement of a new step.
const INSERT_STEP: Sql = Sql::both(
    "INSERT INTO job_steps (job_id, name, seq, result, attempt, recorded_at) VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (job_id, name) DO NOTHING RETURNING seq",
);

impl Operation for RecordStep {
    type Output = Step;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Step> {
        record(ctx, self.job, self.token, &self.name, &self.result)
    }
}

/// Records step `name` of the job `token` holds, with `result`, unless it is recorded already; answers the step as
/// stored. Extends the lease.
fn record(
    ctx: &mut WriteCtx<'_>,
    job: JobId,
    token: i64,
    name: &StepName,
    result: &Value,
) -> Result<Step> {
    let Some(held) = hold_for_step(ctx, job, token)? else {
        return Err(lease_refusal(ctx, job, token));
    };
    let text = encode_json("result", result, ctx.limits());
    store_and_tell(ctx, job, &held, name.as_str(), result, text)
}

/// [`store`]s step `name` of the job `held` (under its lease), and records its `step_recorded` event when it is new:
/// a step recorded before is answered as it was, and nothing happened now.
pub(crate) fn store_and_tell(
    ctx: &mut WriteCtx<'_>,
    job: JobId,
    held: &HeldForStep,
    name: &str,
    result: &Value,
    text: Result<String>,
) -> Result<Step> {
    let (step, new) = store(ctx, job, name, result, text, &held.tally)?;
    if new {
        let at = JobRef {
            id: job.0,
            queue: &held.queue,
            name: &held.name,
        };
        ctx.events.job(
            ctx.now_ms,
            ActivityKind::StepRecorded,
            at,
            Some(&held.worker),
            Some(name),
        );
    }
    Ok(step)
}

/// What a step's write needs to know of its job: its attempt, and its steps so far, for the limits.
pub(crate) struct StepTally {
    pub attempt: u32,
    pub count: u32,
    pub bytes: i64,
}

/// A job held for a step, its lease extended.
pub(crate) struct HeldForStep {
    pub tally: StepTally,
    pub queue: String,
    pub name: String,
    pub worker: String,
}

/// Extends the lease of `job` if `token` holds it, and reads what a step's write needs; `None` if it does not.
pub(crate) fn hold_for_step(
    ctx: &WriteCtx<'_>,
    job: JobId,
    token: i64,
) -> Result<Option<HeldForStep>> {
    ctx.db
        .query_row(HOLD_FOR_STEP, &params![ctx.now_ms, job.0, token], |row| {
            Ok(HeldForStep {
                tally: StepTally {
                    attempt: row.get(0)?,
                    count: row.get(1)?,
                    bytes: row.get(2)?,
                },
                queue: row.get(3)?,
                name: row.get(4)?,
                worker: row.get(5)?,
            })
        })
}

/// Stores step `name` of `job` with `result`, encoded as `text` (or the error its encoding met), within the job's
/// limits, unless it is recorded already: answers the step as stored, and whether it is new. Records no event.
pub(crate) fn store(
    ctx: &WriteCtx<'_>,
    job: JobId,
    name: &str,
    result: &Value,
    text: Result<String>,
    tally: &StepTally,
) -> Result<(Step, bool)> {
    let most = ctx.limits().max_data_bytes as u64 * MAX_STEP_BYTES_PER_DATA;
    let fits = |text: &str| {
        tally.count < MAX_STEPS && tally.bytes.max(0) as u64 + text.len() as u64 <= most
    };
    let inserted = match &text {
        Ok(text) if fits(text) => ctx
            .db
            .query_row(
                INSERT_STEP,
                &params![
                    job.0,
                    name,
                    i64::from(tally.count),
                    text.as_str(),
                    tally.attempt,
                    ctx.now_ms
                ],
                |row| row.get::<i64>(0),
            )?
            .is_some(),
        _ => false,
    };
    if !inserted {
        // Recorded already (a request sent again, or a replay that raced): the first result stands, whatever the
        // limits say now. Otherwise the step is refused, naming the limit.
        if let Some(step) = stored_step(ctx, job, name)? {
            return Ok((step, false));
        }
        let text = text?;
        if tally.count >= MAX_STEPS {
            return Err(Error::invalid(
                "step",
                format!(
                    "a job records at most {MAX_STEPS} steps, and job {job} has; make a step of a loop, not of each \
                     turn"
                ),
            ));
        }
        let total = tally.bytes.max(0) as u64 + text.len() as u64;
        return Err(Error::invalid(
            "result",
            format!(
                "a job's step results hold at most {most} bytes of JSON in all, and this one would make {total}; \
                 keep large results elsewhere and record where"
            ),
        ));
    }
    let step = Step {
        name: name.to_owned(),
        result: result.clone(),
        attempt: tally.attempt,
        recorded_at: from_millis(ctx.now_ms),
    };
    Ok((step, true))
}

/// When a suspended job runs again.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Resume {
    /// At this time (milliseconds).
    At(i64),
    /// Once its children have ended, as a parent whose run finished waits for them.
    WhenChildrenEnd,
}

/// Suspends the job `token` holds: the attempt ends as suspended and does not count, its worker is free, and the job
/// runs again as `resume` says. The children its run created start, as they would if the run had finished: the run
/// goes on later. `detail` says why, in the `suspended` event.
pub(crate) fn suspend(
    ctx: &mut WriteCtx<'_>,
    job: JobId,
    token: i64,
    resume: Resume,
    detail: &str,
) -> Result<()> {
    let held = held_job(ctx, job, token)?;
    end_attempt(ctx, &held, AttemptOutcome::Suspended, Ending::default())?;
    ctx.events.job(
        ctx.now_ms,
        ActivityKind::Suspended,
        (&held).into(),
        Some(&held.worker),
        Some(detail),
    );
    if held.has_children {
        waiting::start_children(ctx, job)?;
    }
    ctx.db.execute(
        Sql::both("UPDATE jobs SET attempt = attempt - 1, suspended_at = $1 WHERE id = $2"),
        &params![ctx.now_ms, job.0],
    )?;
    match resume {
        Resume::At(at) => {
            requeue(ctx, job, &held.queue, at, None)?;
        }
        Resume::WhenChildrenEnd => {
            ctx.db.execute(
                Sql::both(
                    "UPDATE jobs SET state = 'waiting', lease_token = NULL, lease_expires_at = NULL WHERE id = $1",
                ),
                &params![job.0],
            )?;
        }
    }
    Ok(())
}

/// The handler sleeps until `until`, as step `name`: the job gives up its worker (the lease ends, and the attempt
/// does not count) and runs again at that time, replaying its steps. The wake time is recorded as the step's
/// result the first time, so a job that runs again (woken, or retried before it) sleeps until the same time; once
/// that time has passed, the step answers at once and the handler goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct Sleep {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The step's name within the job.
    pub name: StepName,
    /// When the job wakes, the first time the step is reached.
    pub wake: Wake,
}

/// When a sleeping job wakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// At this time.
    At(Timestamp),
    /// This long after the step is first reached, by the queue's clock.
    After(std::time::Duration),
}

impl Wake {
    /// The time this names, in milliseconds, from `now_ms`.
    pub(crate) fn millis_from(self, now_ms: i64) -> Result<i64> {
        let at = match self {
            Wake::At(at) => at,
            Wake::After(span) => {
                let span =
                    jiff::SignedDuration::try_from(span).unwrap_or(jiff::SignedDuration::MAX);
                from_millis(now_ms)
                    .checked_add(span)
                    .map_err(|_| Error::invalid("wake", "must be before the year 9999"))?
            }
        };
        Ok(to_millis(at))
    }
}

impl Sleep {
    /// Sleeps as step `name` of the job `lease` holds, until `wake`.
    pub fn new(lease: &crate::Lease, name: StepName, wake: Wake) -> Self {
        Sleep {
            job: lease.job,
            token: lease.token,
            name,
            wake,
        }
    }
}

/// What came of a [`Sleep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slept {
    /// The job sleeps until this time: its lease is over, and the handler must return (with the error
    /// [`JobContext::sleep`](crate::JobContext::sleep) gives it).
    Suspended {
        /// When it wakes.
        until: Timestamp,
    },
    /// The step's time has passed: the handler goes on.
    Woke,
}

impl Operation for Sleep {
    type Output = Slept;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Slept> {
        let at = from_millis(self.wake.millis_from(ctx.now_ms)?);
        let result = serde_json::json!({ "until": at.to_string() });
        let step = record(ctx, self.job, self.token, &self.name, &result)?;
        let until = step.result["until"]
            .as_str()
            .and_then(|t| t.parse::<Timestamp>().ok())
            .ok_or_else(|| {
                Error::invalid(
                    "step",
                    format!(
                        "step {:?} of job {} was recorded by something other than a sleep",
                        self.name.as_str(),
                        self.job
                    ),
                )
            })?;
        let until_ms = to_millis(until);
        if until_ms <= ctx.now_ms {
            return Ok(Slept::Woke);
        }
        let detail = format!("step {}, until {until}", self.name.as_str());
        suspend(ctx, self.job, self.token, Resume::At(until_ms), &detail)?;
        Ok(Slept::Suspended { until })
    }
}

/// Step `name` of `job` as stored, if it is.
pub(crate) fn stored_step(ctx: &WriteCtx<'_>, job: JobId, name: &str) -> Result<Option<Step>> {
    let stored: Option<(String, u32, i64)> =
        ctx.db
            .query_row(STORED_STEP, &params![job.0, name], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?;
    stored
        .map(|(result, attempt, at)| {
            Ok(Step {
                name: name.to_owned(),
                result: serde_json::from_str(&result).map_err(|e| {
                    Error::storage("the database holds a step whose result is not JSON", e)
                })?,
                attempt,
                recorded_at: from_millis(at),
            })
        })
        .transpose()
}

/// Forgets a job's steps when it starts over as new work (its next stage, or a recurring job's next run). The job's
/// own statement sets its count of them to 0.
pub(crate) fn forget_steps(ctx: &WriteCtx<'_>, job: JobId) -> Result<()> {
    ctx.db.execute(
        Sql::both("DELETE FROM job_steps WHERE job_id = $1"),
        &params![job.0],
    )?;
    Ok(())
}
