//! [`Track`]: mark a job to keep an eye on it, or stop.

use crate::error::{Error, Result};
use crate::names::JobId;
use crate::ops::{Operation, WriteCtx};
use crate::store::db::{Sql, params};

/// Tracks a job (it is listed by `JobFilter::tracked`, whatever its state), or stops tracking it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Track {
    /// The job.
    pub job: JobId,
    /// True to track it, false to stop.
    pub tracked: bool,
}

const SET_TRACKED: Sql = Sql::both("UPDATE jobs SET tracked = $1 WHERE id = $2");

impl Operation for Track {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let changed = ctx
            .db
            .execute(SET_TRACKED, &params![self.tracked, self.job])?;
        if changed == 0 {
            return Err(Error::not_found(format!("job {}", self.job)));
        }
        Ok(())
    }
}
