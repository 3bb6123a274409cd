//! [`Heartbeat`]: a worker says it is still working, extending its lease.

use crate::store::db::{Sql, params};
use jiff::Timestamp;
use serde_json::Value;

use crate::clock::from_millis;
use crate::error::Result;
use crate::lease::Lease;
use crate::names::JobId;
use crate::ops::{Operation, WriteCtx, encode_json, extended_lease, lease_is_held, lease_refusal};

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

/// Extends the lease to a full timeout from now, never shortening it, and never past the attempt's timeout.
/// `$1` now, `$2` the progress, `$3` the job, `$4` the lease's token.
pub(crate) const EXTEND_LEASE: Sql = Sql {
    sqlite: concat!(
        "UPDATE jobs SET lease_expires_at = ",
        extended_lease!(sqlite, "$1"),
        ", progress = COALESCE($2, progress) WHERE ",
        lease_is_held!("$3", "$4", "$1"),
        " RETURNING lease_expires_at, worker"
    ),
    postgres: concat!(
        "UPDATE jobs SET lease_expires_at = ",
        extended_lease!(postgres, "$1"),
        ", progress = COALESCE($2, progress) WHERE ",
        lease_is_held!("$3", "$4", "$1"),
        " RETURNING lease_expires_at, worker"
    ),
};

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
            .map(|p| encode_json("progress", p, ctx.limits()))
            .transpose()?;
        let params = &params![ctx.now_ms, progress, self.job.0, self.token];
        let extended: Option<(i64, String)> = ctx
            .db
            .query_row(EXTEND_LEASE, params, |row| Ok((row.get(0)?, row.get(1)?)))?;
        let Some((expires, worker)) = extended else {
            return Err(lease_refusal(ctx, self.job, self.token));
        };
        crate::ops::workers::seen(ctx, &worker)?;
        Ok(from_millis(expires))
    }
}
