//! [`BulkAction`]: one operator action over many jobs (those of a filter, or a selection of ids), as
//! [`Jobs::bulk`](crate::Jobs::bulk) runs it: a chunk of jobs per transaction ([`BulkChunk`]), so that a bulk
//! action over a hundred thousand jobs holds the writer no longer at a time than a few ordinary batches do, and each
//! job the same as its own operation (the rules of `Cancel`, `Delete`, `Requeue`, `MoveJob`), in a savepoint of its
//! own: a job whose state does not allow the action is skipped and counted, and the others go on.

use crate::error::{ErrorKind, Result};
use crate::job::JobState;
use crate::names::JobId;
use crate::names::QueueName;
use crate::ops::cancel::{Cancel, job_state};
use crate::ops::delete::Delete;
use crate::ops::move_job::MoveJob;
use crate::ops::requeue::Requeue;
use crate::ops::{Operation, WriteCtx, in_savepoint};
use crate::query::JobFilter;

/// What [`Jobs::bulk`](crate::Jobs::bulk) does to each job it selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkAction {
    /// Cancel the jobs that have not finished (and take failed ones out of the failures), as `Cancel` does; a
    /// completed or already cancelled job is skipped.
    Cancel,
    /// Delete the jobs with their history, as `Delete` does: a live one is cancelled first (its worker is refused
    /// from then on).
    Delete,
    /// Run again, with fresh attempts, the jobs that failed, were cancelled or completed, as `Requeue` does; a
    /// live job is skipped (so that a retry of a filter never takes a running job from its worker).
    Retry,
    /// Move the jobs that are not running to `queue`, as `MoveJob` does; a running job is skipped.
    Move {
        /// The queue they move to.
        queue: String,
    },
}

impl BulkAction {
    /// The action's name on the wire: `cancel`, `delete`, `retry` or `move`.
    pub fn as_str(&self) -> &'static str {
        match self {
            BulkAction::Cancel => "cancel",
            BulkAction::Delete => "delete",
            BulkAction::Retry => "retry",
            BulkAction::Move { .. } => "move",
        }
    }
}

/// Which jobs [`Jobs::bulk`](crate::Jobs::bulk) acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkSelection {
    /// These jobs (at most [`MAX_BULK_IDS`]); one that does not exist is skipped.
    Ids(Vec<JobId>),
    /// Every job the filter lists at the start (its `before` and `limit` are ignored): the jobs created after the
    /// action began are left alone.
    Filter(JobFilter),
}

/// What [`Jobs::bulk`](crate::Jobs::bulk) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    /// The jobs it selected.
    pub matched: u64,
    /// Those it acted on.
    pub done: u64,
    /// Those it left as they were: gone, or in a state the action does not apply to.
    pub skipped: u64,
}

/// The most ids one [`BulkSelection::Ids`] may list.
pub const MAX_BULK_IDS: usize = 10_000;

/// Jobs per transaction: a chunk is a few milliseconds of the writer's time, even on PostgreSQL, where each job's
/// savepoint and statements are round trips.
pub(crate) const BULK_CHUNK: usize = 100;

/// One chunk of a bulk action, in one transaction.
pub(crate) struct BulkChunk {
    pub action: BulkAction,
    pub jobs: Vec<JobId>,
}

impl BulkChunk {
    /// The action on one job; `Ok(false)` when the job's state does not allow it.
    fn act(&self, ctx: &mut WriteCtx<'_>, job: JobId) -> Result<bool> {
        let state = job_state(ctx, job)?;
        match &self.action {
            BulkAction::Cancel => {
                if matches!(state, JobState::Completed | JobState::Cancelled) {
                    return Ok(false);
                }
                Cancel { job }.apply(ctx)?;
            }
            BulkAction::Delete => Delete { job }.apply(ctx)?,
            BulkAction::Retry => {
                if state.is_live() {
                    return Ok(false);
                }
                Requeue { job, run_at: None }.apply(ctx)?;
            }
            BulkAction::Move { queue } => MoveJob::new(job, queue.as_str()).apply(ctx)?,
        }
        Ok(true)
    }
}

impl Operation for BulkChunk {
    type Output = BulkOutcome;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<BulkOutcome> {
        let mut outcome = BulkOutcome::default();
        for &job in &self.jobs {
            outcome.matched += 1;
            match in_savepoint(ctx, |ctx| self.act(ctx, job)) {
                Ok(true) => outcome.done += 1,
                Ok(false) => outcome.skipped += 1,
                Err(e) if is_refusal(e.kind()) => outcome.skipped += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(outcome)
    }
}

/// A job's own refusal (gone, or in a state the action does not apply to), as opposed to a failure of the
/// database that stops the chunk.
fn is_refusal(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::NotFound | ErrorKind::InvalidState)
}

/// Checks a bulk action before anything runs: the queue a move goes to, and the number of ids.
pub(crate) fn check(action: &BulkAction, selection: &BulkSelection) -> Result<()> {
    if let BulkAction::Move { queue } = action {
        QueueName::parse(queue.as_str())?;
    }
    if let BulkSelection::Ids(ids) = selection
        && ids.len() > MAX_BULK_IDS
    {
        return Err(crate::error::Error::invalid(
            "ids",
            format!("must list at most {MAX_BULK_IDS} jobs, got {}", ids.len()),
        ));
    }
    Ok(())
}
