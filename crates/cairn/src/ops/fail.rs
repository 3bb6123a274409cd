//! [`Fail`]: a worker gives up on its job for good.

use crate::store::db::{Sql, params};

use crate::error::{Error, Result};
use crate::job::{AttemptOutcome, RunUsage};
use crate::lease::Lease;
use crate::names::JobId;
use crate::ops::retry::truncate_error;
use crate::ops::{
    Operation, WriteCtx, end_attempt, held_job_columns, held_job_from_row, lease_is_held,
    lease_refusal, run_did_not_finish, run_failed,
};

/// Marks the job failed, whatever attempts it has left, with a failure group (the kind of failure, for grouping
/// alike failures together) and a message (this job's details).
#[derive(Debug, Clone, PartialEq)]
pub struct Fail {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The kind of failure, such as `invalid-address`; at most 255 bytes.
    pub group: String,
    /// What happened to this job.
    pub message: String,
    /// What the attempt's process used, if the worker measured it; kept in the job's history.
    pub usage: Option<RunUsage>,
}

impl Fail {
    /// Fails the job `lease` holds.
    pub fn new(lease: &Lease, group: impl Into<String>, message: impl Into<String>) -> Self {
        Fail {
            job: lease.job,
            token: lease.token,
            group: group.into(),
            message: message.into(),
            usage: None,
        }
    }
}

/// Fails the job if the lease is held, returning the attempt's details for its history row.
/// `$1` now, `$2` the message, `$3` the failure group, `$4` the job, `$5` the lease's token.
const FAIL_HELD_JOB: Sql = Sql::both(concat!(
    "UPDATE jobs SET state = 'failed', finished_at = $1, error = $2, failure_group = $3, \
     lease_token = NULL, lease_expires_at = NULL WHERE ",
    lease_is_held!("$4", "$5", "$1"),
    " RETURNING ",
    held_job_columns!()
));

impl Operation for Fail {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        if self.group.is_empty() || self.group.len() > 255 {
            return Err(Error::invalid(
                "group",
                format!("must be 1 to 255 bytes, got {}", self.group.len()),
            ));
        }
        let message = truncate_error(&self.message);
        let params = &params![ctx.now_ms, message, &self.group, self.job, self.token];
        let held = ctx
            .db
            .query_row(FAIL_HELD_JOB, params, held_job_from_row)?
            .ok_or_else(|| lease_refusal(ctx, self.job, self.token))?;
        end_attempt(
            ctx,
            &held,
            AttemptOutcome::Failed,
            crate::ops::Ending {
                error: Some(message),
                usage: self.usage.as_ref(),
                result: None,
            },
        )?;
        let detail = format!("{}: {message}", self.group);
        ctx.events.attempt_ended(
            ctx.now_ms,
            crate::ops::events::ActivityKind::Failed,
            &held,
            true,
            true,
            Some(&detail),
        );
        run_did_not_finish(ctx, &held, false)?;
        run_failed(ctx, &held)?;
        Ok(())
    }
}
