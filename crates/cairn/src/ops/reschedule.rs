//! [`Reschedule`]: move a waiting job's run time.

use crate::store::db::{Sql, params};
use jiff::Timestamp;

use crate::clock::to_millis;
use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::ops::cancel::job_state;
use crate::ops::events::ActivityKind;
use crate::ops::{Operation, WriteCtx, job_changed, requeue};

/// Sets when a scheduled or queued job runs: a time in the past or now makes it ready at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reschedule {
    /// The job.
    pub job: JobId,
    /// When it should run.
    pub run_at: Timestamp,
}

const SELECT_QUEUE: Sql = Sql::both("SELECT queue FROM jobs WHERE id = $1");

impl Operation for Reschedule {
    /// The job's state afterwards: `queued` or `scheduled`.
    type Output = JobState;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<JobState> {
        let state = job_state(ctx, self.job)?;
        if !matches!(state, JobState::Scheduled | JobState::Queued) {
            return Err(Error::invalid_state(format!(
                "job {} is {state}; only scheduled and queued jobs can be rescheduled",
                self.job
            )));
        }
        let queue: String = ctx
            .db
            .query_one(SELECT_QUEUE, &params![self.job.0], |r| r.get(0))?;
        let state = requeue(ctx, self.job, &queue, to_millis(self.run_at), None)?;
        let detail = format!("run at {}", self.run_at);
        job_changed(ctx, self.job, ActivityKind::Rescheduled, Some(&detail))?;
        Ok(state)
    }
}
