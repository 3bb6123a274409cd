//! Shared test setup: a queue on a real database (a SQLite file in a temporary directory, or a database of its own
//! on the private PostgreSQL cluster `scripts/test` starts), and a manual clock.
//!
//! The engine's tests run on both backends: `main.rs` builds each test module twice, in `sqlite` and `postgres`,
//! whose `harness::TestQueue` opens its backend.

use cairn::Jobs;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use cairn::{ClaimedJob, Dequeue, ManualClock, Push, Queue, QueueOptions};
use jiff::Timestamp;
use tempfile::TempDir;

pub use crate::poll::{eventually, poll};
pub use cairn::__private::{TestDatabase, is_postgres_module};

/// How long a test waits for what should happen at once: only a failing test waits this long.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A queue on a fresh database, with a clock that moves only when told.
pub struct TestQueueOn<const POSTGRES: bool> {
    pub queue: Queue,
    pub clock: ManualClock,
    pub dir: TempDir,
    /// The test's own PostgreSQL database, dropped when the test ends.
    database: Option<TestDatabase>,
}

/// 2026-01-01T00:00:00Z, where every test clock starts.
pub fn start_time() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

impl<const POSTGRES: bool> TestQueueOn<POSTGRES> {
    pub async fn new() -> Self {
        Self::with(|_| {}).await
    }

    pub async fn with(configure: impl FnOnce(&mut QueueOptions)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let database = POSTGRES.then(TestDatabase::new);
        let clock = ManualClock::new(start_time());
        let mut options = QueueOptions {
            clock: Arc::new(clock.clone()),
            ..QueueOptions::default()
        };
        configure(&mut options);
        let location = match &database {
            Some(database) => PathBuf::from(&database.url),
            None => dir.path().join("jobs.db"),
        };
        let queue = Queue::open_with(location, options).await.unwrap();
        TestQueueOn {
            queue,
            clock,
            dir,
            database,
        }
    }

    /// Where the queue lives: the SQLite file, or the PostgreSQL URL; opening it again opens the same queue.
    pub fn path(&self) -> PathBuf {
        match &self.database {
            Some(database) => PathBuf::from(&database.url),
            None => self.dir.path().join("jobs.db"),
        }
    }

    /// Whether the queue is on PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        POSTGRES
    }

    /// The rows of a query of integer columns, through read-only SQL.
    pub async fn select_integers(&self, sql: &str) -> Vec<Vec<i64>> {
        let rows = self
            .queue
            .sql(cairn::SqlQuery::new(sql))
            .await
            .unwrap()
            .rows;
        rows.iter()
            .map(|row| {
                row.iter()
                    .map(|v| v.as_i64().expect("an integer"))
                    .collect()
            })
            .collect()
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

    /// Pushes `jobs` in one batch; returns their ids, in order.
    pub async fn push_batch(&self, jobs: Vec<Push>) -> Vec<cairn::JobId> {
        let enqueued = self.queue.enqueue_batch(jobs).await.unwrap();
        enqueued.into_iter().map(|e| e.id).collect()
    }

    /// Takes one job as `worker`, not waiting.
    pub async fn take(&self, worker: &str) -> Option<ClaimedJob> {
        self.queue
            .dequeue(Dequeue::new(worker))
            .await
            .unwrap()
            .pop()
    }

    /// Returns once `worker`'s dequeue has run in the writer, which then parks it if it found nothing: any request
    /// made after this finds it parked. It shows as the worker being seen, which its first dequeue writes, so
    /// `worker` must not have been seen before.
    pub async fn until_parked(&self, worker: &str) {
        crate::poll::until_waiting(&self.queue, &[worker]).await;
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

/// Polls `future` once, so that what it does before it first waits is done (a wait for a job registered, a
/// subscription listening); whether it is still pending.
pub async fn poll_once<F: Future + Unpin>(future: &mut F) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *future).poll(cx).is_pending())).await
}

/// The SQLite queue, for the modules that test SQLite itself.
pub type TestQueue = TestQueueOn<false>;

/// Runs every future at once on the runtime and gathers their outputs, in order.
/// Pushes `n` jobs named `name`, takes them all and completes them in one call: `n` finished jobs.
pub async fn finish_batch(queue: &cairn::Queue, name: &str, n: u32) {
    let pushes = (0..n).map(|_| cairn::Push::new(name)).collect();
    queue.enqueue_batch(pushes).await.unwrap();
    let claimed = queue
        .dequeue(cairn::Dequeue::new("w").limit(n))
        .await
        .unwrap();
    assert_eq!(claimed.len(), n as usize, "every job pushed was taken");
    let finishes = claimed
        .iter()
        .map(|c| cairn::Finish::new(&c.lease))
        .collect();
    for answer in queue.finish_many(finishes).await.unwrap() {
        answer.unwrap();
    }
}

pub async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}
