//! [`Finish`]: a worker completed its job, or this stage of it ([`Continue`]); a job's stages move it across
//! queues, where the steps of `ops/step.rs` live inside one run of a handler.

use crate::ops::events::{ActivityKind, JobRef};
use std::time::Duration;

use crate::store::db::{MultiRow, Sql, ToValue, params};
use serde_json::Value;

use crate::clock::duration_millis;
use crate::error::{Error, Result};
use crate::job::{AttemptOutcome, JobState, RunUsage};
use crate::lease::Lease;
use crate::names::JobId;
use crate::names::QueueName;
use crate::ops::push::MAX_DEPENDENCIES;
use crate::ops::waiting::{DependencyOn, check_dependency, record_dependency};
use crate::ops::{
    HELD_JOB_COLUMNS, HeldJob, Operation, WriteCtx, encode_json, end_attempt, held_job_columns,
    held_job_from_row, is_running, lease_is_held, lease_refusal, schedule_next_run, waiting,
};

/// What a finished stage of a job does instead of completing it: the job goes on in another queue, after a delay
/// or once other jobs complete, with fresh attempts and the data it finished with (qless's `complete … next`).
/// Atomic: the attempt ends and the job moves in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continue {
    /// The queue the job goes on in.
    pub queue: String,
    /// How long from now until it is ready again.
    pub delay: Option<Duration>,
    /// Jobs that must complete before it runs again.
    pub depends_on: Vec<JobId>,
}

/// The most jobs one [`Jobs::finish_many`](crate::Jobs::finish_many) may complete.
pub const MAX_FINISH_MANY: usize = 1000;

/// What [`Jobs::finish_and_take`](crate::Jobs::finish_and_take) did: each finish's answer, in order, and the jobs
/// the take claimed. The two parts succeed or fail apart: jobs taken are leased whatever became of the finishes.
#[derive(Debug)]
pub struct FinishAndTake {
    /// Each job's answer, as [`Jobs::finish_many`](crate::Jobs::finish_many) gives them, or the error that
    /// answered them all.
    pub finished: crate::Result<Vec<crate::Result<()>>>,
    /// The jobs taken, or why none could be.
    pub taken: crate::Result<Vec<crate::ClaimedJob>>,
}

/// Marks the job completed, optionally with a result, or replacing its data.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// What the job produced: kept apart from its data, as the job's [`result`](crate::Job::result) (until its
    /// next finish, which sets its own, or none) and with this attempt in its history.
    pub result: Option<Value>,
    /// The job's final data, replacing its input (and what a recurring job's next run starts from).
    pub data: Option<Value>,
    /// What the attempt's process used, if the worker measured it; kept in the job's history.
    pub usage: Option<RunUsage>,
    /// Instead of completing, go on in another queue.
    pub next: Option<Continue>,
}

impl Finish {
    /// Finishes the job `lease` holds.
    pub fn new(lease: &Lease) -> Self {
        Finish {
            job: lease.job,
            token: lease.token,
            result: None,
            data: None,
            usage: None,
            next: None,
        }
    }
}

/// Completes the job if the lease is held, returning the attempt's details for its history row.
/// `$1` now, `$2` the final data, `$3` the result, `$4` the job, `$5` the lease's token.
pub(crate) const COMPLETE_JOB: Sql = Sql::both(concat!(
    "UPDATE jobs SET state = 'completed', finished_at = $1, data = COALESCE($2, data), result = $3, \
     lease_token = NULL, lease_expires_at = NULL, error = NULL WHERE ",
    lease_is_held!("$4", "$5", "$1"),
    " RETURNING ",
    held_job_columns!()
));

impl Operation for Finish {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let data = self
            .data
            .as_ref()
            .map(|d| encode_json("data", d, ctx.limits()))
            .transpose()?;
        let result = self
            .result
            .as_ref()
            .map(|r| encode_json("result", r, ctx.limits()))
            .transpose()?;
        let next = self
            .next
            .as_ref()
            .map(|next| valid_continue(ctx, self.job, next))
            .transpose()?;
        let held = ctx
            .db
            .query_row(
                COMPLETE_JOB,
                &params![ctx.now_ms, data, result.as_deref(), self.job.0, self.token],
                held_job_from_row,
            )?
            .ok_or_else(|| lease_refusal(ctx, self.job, self.token))?;
        end_attempt(
            ctx,
            &held,
            AttemptOutcome::Completed,
            crate::ops::Ending {
                error: None,
                usage: self.usage.as_ref(),
                result: result.as_deref(),
            },
        )?;
        // The job's service time counts only when it is done: not when it goes on, or waits for its children.
        let finished = |ctx: &mut WriteCtx<'_>, done: bool| {
            ctx.events
                .attempt_ended(ctx.now_ms, ActivityKind::Finished, &held, true, done, None);
        };
        if let Some(next) = next {
            finished(ctx, false);
            return go_on(ctx, &held, next);
        }
        // A parent with live children waits for them, and runs again once they have all ended.
        if held.has_children && waiting::start_children(ctx, held.id)? {
            finished(ctx, false);
            return waiting::wait_for_children(ctx, held.id);
        }
        finished(ctx, true);
        // A recurring job runs again, with the data it finished with.
        schedule_next_run(ctx, &held)?;
        waiting::job_ended(
            ctx,
            held.id,
            held.parent,
            held.has_dependents,
            waiting::Ending::Completed,
        )
    }
}

/// Completes, in one statement, the plain finishes of a batch on PostgreSQL (see `ops/bulk.rs`): jobs held under
/// these exact, live leases that have no parent, children, dependents or schedule, so that completing one is its
/// row, its attempt and its events. The attempts are inserted by the same statement, from the rows it completed.
/// Those that do not qualify (or whose lease is not held) are left as they are, for [`Finish::apply`] to complete
/// or refuse one at a time. PostgreSQL only (a data-modifying `WITH`): the finishes are its arrays.
///
/// Arrays, one value per finish: `$1` the job, `$2` the lease's token, `$3` its final data, `$4` now, `$5` run time,
/// `$6` CPU time, `$7` peak memory, `$8` its result.
static COMPLETE_PLAIN: MultiRow = MultiRow::postgres_only(
    8,
    concat!(
        "WITH done AS (UPDATE jobs SET state = 'completed', finished_at = v.v_now, \
         data = COALESCE(v.v_data, jobs.data), result = v.v_result, lease_token = NULL, lease_expires_at = NULL, \
         error = NULL \
         FROM unnest($1::bigint[], $2::bigint[], $3::json[], $4::bigint[], $5::bigint[], $6::bigint[], \
         $7::bigint[], $8::json[]) AS v (v_id, v_token, v_data, v_now, v_run_ms, v_cpu_ms, v_peak_memory, v_result) \
         WHERE jobs.id = v.v_id AND ",
        is_running!("jobs"),
        " AND jobs.lease_token = v.v_token AND jobs.lease_expires_at > v.v_now AND jobs.parent_id IS NULL \
         AND jobs.has_children = FALSE AND jobs.has_dependents = FALSE AND jobs.schedule IS NULL RETURNING ",
        held_job_columns!(),
        ", v.v_token, v.v_now, v.v_run_ms, v.v_cpu_ms, v.v_peak_memory, v.v_result), \
         ended AS (INSERT INTO job_attempts \
         (job_id, claim, attempt, worker, started_at, finished_at, outcome, error, run_ms, cpu_ms, peak_memory, \
         result) \
         SELECT id, claims, attempt, worker, attempt_started_at, v_now, 'completed', NULL, v_run_ms, v_cpu_ms, \
         v_peak_memory, v_result FROM done) \
         SELECT ",
        held_job_columns!(),
        ", v_token FROM done"
    ),
);

/// [`COMPLETE_PLAIN`]'s text, for the tests to prepare.
pub(crate) fn complete_plain_text() -> &'static str {
    COMPLETE_PLAIN.postgres()
}

/// A plain finish, checked: the job, its lease's token, its final data and result as JSON, and what the attempt
/// used.
pub(crate) struct PlainFinish<'a> {
    pub job: JobId,
    pub token: i64,
    pub data: Option<String>,
    pub result: Option<String>,
    pub usage: Option<&'a RunUsage>,
}

impl Finish {
    /// The finish as [`complete_plain_many`] takes it, if it may go that way (no next step), once its data and
    /// result are checked.
    pub(crate) fn plain(&self, ctx: &WriteCtx<'_>) -> Option<Result<PlainFinish<'_>>> {
        if self.next.is_some() {
            return None;
        }
        let json = |field: &'static str, value: &Option<Value>| {
            value
                .as_ref()
                .map(|v| encode_json(field, v, ctx.limits()))
                .transpose()
        };
        let checked = json("data", &self.data).and_then(|data| {
            Ok(PlainFinish {
                job: self.job,
                token: self.token,
                data,
                result: json("result", &self.result)?,
                usage: self.usage.as_ref(),
            })
        });
        Some(checked)
    }
}

/// Completes those of `finishes` that qualify (see [`COMPLETE_PLAIN`]); returns, for each, whether it did.
pub(crate) fn complete_plain_many(
    finishes: &[PlainFinish<'_>],
    ctx: &mut WriteCtx<'_>,
) -> Result<Vec<bool>> {
    let mut values = Vec::with_capacity(finishes.len() * 8);
    for f in finishes {
        values.extend([
            f.job.to_value(),
            f.token.to_value(),
            f.data.as_deref().to_value(),
            ctx.now_ms.to_value(),
            f.usage.map(|u| duration_millis(u.run_time)).to_value(),
            f.usage.map(|u| duration_millis(u.cpu_time)).to_value(),
            f.usage
                .map(|u| i64::try_from(u.peak_memory).unwrap_or(i64::MAX))
                .to_value(),
            f.result.as_deref().to_value(),
        ]);
    }
    let completed = COMPLETE_PLAIN.query(&ctx.db, values, |row| {
        Ok((held_job_from_row(row)?, row.get::<i64>(HELD_JOB_COLUMNS)?))
    })?;
    let mut done = vec![false; finishes.len()];
    for (held, token) in &completed {
        // The first finish of this job under this token; a second in the same batch is refused on its own.
        let Some(index) = finishes
            .iter()
            .enumerate()
            .position(|(i, f)| !done[i] && f.job == held.id && f.token == *token)
        else {
            continue;
        };
        done[index] = true;
        // A queue at its concurrency limit, or a key at its own, has room again: workers waiting on it look again.
        let settings = ctx.settings.get(&held.queue);
        if settings.concurrency.is_some() || settings.keyed {
            ctx.ready.mark(&held.queue);
        }
        ctx.events
            .attempt_ended(ctx.now_ms, ActivityKind::Finished, held, true, true, None);
    }
    Ok(done)
}

/// A [`Continue`] whose every field passed: the queue, when it is due, and the dependencies not met yet.
struct ValidContinue {
    queue: QueueName,
    run_at: i64,
    pending: Vec<JobId>,
}

/// Checks a [`Continue`] before anything is written.
fn valid_continue(ctx: &WriteCtx<'_>, job: JobId, next: &Continue) -> Result<ValidContinue> {
    let queue = QueueName::parse(next.queue.as_str()).map_err(|e| e.renamed("next.queue"))?;
    let delay = next.delay.unwrap_or(Duration::ZERO);
    if delay > Duration::from_secs(366 * 24 * 3600) {
        return Err(Error::invalid("next.delay", "must be at most a year"));
    }
    if next.depends_on.len() > MAX_DEPENDENCIES {
        return Err(Error::invalid(
            "next.depends_on",
            format!(
                "must list at most {MAX_DEPENDENCIES} jobs, got {}",
                next.depends_on.len()
            ),
        ));
    }
    let mut pending = Vec::new();
    for &on in &next.depends_on {
        // A dependency's fault is named where the finish holds it.
        let checked = check_dependency(ctx, Some(job), None, on).map_err(|e| match e.field() {
            Some("depends_on") => e.renamed("next.depends_on"),
            _ => e,
        })?;
        if let DependencyOn::Pending = checked {
            pending.push(on);
        }
    }
    Ok(ValidContinue {
        queue,
        run_at: ctx.now_ms.saturating_add(duration_millis(delay)),
        pending,
    })
}

/// Returns whether the job has a concurrency key, which its next queue must then know of.
pub(crate) const GO_ON: Sql = Sql::both(
    "UPDATE jobs SET state = $1, queue = $2, run_at = $3, slot_at = $3, \
     attempt = 0, finished_at = NULL, error = NULL, aging_ms = $4, step_count = 0, step_bytes = 0, \
     signal_key = NULL, signal_step = NULL, signal_until = NULL, suspended_at = NULL WHERE id = $5 \
     RETURNING concurrency_key IS NOT NULL",
);

/// The stage finished: the job goes on in its next queue. It waits for its new dependencies, and for the children
/// this stage created (which start now), before it runs again. The steps its handler recorded were this stage's:
/// the next stage's handler starts with none.
fn go_on(ctx: &mut WriteCtx<'_>, held: &HeldJob, next: ValidContinue) -> Result<()> {
    crate::ops::step::forget_steps(ctx, held.id)?;
    for &on in &next.pending {
        record_dependency(ctx, held.id, on)?;
    }
    let children = held.has_children && waiting::start_children(ctx, held.id)?;
    let state = if children || !next.pending.is_empty() {
        JobState::Waiting
    } else if next.run_at <= ctx.now_ms {
        JobState::Queued
    } else {
        JobState::Scheduled
    };
    let keyed: bool = ctx.db.query_one(
        GO_ON,
        &params![
            state.as_str(),
            next.queue.as_str(),
            next.run_at,
            ctx.settings.get(next.queue.as_str()).aging_ms,
            held.id.0
        ],
        |r| r.get(0),
    )?;
    if keyed {
        crate::ops::queues::mark_keyed(ctx, next.queue.as_str())?;
    }
    if state == JobState::Queued {
        ctx.ready.mark(next.queue.as_str());
    }
    let job = JobRef {
        id: held.id.0,
        queue: next.queue.as_str(),
        name: &held.name,
    };
    let detail = format!("went on from queue {}", held.queue);
    ctx.events
        .job(ctx.now_ms, ActivityKind::Added, job, None, Some(&detail));
    Ok(())
}
