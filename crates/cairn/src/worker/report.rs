//! [`WorkerReport`]: what a worker did, counted as it ran.

/// What a worker did, returned by [`Worker::stop`](crate::Worker::stop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Jobs whose handler returned `Ok` and that were finished.
    pub finished: u64,
    /// Jobs whose handler asked for a retry (or panicked).
    pub retried: u64,
    /// Jobs whose handler failed them.
    pub failed: u64,
    /// Jobs taken away (lease lost, cancelled) while running.
    pub lost: u64,
    /// Jobs given back unfinished at the shutdown deadline.
    pub released: u64,
    /// Jobs whose handler slept ([`JobContext::sleep`](crate::JobContext::sleep)): they run again at their time.
    pub suspended: u64,
}
