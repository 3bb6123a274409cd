//! [`Finish`]: a worker completed its job.

use rusqlite::{OptionalExtension, named_params};
use serde_json::Value;

use crate::error::Result;
use crate::job::{AttemptOutcome, JobId, RunUsage};
use crate::lease::Lease;
use crate::ops::{
    Operation, WriteCtx, encode_json, end_attempt, held_job_columns, held_job_from_row,
    lease_is_held, lease_refusal, schedule_next_run, waiting,
};

/// Marks the job completed, optionally replacing its data with a result.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The job's final data, replacing its input.
    pub data: Option<Value>,
    /// What the attempt's process used, if the worker measured it; kept in the job's history.
    pub usage: Option<RunUsage>,
}

impl Finish {
    /// Finishes the job `lease` holds.
    pub fn new(lease: &Lease) -> Self {
        Finish {
            job: lease.job,
            token: lease.token,
            data: None,
            usage: None,
        }
    }
}

/// Completes the job if the lease is held, returning the attempt's details for its history row.
const COMPLETE_JOB: &str = concat!(
    "UPDATE jobs SET state = 'completed', finished_at = :now, data = COALESCE(:data, data), \
     lease_token = NULL, lease_expires_at = NULL, error = NULL WHERE ",
    lease_is_held!(),
    " RETURNING ",
    held_job_columns!()
);

impl Operation for Finish {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let data = self
            .data
            .as_ref()
            .map(|d| encode_json("data", d, ctx.limits))
            .transpose()?;
        let held = ctx
            .conn
            .prepare_cached(COMPLETE_JOB)?
            .query_row(
                named_params! { ":now": ctx.now_ms, ":data": data, ":id": self.job.0, ":token": self.token },
                held_job_from_row,
            )
            .optional()?
            .ok_or_else(|| lease_refusal(ctx, self.job, self.token))?;
        end_attempt(
            ctx,
            &held,
            AttemptOutcome::Completed,
            None,
            self.usage.as_ref(),
        )?;
        // A parent with live children waits for them, and runs again once they have all ended.
        if held.has_children && waiting::start_children(ctx, held.id)? {
            return waiting::wait_for_children(ctx, held.id);
        }
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
