//! [`Release`]: a worker gives a job back untouched (shutting down), or the writer does for a claim nobody received.

use crate::store::db::{Sql, params};

use crate::error::Result;
use crate::job::AttemptOutcome;
use crate::lease::Lease;
use crate::names::JobId;
use crate::ops::{Operation, WriteCtx, end_attempt, held_job, requeue, run_did_not_finish};

/// Puts the job back in its queue at once. The attempt does not count against the job's attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
}

impl Release {
    /// Releases the job `lease` holds.
    pub fn new(lease: &Lease) -> Self {
        Release {
            job: lease.job,
            token: lease.token,
        }
    }
}

const UNCOUNT_ATTEMPT: Sql = Sql::both("UPDATE jobs SET attempt = attempt - 1 WHERE id = $1");

impl Operation for Release {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let held = held_job(ctx, self.job, self.token)?;
        end_attempt(
            ctx,
            &held,
            AttemptOutcome::Released,
            crate::ops::Ending::default(),
        )?;
        ctx.events.job(
            ctx.now_ms,
            crate::ops::events::ActivityKind::Released,
            (&held).into(),
            Some(&held.worker),
            None,
        );
        run_did_not_finish(ctx, &held, true)?;
        ctx.db.execute(UNCOUNT_ATTEMPT, &params![self.job.0])?;
        requeue(ctx, self.job, &held.queue, ctx.now_ms, None)?;
        Ok(())
    }
}
