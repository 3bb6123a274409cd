//! [`Finish`]: a worker completed its job.

use rusqlite::named_params;
use serde_json::Value;

use crate::error::Result;
use crate::job::{AttemptOutcome, JobId};
use crate::lease::Lease;
use crate::ops::{Operation, WriteCtx, encode_json, end_attempt, held_job};

/// Marks the job completed, optionally replacing its data with a result.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The job's final data, replacing its input.
    pub data: Option<Value>,
}

impl Finish {
    /// Finishes the job `lease` holds.
    pub fn new(lease: &Lease) -> Self {
        Finish {
            job: lease.job,
            token: lease.token,
            data: None,
        }
    }
}

const COMPLETE_JOB: &str = "UPDATE jobs SET state = 'completed', finished_at = :now, data = COALESCE(:data, data), \
     worker = NULL, lease_token = NULL, lease_expires_at = NULL, error = NULL WHERE id = :id";

impl Operation for Finish {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let data = self
            .data
            .as_ref()
            .map(|d| encode_json("data", d, ctx.limits))
            .transpose()?;
        held_job(ctx, self.job, self.token)?;
        end_attempt(ctx, self.job, AttemptOutcome::Completed, None)?;
        ctx.conn
            .prepare_cached(COMPLETE_JOB)?
            .execute(named_params! {
                ":now": ctx.now_ms, ":data": data, ":id": self.job.0,
            })?;
        Ok(())
    }
}
