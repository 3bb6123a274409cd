//! [`RecordAudit`]: a change made through the server, on the activity log with the token that made it, for the
//! audit trail (`GET /v1/activity?event=audit`, and the event stream).

use crate::error::{Error, Result};
use crate::names::{JobId, QueueName};
use crate::ops::{Operation, WriteCtx};

/// The most of a request an audit event keeps: its method and path, and for SQL the start of its text.
pub const MAX_AUDIT_DETAIL: usize = 1024;

/// Records that the token `token` made the request `request` (`POST /v1/jobs/7/cancel`, or the SQL it ran), of job
/// `job` or queue `queue` when it names one: an [`ActivityKind::Audit`](crate::ActivityKind::Audit) event whose detail is
/// `token "ops": POST /v1/jobs/7/cancel`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordAudit {
    /// The token's name.
    pub token: String,
    /// What it asked: the method and path, and what else says what it did.
    pub request: String,
    /// The job the request named.
    pub job: Option<JobId>,
    /// The queue the request named.
    pub queue: Option<String>,
}

impl Operation for RecordAudit {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let queue = self.queue.as_deref().map(QueueName::parse).transpose()?;
        if self.token.is_empty() {
            return Err(Error::invalid("token", "must not be empty"));
        }
        let mut detail = format!("token {:?}: {}", self.token, self.request);
        if detail.len() > MAX_AUDIT_DETAIL {
            let mut end = MAX_AUDIT_DETAIL;
            while !detail.is_char_boundary(end) {
                end -= 1;
            }
            detail.truncate(end);
            detail.push('…');
        }
        ctx.events.audit(
            ctx.now_ms,
            self.job.map(|job| job.0),
            queue.as_ref().map(QueueName::as_str),
            &detail,
        );
        Ok(())
    }
}
