//! [`Track`] and [`Untrack`]: mark a job to keep an eye on it, or stop.

use crate::error::{Error, Result};
use crate::names::JobId;
use crate::ops::{Operation, WriteCtx};
use crate::store::db::{Sql, params};

/// Tracks a job: it is listed by `JobFilter::tracked`, whatever its state. Tracking a tracked job changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Track {
    /// The job.
    pub job: JobId,
}

/// Stops tracking a job. Untracking a job that is not tracked changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Untrack {
    /// The job.
    pub job: JobId,
}

const SET_TRACKED: Sql = Sql::both("UPDATE jobs SET tracked = $1 WHERE id = $2");

impl Operation for Track {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        set_tracked(ctx, self.job, true)
    }
}

impl Operation for Untrack {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        set_tracked(ctx, self.job, false)
    }
}

fn set_tracked(ctx: &mut WriteCtx<'_>, job: JobId, tracked: bool) -> Result<()> {
    let changed = ctx.db.execute(SET_TRACKED, &params![tracked, job])?;
    if changed == 0 {
        return Err(Error::not_found(format!("job {job}")));
    }
    Ok(())
}
