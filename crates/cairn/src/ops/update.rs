//! [`Update`]: a worker reports progress that queries show.

use crate::store::db::{Sql, params};
use serde_json::Value;

use crate::error::Result;
use crate::lease::Lease;
use crate::names::JobId;
use crate::ops::{Operation, WriteCtx, encode_json, lease_is_held, lease_refusal};

/// Records progress for the running attempt (shown by [`Jobs::get`](crate::Jobs::get) as `progress`). Unlike a
/// checkpoint, it does not change what a retry starts from; unlike a heartbeat, it does not extend the lease.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The progress to show.
    pub progress: Value,
}

impl Update {
    /// Progress `progress` under `lease`.
    pub fn new(lease: &Lease, progress: Value) -> Self {
        Update {
            job: lease.job,
            token: lease.token,
            progress,
        }
    }
}

/// `$1` the progress, `$2` the job, `$3` the lease's token, `$4` now.
const SET_PROGRESS: Sql = Sql::both(concat!(
    "UPDATE jobs SET progress = $1 WHERE ",
    lease_is_held!("$2", "$3", "$4")
));

impl Operation for Update {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let progress = encode_json("progress", &self.progress, ctx.limits())?;
        let params = &params![progress, self.job.0, self.token, ctx.now_ms];
        match ctx.db.execute(SET_PROGRESS, params)? {
            0 => Err(lease_refusal(ctx, self.job, self.token)),
            _ => Ok(()),
        }
    }
}
