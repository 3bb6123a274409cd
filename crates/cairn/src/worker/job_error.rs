//! [`JobError`]: how a handler says its job did not succeed.

use std::fmt;
use std::time::Duration;

/// A handler's failure. Any `std::error::Error` converts into a retry, so `?` works in handlers; use
/// [`JobError::fail`] when retrying cannot help.
///
/// It deliberately does not implement `std::error::Error` itself, which is what makes that blanket conversion
/// possible.
pub struct JobError {
    pub(crate) kind: JobErrorKind,
}

pub(crate) enum JobErrorKind {
    Retry {
        message: String,
        delay: Option<Duration>,
    },
    Fail {
        group: String,
        message: String,
    },
    /// The job is suspended ([`JobContext::sleep`](crate::JobContext::sleep), a wait for a signal or for its
    /// children): its lease is over already, and nothing is to be reported. `why` says what it waits for.
    Suspended {
        why: String,
    },
}

impl JobError {
    /// A transient failure: the job runs again after its backoff, or fails when out of attempts.
    pub fn retry(message: impl Into<String>) -> Self {
        JobError {
            kind: JobErrorKind::Retry {
                message: message.into(),
                delay: None,
            },
        }
    }

    /// A transient failure with its own delay (for example, a rate limit's "retry after").
    pub fn retry_after(message: impl Into<String>, delay: Duration) -> Self {
        JobError {
            kind: JobErrorKind::Retry {
                message: message.into(),
                delay: Some(delay),
            },
        }
    }

    /// A permanent failure: the job fails at once, in failure group `group`.
    pub fn fail(group: impl Into<String>, message: impl Into<String>) -> Self {
        JobError {
            kind: JobErrorKind::Fail {
                group: group.into(),
                message: message.into(),
            },
        }
    }
}

impl JobError {
    /// The same failure, its message saying that it happened in step `step`.
    pub(crate) fn in_step(mut self, step: &str) -> Self {
        if let JobErrorKind::Retry { message, .. } | JobErrorKind::Fail { message, .. } =
            &mut self.kind
        {
            *message = format!("step {step:?}: {message}");
        }
        self
    }
}

impl<E: std::error::Error> From<E> for JobError {
    fn from(error: E) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        JobError::retry(message)
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            JobErrorKind::Retry { message, delay } => f
                .debug_struct("Retry")
                .field("message", message)
                .field("delay", delay)
                .finish(),
            JobErrorKind::Fail { group, message } => f
                .debug_struct("Fail")
                .field("group", group)
                .field("message", message)
                .finish(),
            JobErrorKind::Suspended { why } => {
                f.debug_struct("Suspended").field("why", why).finish()
            }
        }
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            JobErrorKind::Retry { message, .. } => f.write_str(message),
            JobErrorKind::Fail { group, message } => write!(f, "{group}: {message}"),
            JobErrorKind::Suspended { why } => f.write_str(why),
        }
    }
}
