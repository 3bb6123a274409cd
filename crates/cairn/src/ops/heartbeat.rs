//! [`Heartbeat`]: a worker says it is still working, extending its lease.

use jiff::Timestamp;
use rusqlite::named_params;
use serde_json::Value;

use crate::clock::from_millis;
use crate::error::Result;
use crate::job::JobId;
use crate::lease::Lease;
use crate::ops::{Operation, WriteCtx, encode_json, held_job};

/// Extends a lease to a full lease timeout from now (never shortening it), optionally reporting progress.
#[derive(Debug, Clone, PartialEq)]
pub struct Heartbeat {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// Progress to show in queries, replacing the last reported.
    pub progress: Option<Value>,
}

impl Heartbeat {
    /// A heartbeat for `lease`.
    pub fn new(lease: &Lease) -> Self {
        Heartbeat {
            job: lease.job,
            token: lease.token,
            progress: None,
        }
    }
}

const EXTEND_LEASE: &str = "UPDATE jobs SET lease_expires_at = :expires, progress = COALESCE(:progress, progress) \
     WHERE id = :id";

impl Operation for Heartbeat {
    type Output = Timestamp;

    fn is_durable(&self) -> bool {
        // A lost heartbeat only makes a lease end sooner than it could have; that is safe.
        false
    }

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Timestamp> {
        let progress = self
            .progress
            .as_ref()
            .map(|p| encode_json("progress", p, ctx.limits))
            .transpose()?;
        let held = held_job(ctx, self.job, self.token)?;
        let expires = held
            .lease_expires_at
            .max(ctx.now_ms.saturating_add(held.lease_timeout_ms));
        ctx.conn
            .prepare_cached(EXTEND_LEASE)?
            .execute(named_params! {
                ":expires": expires, ":progress": progress, ":id": self.job.0,
            })?;
        Ok(from_millis(expires))
    }
}
