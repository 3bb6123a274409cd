//! [`SetSchedule`]: make a job recur, change how, or stop it recurring.

use crate::store::db::{Sql, params};

use crate::error::Result;
use crate::names::JobId;
use crate::ops::cancel::job_state;
use crate::ops::{Operation, WriteCtx};
use crate::schedule::Schedule;

/// Sets a job's schedule (a repeat spec or a cron expression, as [`Push::schedule`](crate::Push::schedule)), or
/// removes it. It takes effect when the current run ends: the next run is computed from it then. The job's
/// `run_at` does not change (use `reschedule` for that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetSchedule {
    /// The job.
    pub job: JobId,
    /// The schedule; `None` stops the job recurring.
    pub schedule: Option<String>,
    /// A cron schedule's IANA time zone; UTC when absent.
    pub time_zone: Option<String>,
}

const SET_SCHEDULE: Sql = Sql::both("UPDATE jobs SET schedule = $1, time_zone = $2 WHERE id = $3");

impl Operation for SetSchedule {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let (schedule, time_zone) = match &self.schedule {
            Some(spec) => {
                let (spec, zone) = Schedule::parse(spec, self.time_zone.as_deref())?.to_stored();
                (Some(spec), zone)
            }
            None => (None, None),
        };
        job_state(ctx, self.job)?;
        ctx.db
            .execute(SET_SCHEDULE, &params![schedule, time_zone, self.job.0])?;
        Ok(())
    }
}
