//! [`SetPriority`]: change how soon a job runs relative to others.

use crate::store::db::{Sql, params};

use crate::error::{Error, Result};
use crate::names::JobId;
use crate::ops::cancel::job_state;
use crate::ops::events::ActivityKind;
use crate::ops::{Operation, WriteCtx, job_changed};

/// Changes the priority of a job that has not finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetPriority {
    /// The job.
    pub job: JobId,
    /// The new priority; higher runs first.
    pub priority: i32,
}

const SET_PRIORITY: Sql = Sql::both("UPDATE jobs SET priority = $1 WHERE id = $2");

impl Operation for SetPriority {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let state = job_state(ctx, self.job)?;
        if state.is_finished() {
            return Err(Error::invalid_state(format!(
                "job {} is {state}; its priority no longer matters",
                self.job
            )));
        }
        ctx.db
            .execute(SET_PRIORITY, &params![self.priority, self.job.0])?;
        let detail = format!("priority {}", self.priority);
        job_changed(ctx, self.job, ActivityKind::Prioritized, Some(&detail))
    }
}
