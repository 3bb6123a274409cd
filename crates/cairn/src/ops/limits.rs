//! The limits operations share: how long a lease may be, how many jobs one dequeue takes (and so how heavy a job
//! may be), how many of a concurrency key's jobs may run at once, how many tags a job holds. A module of its own, so that neither
//! operation reaches into the other for them.

use std::time::Duration;

/// The most jobs one dequeue may take.
pub const MAX_DEQUEUE: u32 = 1000;

/// The longest lease a job may ask for: a day. A lost worker then holds a job at most that long.
pub(crate) const MAX_LEASE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// The shortest lease: shorter leases expire before a heartbeat can arrive.
pub(crate) const MIN_LEASE_TIMEOUT: Duration = Duration::from_millis(100);

/// The most tags a job may hold, pushed with it or added later: a filter by tag stays a few index probes, and a job's
/// row of tags stays small.
pub const MAX_TAGS: usize = 64;

/// The highest limit a concurrency key may have.
pub const MAX_KEY_CONCURRENCY: u32 = 1_000_000;
