//! [`Retry`]: a worker hit a transient error; the job runs again after a backoff, or fails when out of attempts.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::job::{AttemptOutcome, JobId, JobState, RunUsage};
use crate::lease::Lease;
use crate::ops::{Operation, WriteCtx, held_job, retry_or_fail};

/// The longest error message kept; longer ones are cut (at a character boundary) rather than refused, because the
/// error often comes from a crash that the worker cannot control.
pub(crate) const MAX_ERROR_BYTES: usize = 64 * 1024;

/// Counts the attempt and schedules the next one after the job's backoff (or `delay`), or fails the job in the
/// failure group `retries-exhausted` when it has no attempts left.
#[derive(Debug, Clone, PartialEq)]
pub struct Retry {
    /// The job.
    pub job: JobId,
    /// The lease's fencing token.
    pub token: i64,
    /// What went wrong, kept in the job's history.
    pub error: String,
    /// Wait this long instead of the backoff.
    pub delay: Option<Duration>,
    /// What the attempt's process used, if the worker measured it; kept in the job's history.
    pub usage: Option<RunUsage>,
}

impl Retry {
    /// Retries the job `lease` holds after `error`.
    pub fn new(lease: &Lease, error: impl Into<String>) -> Self {
        Retry {
            job: lease.job,
            token: lease.token,
            error: error.into(),
            delay: None,
            usage: None,
        }
    }
}

/// Cuts a message to [`MAX_ERROR_BYTES`].
pub(crate) fn truncate_error(message: &str) -> &str {
    if message.len() <= MAX_ERROR_BYTES {
        return message;
    }
    let mut end = MAX_ERROR_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

impl Operation for Retry {
    /// The job's state afterwards: `queued`, `scheduled`, or `failed` when out of attempts.
    type Output = JobState;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<JobState> {
        if self
            .delay
            .is_some_and(|d| d > Duration::from_secs(366 * 24 * 3600))
        {
            return Err(Error::invalid("delay", "must be at most a year"));
        }
        let held = held_job(ctx, self.job, self.token)?;
        retry_or_fail(
            ctx,
            &held,
            AttemptOutcome::Retried,
            truncate_error(&self.error),
            self.delay,
            self.usage.as_ref(),
        )
    }
}
