//! [`QueueOptions`]: everything a queue can be tuned with, with defaults that suit production.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::name_families::NameFamilies;
use crate::retry_policy::RetryPolicy;

/// What an acknowledged write survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every acknowledged enqueue, finish, retry, fail, cancel… is on disk (its WAL frames fsynced) before the call
    /// returns: it survives a process crash and a power loss, as with SQLite's `synchronous=FULL`. The fsync runs on
    /// its own thread, shared by every batch committed meanwhile. The default.
    #[default]
    Full,
    /// Commits are not fsynced one by one (SQLite `synchronous=NORMAL` in WAL mode). An acknowledged write survives
    /// a crash of the process (SIGKILL included), but the last commits before a power loss or OS crash may be lost.
    /// The database is never corrupted either way. Several times faster for one-job-per-call workloads.
    Normal,
}

/// What happens to jobs found running when a database is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryPolicy {
    /// Their workers died with the process: count the attempt and run the job again at once. The default, right
    /// for an embedded queue whose workers live in the process.
    #[default]
    RetryNow,
    /// As `RetryNow`, but wait the job's retry backoff, as after an error.
    Backoff,
    /// Their workers may have outlived the process (the remote workers of a server): leave each job to its
    /// lease. A worker that is still there goes on under it, heartbeats and all; a job whose worker is gone too
    /// runs again when its lease expires, as after any lost worker.
    KeepLeases,
}

/// How long finished jobs are kept, and what they leave behind. A completed batch goes once none of its jobs is
/// left and, with `max_age`, that long after it completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Completed and cancelled jobs older than this are removed. `None` keeps them regardless of age.
    pub max_age: Option<Duration>,
    /// At most this many completed and cancelled jobs are kept (the newest). `None` keeps any number.
    pub max_count: Option<u64>,
    /// Workers not seen (taking jobs or heartbeating) for this long are forgotten. `None` remembers them all.
    pub worker_max_age: Option<Duration>,
    /// Activity log rows older than this are removed. `None` keeps them all.
    pub activity_max_age: Option<Duration>,
    /// At most about this many activity log rows are kept (the newest): every job writes three (added, started,
    /// finished), so at thousands of jobs a second the age alone would let the log grow by gigabytes an hour.
    /// `None` keeps any number.
    pub activity_max_count: Option<u64>,
    /// Statistics of periods older than this are removed. `None` keeps them all.
    pub stats_max_age: Option<Duration>,
    /// How often the background pruning looks; it also looks once a quarter of `max_count` jobs (and at least
    /// 1,000) have completed or been cancelled since it last did. A backlog larger than one step drains in steps
    /// of about 5 ms each, between which the queue's requests run.
    pub interval: Duration,
}

impl Default for Retention {
    /// Seven days and at most 100,000 jobs, looked at every minute; workers forgotten after a day without a sign
    /// of life; the activity log kept a week and at most 5,000,000 rows (about 400 MB), statistics eight days (so
    /// that a week's graphs are whole). Failed jobs are kept until dealt with.
    fn default() -> Self {
        Retention {
            max_age: Some(Duration::from_secs(7 * 24 * 3600)),
            max_count: Some(100_000),
            worker_max_age: Some(Duration::from_secs(24 * 3600)),
            activity_max_age: Some(Duration::from_secs(7 * 24 * 3600)),
            activity_max_count: Some(5_000_000),
            stats_max_age: Some(Duration::from_secs(8 * 24 * 3600)),
            interval: Duration::from_secs(60),
        }
    }
}

/// Settings for [`Queue::open_with`](crate::Queue::open_with).
#[derive(Clone)]
pub struct QueueOptions {
    /// The source of "now". Tests pass a [`ManualClock`](crate::ManualClock).
    pub clock: Arc<dyn Clock>,
    /// What an acknowledged write survives.
    pub durability: Durability,
    /// What happens to jobs left running by a dead process.
    pub recovery: RecoveryPolicy,
    /// How long finished jobs are kept.
    pub retention: Retention,
    /// The retry policy of jobs pushed without one.
    pub default_retry: RetryPolicy,
    /// The lease timeout of jobs pushed without one.
    pub default_lease_timeout: Duration,
    /// The largest job data (or progress, or checkpoint), as JSON text, in bytes.
    pub max_data_bytes: usize,
    /// The most operations the writer puts in one transaction.
    pub max_batch: usize,
    /// How many read-only connections are kept open for queries.
    pub read_connections: usize,
    /// The most read-only connections open at once (at least `read_connections`): reads beyond it wait for one to
    /// come back. Each is a SQLite connection (three file descriptors) or a PostgreSQL session.
    pub max_read_connections: usize,
    /// On PostgreSQL: `VACUUM` the jobs table (and the attempts table) once this many of its rows were updated or
    /// deleted since its last vacuum, looked at every 5 seconds, rather than wait for autovacuum, which comes once
    /// a minute at best and lets a busy queue slow down by half in between (each job updates its row twice and
    /// deletes it once). `None` leaves vacuuming to autovacuum. Ignored on SQLite, which keeps no dead rows.
    pub vacuum_after: Option<u64>,
    /// How the statistics and metrics group job names (by default, each name up to its first `?`), so that names
    /// made per entity cannot add a row and a series each.
    pub name_families: NameFamilies,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            clock: Arc::new(SystemClock),
            durability: Durability::Full,
            recovery: RecoveryPolicy::RetryNow,
            retention: Retention::default(),
            default_retry: RetryPolicy::default(),
            default_lease_timeout: Duration::from_secs(60),
            max_data_bytes: 1024 * 1024,
            max_batch: 4096,
            read_connections: 4,
            max_read_connections: 16,
            vacuum_after: Some(100_000),
            name_families: NameFamilies::default(),
        }
    }
}

impl std::fmt::Debug for QueueOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueOptions")
            .field("durability", &self.durability)
            .field("recovery", &self.recovery)
            .field("retention", &self.retention)
            .field("default_retry", &self.default_retry)
            .field("default_lease_timeout", &self.default_lease_timeout)
            .field("max_data_bytes", &self.max_data_bytes)
            .field("max_batch", &self.max_batch)
            .field("read_connections", &self.read_connections)
            .field("max_read_connections", &self.max_read_connections)
            .field("vacuum_after", &self.vacuum_after)
            .field("name_families", &self.name_families)
            .finish_non_exhaustive()
    }
}
