//! [`Checkpoint`]: a worker saves the data the next attempt starts from.

use crate::store::db::{Sql, params};
use jiff::Timestamp;
use serde_json::Value;

use crate::clock::from_millis;
use crate::error::Result;
use crate::lease::Lease;
use crate::names::JobId;
use crate::ops::{Operation, WriteCtx, encode_json, extended_lease, lease_is_held, lease_refusal};

/// Replaces the job's data, so that a retry starts from here rather than from the start. Also extends the lease,
/// as a heartbeat does.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// The data the next attempt starts from.
    pub data: Value,
}

impl Checkpoint {
    /// A checkpoint of `data` under `lease`.
    pub fn new(lease: &Lease, data: Value) -> Self {
        Checkpoint {
            job: lease.job,
            token: lease.token,
            data,
        }
    }
}

/// Saves the data and extends the lease as a heartbeat does.
/// `$1` the data, `$2` now, `$3` the job, `$4` the lease's token.
const SAVE_CHECKPOINT: Sql = Sql {
    sqlite: concat!(
        "UPDATE jobs SET data = $1, lease_expires_at = ",
        extended_lease!(sqlite, "$2"),
        " WHERE ",
        lease_is_held!("$3", "$4", "$2"),
        " RETURNING lease_expires_at"
    ),
    postgres: concat!(
        "UPDATE jobs SET data = $1, lease_expires_at = ",
        extended_lease!(postgres, "$2"),
        " WHERE ",
        lease_is_held!("$3", "$4", "$2"),
        " RETURNING lease_expires_at"
    ),
};

impl Operation for Checkpoint {
    type Output = Timestamp;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Timestamp> {
        let data = encode_json("data", &self.data, ctx.limits())?;
        let params = &params![data, ctx.now_ms, self.job.0, self.token];
        let expires: Option<i64> = ctx
            .db
            .query_row(SAVE_CHECKPOINT, params, |row| row.get(0))?;
        expires
            .map(from_millis)
            .ok_or_else(|| lease_refusal(ctx, self.job, self.token))
    }
}
