//! Shared test setup: a real SQLite file in a temporary directory, and a manual clock.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn::{ClaimedJob, Dequeue, ManualClock, Push, Queue, QueueOptions};
use jiff::Timestamp;
use tempfile::TempDir;

/// A queue on a fresh file, with a clock that moves only when told.
pub struct TestQueue {
    pub queue: Queue,
    pub clock: ManualClock,
    pub dir: TempDir,
}

/// 2026-01-01T00:00:00Z, where every test clock starts.
pub fn start_time() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

impl TestQueue {
    pub async fn new() -> TestQueue {
        TestQueue::with(|_| {}).await
    }

    pub async fn with(configure: impl FnOnce(&mut QueueOptions)) -> TestQueue {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(start_time());
        let mut options = QueueOptions {
            clock: Arc::new(clock.clone()),
            ..QueueOptions::default()
        };
        configure(&mut options);
        let queue = Queue::open_with(dir.path().join("jobs.db"), options)
            .await
            .unwrap();
        TestQueue { queue, clock, dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("jobs.db")
    }

    pub fn clock_now(&self) -> jiff::Timestamp {
        cairn::Clock::now(&self.clock)
    }

    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    /// Pushes a job named `name` with default settings; returns its id.
    pub async fn push(&self, name: &str) -> cairn::JobId {
        self.queue.enqueue(Push::new(name)).await.unwrap().id
    }

    /// Takes one job as `worker`, not waiting.
    pub async fn take(&self, worker: &str) -> Option<ClaimedJob> {
        self.queue
            .dequeue(Dequeue::new(worker))
            .await
            .unwrap()
            .pop()
    }

    /// Takes every ready job, one at a time, and returns their names in the order they came.
    pub async fn drain_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        while let Some(claimed) = self.take("drainer").await {
            names.push(claimed.job.name.to_string());
            self.queue.finish(&claimed.lease, None).await.unwrap();
        }
        names
    }

    pub async fn close(&self) {
        self.queue.close(Duration::from_secs(10)).await.unwrap();
    }
}
