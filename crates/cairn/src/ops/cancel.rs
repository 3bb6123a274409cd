//! [`Cancel`]: stop a job that has not finished.

use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::ops::{Operation, WriteCtx, parse_stored_state, waiting};
use crate::store::db::{Sql, params};

/// Cancels a job that has not completed: a scheduled, queued, waiting or running one, or a failed one (which
/// takes it out of the failures). A running job's worker is refused from then on (its lease is gone). Its live
/// children, and the jobs that depend on it, are cancelled too, each saying why. Cancelling a cancelled job is a
/// no-op; a completed job cannot be cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancel {
    /// The job.
    pub job: JobId,
}

/// Locked (on PostgreSQL) until the transaction ends: what the caller decides from the state stays true while it
/// writes, whatever another node does to the job meanwhile.
const SELECT_STATE: Sql = Sql {
    sqlite: "SELECT state FROM jobs WHERE id = $1",
    postgres: "SELECT state FROM jobs WHERE id = $1 FOR UPDATE",
};

/// Reads a job's state, or fails with not found.
pub(crate) fn job_state(ctx: &WriteCtx<'_>, job: JobId) -> Result<JobState> {
    let state: Option<String> = ctx
        .db
        .query_row(SELECT_STATE, &params![job], |r| r.get(0))?;
    let state = state.ok_or_else(|| Error::not_found(format!("job {job}")))?;
    parse_stored_state(&state)
}

impl Operation for Cancel {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        match job_state(ctx, self.job)? {
            JobState::Cancelled => Ok(()),
            JobState::Completed => Err(Error::invalid_state(format!(
                "job {} is completed and cannot be cancelled",
                self.job
            ))),
            _ => waiting::cancel_jobs(ctx, vec![(self.job, None)]),
        }
    }
}
