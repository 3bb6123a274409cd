//! [`Requeue`]: run a job again, whatever became of it.

use crate::store::db::{Sql, params};
use jiff::Timestamp;

use crate::clock::to_millis;
use crate::error::{Error, Result};
use crate::job::{AttemptOutcome, JobState};
use crate::names::JobId;
use crate::ops::{
    Operation, WriteCtx, end_attempt, parse_stored_state, requeue, run_did_not_finish, running_job,
};

/// Puts a job back in its queue with a fresh count of attempts: a failed, cancelled or completed job runs again
/// (the way to retry a job that ran out of attempts once its cause is fixed), and a job that has not run yet moves
/// to `run_at`. A running job's worker is refused from then on. A waiting job stops waiting: its remaining
/// dependencies are dropped. The history is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requeue {
    /// The job.
    pub job: JobId,
    /// When it may run; now when absent.
    pub run_at: Option<Timestamp>,
}

const SELECT_JOB: Sql = Sql {
    sqlite: "SELECT state, queue, unique_key, name FROM jobs WHERE id = $1",
    postgres: "SELECT state, queue, unique_key, name FROM jobs WHERE id = $1 FOR UPDATE",
};

/// Another live job holding the same unique key.
const SELECT_LIVE_HOLDER: Sql = Sql {
    sqlite: concat!(
        "SELECT id FROM jobs INDEXED BY jobs_unique_live WHERE unique_key = $1 AND ",
        crate::ops::live!(),
        " AND id != $2"
    ),
    postgres: concat!(
        "SELECT id FROM jobs WHERE unique_key = $1 AND ",
        crate::ops::live!(),
        " AND id != $2"
    ),
};

/// What a fresh start forgets; `requeue` then sets the state and time and clears the lease.
const FRESH_START: Sql = Sql::both(
    "UPDATE jobs SET attempt = 0, finished_at = NULL, error = NULL, failure_group = NULL, \
     worker = NULL, awaits_parent = FALSE WHERE id = $1",
);

/// A requeued job runs whatever it waited for: requeueing is an operator's override.
const STOP_WAITING: Sql = Sql::both("DELETE FROM job_dependencies WHERE job_id = $1");

impl Operation for Requeue {
    /// The job's state afterwards: `queued`, or `scheduled` for a later `run_at`.
    type Output = JobState;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<JobState> {
        let row: Option<(String, String, Option<String>, String)> =
            ctx.db.query_row(SELECT_JOB, &params![self.job.0], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?;
        let (state, queue, unique_key, name) =
            row.ok_or_else(|| Error::not_found(format!("job {}", self.job)))?;
        let state = parse_stored_state(&state)?;
        if let (false, Some(key)) = (state.is_live(), &unique_key) {
            // Coming back to life, the job would hold its unique key again.
            let holder: Option<i64> =
                ctx.db
                    .query_row(SELECT_LIVE_HOLDER, &params![key, self.job.0], |r| r.get(0))?;
            if let Some(holder) = holder {
                return Err(Error::invalid_state(format!(
                    "job {holder} holds the unique key {key:?} now; job {} cannot be requeued while it lives",
                    self.job
                )));
            }
        }
        if state == JobState::Running
            && let Some(held) = running_job(ctx, self.job)?
        {
            end_attempt(
                ctx,
                &held,
                AttemptOutcome::Requeued,
                crate::ops::Ending {
                    error: Some("requeued"),
                    ..Default::default()
                },
            )?;
            run_did_not_finish(ctx, &held, true)?;
        }
        let run_at = self.run_at.map_or(ctx.now_ms, to_millis);
        ctx.db.execute(FRESH_START, &params![self.job.0])?;
        if state == JobState::Waiting {
            ctx.db.execute(STOP_WAITING, &params![self.job.0])?;
        }
        let new_state = requeue(ctx, self.job, &queue, run_at, None)?;
        let job = crate::ops::events::JobRef {
            id: self.job.0,
            queue: &queue,
            name: &name,
        };
        let detail = format!("was {state}");
        ctx.events.job(
            ctx.now_ms,
            crate::ops::events::ActivityKind::Requeued,
            job,
            None,
            Some(&detail),
        );
        Ok(new_state)
    }
}
