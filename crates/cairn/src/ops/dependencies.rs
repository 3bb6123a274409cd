//! [`ChangeDependencies`]: add or remove what a job that has not started waits for.

use crate::store::db::{Sql, params};

use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::ops::cancel::job_state;
use crate::ops::push::MAX_DEPENDENCIES;
use crate::ops::waiting::{
    DependencyOn, check_dependency, record_dependency, release_if_unblocked,
};
use crate::ops::{Operation, WriteCtx};

/// Adds and removes dependencies of a job that has not started: a scheduled, queued or waiting one. A job that
/// gains a dependency that has not completed waits for it; a job whose last dependency is removed becomes ready.
/// Added dependencies are checked as a push checks them (they must exist, not be cancelled, and not make a cycle);
/// removing one the job does not have is not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeDependencies {
    /// The job.
    pub job: JobId,
    /// Jobs it must now also wait for.
    pub add: Vec<JobId>,
    /// Jobs it no longer waits for.
    pub remove: Vec<JobId>,
}

const DROP_DEPENDENCY: Sql =
    Sql::both("DELETE FROM job_dependencies WHERE job_id = $1 AND depends_on = $2");
const START_WAITING: Sql = Sql::both("UPDATE jobs SET state = 'waiting' WHERE id = $1");
const COUNT_DEPENDENCIES: Sql =
    Sql::both("SELECT count(*) FROM job_dependencies WHERE job_id = $1");

impl Operation for ChangeDependencies {
    type Output = JobState;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<JobState> {
        let state = job_state(ctx, self.job)?;
        if !matches!(
            state,
            JobState::Scheduled | JobState::Queued | JobState::Waiting
        ) {
            return Err(Error::invalid_state(format!(
                "job {} is {state}; only a job that has not started can change its dependencies",
                self.job
            )));
        }
        let mut pending = Vec::new();
        for &on in &self.add {
            if let DependencyOn::Pending = check_dependency(ctx, Some(self.job), None, on)? {
                pending.push(on);
            }
        }
        for on in &self.remove {
            ctx.db
                .execute(DROP_DEPENDENCY, &params![self.job.0, on.0])?;
        }
        for &on in &pending {
            record_dependency(ctx, self.job, on)?;
        }
        let count: i64 = ctx
            .db
            .query_one(COUNT_DEPENDENCIES, &params![self.job.0], |r| r.get(0))?;
        if count > MAX_DEPENDENCIES as i64 {
            return Err(Error::invalid(
                "add",
                format!(
                    "a job may depend on at most {MAX_DEPENDENCIES} jobs; this would make {count}"
                ),
            ));
        }
        if count > 0 {
            if state != JobState::Waiting {
                ctx.db.execute(START_WAITING, &params![self.job.0])?;
            }
            return Ok(JobState::Waiting);
        }
        if state == JobState::Waiting && release_if_unblocked(ctx, self.job)? {
            return job_state(ctx, self.job);
        }
        Ok(state)
    }
}
