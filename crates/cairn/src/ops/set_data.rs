//! [`SetData`]: replace the data of a job that is not running.

use crate::store::db::{Sql, params};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::ops::cancel::job_state;
use crate::ops::{Operation, WriteCtx, encode_json};

/// Replaces a job's data: its input, or what its next attempt starts from (to fix a job before requeueing it, say).
/// A running job's data belongs to its worker, which saves it with a checkpoint; it cannot be set from outside.
#[derive(Debug, Clone, PartialEq)]
pub struct SetData {
    /// The job.
    pub job: JobId,
    /// The new data.
    pub data: Value,
}

const SET_DATA: Sql = Sql::both("UPDATE jobs SET data = $1 WHERE id = $2");

impl Operation for SetData {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let data = encode_json("data", &self.data, ctx.limits())?;
        if job_state(ctx, self.job)? == JobState::Running {
            return Err(Error::invalid_state(format!(
                "job {} is running; its worker saves its data with a checkpoint",
                self.job
            )));
        }
        ctx.db.execute(SET_DATA, &params![data, self.job.0])?;
        Ok(())
    }
}
