//! [`Cancel`]: stop a job that has not finished.

use rusqlite::{OptionalExtension, named_params};

use crate::error::{Error, Result};
use crate::job::{AttemptOutcome, JobId, JobState};
use crate::ops::{Operation, WriteCtx, end_attempt, parse_stored_state, running_job};

/// Cancels a scheduled, queued, waiting or running job. A running job's worker is refused from then on (its lease
/// is gone). Cancelling a cancelled job is a no-op; a completed or failed job cannot be cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancel {
    /// The job.
    pub job: JobId,
}

const SELECT_STATE: &str = "SELECT state FROM jobs WHERE id = :id";

const CANCEL_JOB: &str = "UPDATE jobs SET state = 'cancelled', finished_at = :now, \
     lease_token = NULL, lease_expires_at = NULL WHERE id = :id";

/// Reads a job's state, or fails with not found.
pub(crate) fn job_state(ctx: &WriteCtx<'_>, job: JobId) -> Result<JobState> {
    let state: Option<String> = ctx
        .conn
        .prepare_cached(SELECT_STATE)?
        .query_row(named_params! { ":id": job.0 }, |r| r.get(0))
        .optional()?;
    let state = state.ok_or_else(|| Error::not_found(format!("job {job}")))?;
    parse_stored_state(&state)
}

impl Operation for Cancel {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        match job_state(ctx, self.job)? {
            JobState::Cancelled => return Ok(()),
            state @ (JobState::Completed | JobState::Failed) => {
                return Err(Error::invalid_state(format!(
                    "job {} is {state} and cannot be cancelled",
                    self.job
                )));
            }
            JobState::Running => {
                if let Some(held) = running_job(ctx, self.job)? {
                    end_attempt(
                        ctx,
                        &held,
                        AttemptOutcome::Cancelled,
                        Some("cancelled"),
                        None,
                    )?;
                }
            }
            JobState::Scheduled | JobState::Queued | JobState::Waiting => {}
        }
        ctx.conn
            .prepare_cached(CANCEL_JOB)?
            .execute(named_params! { ":now": ctx.now_ms, ":id": self.job.0 })?;
        Ok(())
    }
}
