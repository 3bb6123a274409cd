//! Opening databases: settings, migrations, the single-owner lock.

use std::time::Duration;

use cairn::{ErrorKind, Queue};

use crate::harness::TestQueue;

#[tokio::test]
async fn opening_applies_and_reads_back_connection_settings() {
    let t = TestQueue::new().await;
    let settings = t.queue.sqlite_settings().await.unwrap();
    assert_eq!(settings.journal_mode, "wal");
    // NORMAL: durable acknowledgements come from Cairn's own fsync of the WAL (see Durability::Full).
    assert_eq!(settings.synchronous, 1);
    assert!(settings.foreign_keys);
    assert_eq!(settings.busy_timeout_ms, 5000);
    t.close().await;
}

#[tokio::test]
async fn migrations_apply_to_a_fresh_file_and_are_recorded_once() {
    let t = TestQueue::new().await;
    let path = t.path();
    t.close().await;
    // Opening again applies nothing new.
    let queue = Queue::open(&path).await.unwrap();
    queue.close(Duration::from_secs(5)).await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<i64> = conn
        .prepare("SELECT version FROM cairn_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, (1..=15).collect::<Vec<i64>>());
}

#[tokio::test]
async fn a_second_process_cannot_open_the_same_queue() {
    let t = TestQueue::new().await;
    let err = Queue::open(t.path()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Locked);
    t.close().await;
    // Once closed, it opens.
    let queue = Queue::open(t.dir.path().join("jobs.db")).await.unwrap();
    queue.close(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn calls_after_close_fail_with_closed() {
    let t = TestQueue::new().await;
    t.queue.close(Duration::from_secs(5)).await.unwrap();
    let err = t.queue.enqueue(cairn::Push::new("x")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
}
