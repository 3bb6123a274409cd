//! The counters the producer, the handlers and the depth poller share with the sampler.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::latency::RollingLatency;

/// The window the contract's claim percentiles cover.
pub const LATENCY_WINDOW: Duration = Duration::from_secs(30);

/// What happened so far.
pub struct Meter {
    /// Jobs whose enqueue committed.
    pub enqueued: AtomicU64,
    /// Jobs whose handler started.
    pub started: AtomicU64,
    /// Jobs whose handler returned.
    pub completed: AtomicU64,
    /// Enqueue calls that failed (and were tried again).
    pub failed_enqueues: AtomicU64,
    /// Ready jobs in the queue, as the database last counted them; `None` before the first count.
    db_depth: AtomicU64,
    /// Claim latency: from just before the enqueue call to the handler's start.
    claims: Mutex<RollingLatency>,
}

impl Meter {
    pub fn new(sample_every: Duration) -> Meter {
        Meter {
            enqueued: AtomicU64::new(0),
            started: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            failed_enqueues: AtomicU64::new(0),
            db_depth: AtomicU64::new(u64::MAX),
            claims: Mutex::new(RollingLatency::new(LATENCY_WINDOW, sample_every)),
        }
    }

    /// This process's jobs enqueued and not yet started: what the depth-target producer keeps up. Exact for the
    /// process's own jobs, and read without a query, so a producer never tops up twice on one stale count.
    pub fn own_depth(&self) -> u64 {
        self.enqueued
            .load(Ordering::SeqCst)
            .saturating_sub(self.started.load(Ordering::SeqCst))
    }

    pub fn set_db_depth(&self, depth: u64) {
        self.db_depth.store(depth, Ordering::Relaxed);
    }

    pub fn db_depth(&self) -> Option<u64> {
        Some(self.db_depth.load(Ordering::Relaxed)).filter(|&d| d != u64::MAX)
    }

    /// Counts a handler's start for a job enqueued at `produced_at_us` (microseconds since the epoch).
    pub fn started(&self, produced_at_us: Option<u64>) {
        if let Some(at) = produced_at_us {
            let waited = Duration::from_micros(epoch_micros().saturating_sub(at));
            self.claims().record(waited);
        }
        self.started.fetch_add(1, Ordering::SeqCst);
    }

    pub fn claims(&self) -> std::sync::MutexGuard<'_, RollingLatency> {
        self.claims
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Microseconds since the Unix epoch: the clock every process on the machine shares, so that a job enqueued by
/// one instance and run by another is still timed right.
pub fn epoch_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}
