//! [`Checkpoint`]: a worker saves the data the next attempt starts from.

use jiff::Timestamp;
use rusqlite::named_params;
use serde_json::Value;

use crate::clock::from_millis;
use crate::error::Result;
use crate::job::JobId;
use crate::lease::Lease;
use crate::ops::{Operation, WriteCtx, encode_json, held_job};

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

const SAVE_CHECKPOINT: &str =
    "UPDATE jobs SET data = :data, lease_expires_at = :expires WHERE id = :id";

impl Operation for Checkpoint {
    type Output = Timestamp;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Timestamp> {
        let data = encode_json("data", &self.data, ctx.limits)?;
        let held = held_job(ctx, self.job, self.token)?;
        let expires = held
            .lease_expires_at
            .max(ctx.now_ms.saturating_add(held.lease_timeout_ms));
        ctx.conn
            .prepare_cached(SAVE_CHECKPOINT)?
            .execute(named_params! {
                ":data": data, ":expires": expires, ":id": self.job.0,
            })?;
        Ok(from_millis(expires))
    }
}
