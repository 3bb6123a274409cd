//! [`Lease`]: proof that a worker holds a running job. Every call a worker makes about its job carries it.

use jiff::Timestamp;

use crate::names::JobId;
use crate::names::WorkerId;

/// A worker's hold on a running job.
///
/// The token is random and fresh for every claim, so it fences: once the lease expires, or the job is cancelled,
/// deleted or leased again, calls made with this lease are refused with
/// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) and change nothing. Tokens are never derived from stored
/// counters, so they stay unique even if a crash rolls back the last unsynced commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The job held.
    pub job: JobId,
    /// The fencing token.
    pub token: i64,
    /// The worker holding it.
    pub worker: WorkerId,
    /// When it runs out unless extended by a heartbeat.
    pub expires_at: Timestamp,
}
