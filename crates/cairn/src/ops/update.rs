//! [`Update`]: a worker reports progress that queries show.

use crate::store::db::{Sql, params};
use serde_json::Value;

use crate::error::Result;
use crate::job::JobId;
use crate::lease::Lease;
use crate::ops::{Operation, WriteCtx, encode_json, lease_is_held, lease_refusal};

/// Records progress for the running attempt (shown by [`Queue::get`](crate::Queue::get) as `progress`). Unlike a
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

/// `$1` now, `$2` the progress, `$3` the job, `$4` the lease's token.
const SET_PROGRESS: Sql = Sql::both(concat!(
    "UPDATE jobs SET progress = $2 WHERE ",
    lease_is_held!("$3", "$4", "$1")
));

impl Operation for Update {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let progress = encode_json("progress", &self.progress, ctx.limits())?;
        let params = &params![ctx.now_ms, progress, self.job.0, self.token];
        match ctx.db.execute(SET_PROGRESS, params)? {
            0 => Err(lease_refusal(ctx, self.job, self.token)),
            _ => Ok(()),
        }
    }
}
