//! [`Retry`]: a worker hit a transient error; the job runs again after a backoff, or fails when out of attempts.

use std::time::Duration;

use jiff::Timestamp;

use crate::clock::duration_millis;
use crate::error::{Error, Result};
use crate::job::{AttemptOutcome, JobState, RunUsage};
use crate::lease::Lease;
use crate::names::JobId;
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
    /// Run again at this time instead of after the backoff (give this or `delay`, not both). A time already past
    /// means at once.
    pub run_at: Option<Timestamp>,
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
            run_at: None,
            usage: None,
        }
    }

    /// When the job runs again, in milliseconds, if the caller said: `delay` from now (at most a year), or
    /// `run_at`.
    pub(crate) fn run_at_ms(&self, now_ms: i64) -> Result<Option<i64>> {
        let at = match (self.delay, self.run_at) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid("run_at", "give run_at or delay, not both"));
            }
            (Some(delay), None) => {
                if delay > MAX_RETRY_WAIT {
                    return Err(Error::invalid("delay", "must be at most a year"));
                }
                now_ms.saturating_add(duration_millis(delay))
            }
            // A time is what the caller chose, as a push's `run_at` is.
            (None, Some(at)) => at.as_millisecond(),
            (None, None) => return Ok(None),
        };
        Ok(Some(at))
    }
}

/// The longest a retry may wait.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(366 * 24 * 3600);

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
        let run_at_ms = self.run_at_ms(ctx.now_ms)?;
        let held = held_job(ctx, self.job, self.token)?;
        retry_or_fail(
            ctx,
            &held,
            AttemptOutcome::Retried,
            truncate_error(&self.error),
            run_at_ms,
            self.usage.as_ref(),
        )
    }
}
