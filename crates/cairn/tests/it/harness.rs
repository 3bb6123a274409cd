//! Shared test setup: a queue on a real database (a SQLite file in a temporary directory, or a database of its own
//! on the private PostgreSQL cluster `scripts/test` starts), and a manual clock.
//!
//! The engine's tests run on both backends: `main.rs` builds each test module twice, in `sqlite` and `postgres`,
//! whose `harness::TestQueue` opens its backend.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cairn::{ClaimedJob, Dequeue, ManualClock, Push, Queue, QueueOptions};
use jiff::Timestamp;
use postgres::{Client, NoTls};
use tempfile::TempDir;

/// Whether the module at `path` (its `module_path!()`) runs on PostgreSQL: the engine's test modules are built
/// once under `postgres` and once under `sqlite` (see `main.rs`).
pub const fn is_postgres_module(path: &str) -> bool {
    let (path, needle) = (path.as_bytes(), b"::postgres::");
    let mut start = 0;
    while start + needle.len() <= path.len() {
        let mut i = 0;
        while i < needle.len() && path[start + i] == needle[i] {
            i += 1;
        }
        if i == needle.len() {
            return true;
        }
        start += 1;
    }
    false
}

/// A queue on a fresh database, with a clock that moves only when told.
pub struct TestQueueOn<const POSTGRES: bool> {
    pub queue: Queue,
    pub clock: ManualClock,
    pub dir: TempDir,
    /// The test's own PostgreSQL database, dropped when the test ends.
    database: Option<TestDatabase>,
}

/// A database of its own on the test cluster, dropped when the test ends.
pub struct TestDatabase {
    admin: String,
    name: String,
    pub url: String,
}

impl TestDatabase {
    /// Creates the database. On a thread of its own: the synchronous client cannot run inside an async test.
    pub fn new() -> TestDatabase {
        std::thread::spawn(TestDatabase::create)
            .join()
            .expect("creating a test database")
    }

    fn create() -> TestDatabase {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let admin = std::env::var("CAIRN_TEST_POSTGRES_URL").unwrap_or_else(|_| {
            panic!(
                "CAIRN_TEST_POSTGRES_URL is not set: run the tests with scripts/test, which starts a private \
                 PostgreSQL cluster (scripts/postgres) and sets it"
            )
        });
        let name = format!(
            "cairn_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut client = Client::connect(&admin, NoTls).expect("connecting to the test cluster");
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("creating a test database");
        let url = match admin.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => panic!("CAIRN_TEST_POSTGRES_URL has no database: {admin}"),
        };
        TestDatabase { admin, name, url }
    }

    pub fn connect(&self) -> Client {
        Client::connect(&self.url, NoTls).expect("connecting to the test database")
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            if let Ok(mut client) = Client::connect(&admin, NoTls) {
                let _ =
                    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        })
        .join();
    }
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

/// The SQLite queue, for the modules that test SQLite itself.
pub type TestQueue = TestQueueOn<false>;
