//! [`Delete`]: remove a job and its history, whatever its state.

use crate::store::db::{Sql, params};

use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::ops::cancel::job_state;
use crate::ops::events::{ActivityKind, JobRef};
use crate::ops::{Operation, WriteCtx, waiting};

/// Deletes a job, its tags and its history. A running job's worker is refused from then on. A job that had not
/// completed is cancelled first, with what that brings: its live children and its dependents are cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delete {
    /// The job.
    pub job: JobId,
}

const DELETE_JOB: Sql = Sql::both("DELETE FROM jobs WHERE id = $1 RETURNING queue, name");
const DELETE_HISTORY: Sql = Sql::both("DELETE FROM job_attempts WHERE job_id = $1");
const DELETE_TAGS: Sql = Sql::both("DELETE FROM job_tags WHERE job_id = $1");
const DELETE_STEPS: Sql = Sql::both("DELETE FROM job_steps WHERE job_id = $1");

impl Operation for Delete {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        if !matches!(
            job_state(ctx, self.job)?,
            JobState::Completed | JobState::Cancelled
        ) {
            waiting::cancel_jobs(ctx, vec![(self.job, Some("deleted".to_owned()))])?;
        }
        let deleted: Option<(String, String)> =
            ctx.db.query_row(DELETE_JOB, &params![self.job.0], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let Some((queue, name)) = deleted else {
            return Err(Error::not_found(format!("job {}", self.job)));
        };
        let job = JobRef {
            id: self.job.0,
            queue: &queue,
            name: &name,
        };
        ctx.events
            .job(ctx.now_ms, ActivityKind::Deleted, job, None, None);
        // The job's rows in other tables go with it (there are no foreign keys to cascade; see the migration).
        ctx.db.execute(DELETE_HISTORY, &params![self.job.0])?;
        ctx.db.execute(DELETE_TAGS, &params![self.job.0])?;
        ctx.db.execute(DELETE_STEPS, &params![self.job.0])?;
        Ok(())
    }
}
