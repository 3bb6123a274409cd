//! [`MoveJob`]: move a job that is not running to another queue (qless's `put` of an existing job).

use crate::error::{Error, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::names::QueueName;
use crate::ops::events::ActivityKind;
use crate::ops::requeue::Requeue;
use crate::ops::{Operation, WriteCtx, job_changed, parse_stored_state};
use crate::store::db::{Sql, params};

/// Moves a job that is not running to another queue. One that has not started (scheduled, queued or waiting) moves
/// as it is: its data, priority, time, attempts, tags and relations stay. One that ended (failed, cancelled or
/// completed) runs again there, as [`Requeue`] runs it, in the same transaction, so no worker can
/// take it in its old queue first. From then on it runs under the new queue's limits and priority aging. A running
/// job stays in the queue its worker took it from. Moving a job that has not started to the queue it is in changes
/// nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveJob {
    /// The job.
    pub job: JobId,
    /// The queue it moves to.
    pub queue: String,
}

impl MoveJob {
    /// Moves `job` to `queue`.
    pub fn new(job: JobId, queue: impl Into<String>) -> Self {
        MoveJob {
            job,
            queue: queue.into(),
        }
    }
}

/// The job's state and queue, locked on PostgreSQL so that no other node claims it while it moves.
const SELECT_JOB: Sql = Sql {
    sqlite: "SELECT state, queue, concurrency_key IS NOT NULL FROM jobs WHERE id = $1",
    postgres: "SELECT state, queue, concurrency_key IS NOT NULL FROM jobs WHERE id = $1 FOR UPDATE",
};

/// `$1` the new queue, `$2` its priority aging (the job's claim order follows the queue's setting), `$3` the job.
const MOVE_JOB: Sql = Sql::both("UPDATE jobs SET queue = $1, aging_ms = $2 WHERE id = $3");

impl Operation for MoveJob {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let queue = QueueName::parse(self.queue.as_str())?;
        let row: Option<(String, String, bool)> =
            ctx.db.query_row(SELECT_JOB, &params![self.job], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
        let (state, from, keyed) =
            row.ok_or_else(|| Error::not_found(format!("job {}", self.job)))?;
        let state = parse_stored_state(&state)?;
        match state {
            JobState::Scheduled | JobState::Queued | JobState::Waiting => {}
            JobState::Running => {
                return Err(Error::invalid_state(format!(
                    "job {} is running; it stays in queue {from} until its run ends",
                    self.job
                )));
            }
            JobState::Failed | JobState::Cancelled | JobState::Completed => {}
        }
        if from == queue.as_str() && !state.is_finished() {
            return Ok(());
        }
        let aging = ctx.settings.get(queue.as_str()).aging_ms;
        ctx.db
            .execute(MOVE_JOB, &params![queue.as_str(), aging, self.job])?;
        let detail = format!("from {from}");
        job_changed(ctx, self.job, ActivityKind::Moved, Some(&detail))?;
        if keyed {
            crate::ops::queues::mark_keyed(ctx, queue.as_str())?;
        }
        if state.is_finished() {
            let mut again = Requeue {
                job: self.job,
                run_at: None,
            };
            again.apply(ctx)?;
            return Ok(());
        }
        if state == JobState::Queued {
            // Workers waiting on the new queue take it at once.
            ctx.ready.mark(queue.as_str());
        }
        Ok(())
    }
}
