//! [`Rename`]: give a job that is not running another name.

use crate::store::db::{Sql, params};

use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::names::JobName;
use crate::ops::{Operation, WriteCtx, parse_stored_state};

/// Renames a job, whatever its state. A name only matters when a job is taken, so a running job's worker is
/// unaffected; a ready job may go to a worker waiting for the new name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rename {
    /// The job.
    pub job: JobId,
    /// The new name.
    pub name: String,
}

const SELECT_JOB: Sql = Sql {
    sqlite: "SELECT state, queue FROM jobs WHERE id = $1",
    postgres: "SELECT state, queue FROM jobs WHERE id = $1 FOR UPDATE",
};
const RENAME_JOB: Sql = Sql::both("UPDATE jobs SET name = $1 WHERE id = $2");

impl Operation for Rename {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let name = JobName::parse(self.name.as_str())?;
        let row: Option<(String, String)> =
            ctx.db.query_row(SELECT_JOB, &params![self.job.0], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let (state, queue) = row.ok_or_else(|| Error::not_found(format!("job {}", self.job)))?;
        let state = parse_stored_state(&state)?;
        ctx.db
            .execute(RENAME_JOB, &params![name.as_str(), self.job.0])?;
        if state == JobState::Queued {
            ctx.ready.mark(&queue);
        }
        Ok(())
    }
}
