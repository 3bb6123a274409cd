//! Opening databases: settings, migrations, the single-owner lock.

use cairn::Jobs;
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
    assert_eq!(versions, (1..=30).collect::<Vec<i64>>());
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

/// The size of the queue's database file and of its write-ahead log, in bytes.
fn file_sizes(path: &std::path::Path) -> (u64, u64) {
    let size = |p: std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    (size(path.to_path_buf()), size(wal.into()))
}

/// Jobs of about 8 KiB each, so that a few thousand fill a large write-ahead log.
fn bulky_jobs(first: usize, count: usize) -> Vec<cairn::Push> {
    let filler = "x".repeat(8 * 1024);
    (first..first + count)
        .map(|i| cairn::Push::new("bulky").data(serde_json::json!({ "i": i, "filler": filler })))
        .collect()
}

#[tokio::test]
async fn the_write_ahead_log_is_folded_back_into_the_file_while_the_queue_is_open() {
    let t = TestQueue::new().await;
    let (before, _) = file_sizes(&t.path());
    // About 1,500 pages: past the 1,000 at which a commit asks for a checkpoint.
    t.queue.enqueue_batch(bulky_jobs(0, 700)).await.unwrap();
    // The checkpoint runs on a thread of its own after the commit; give it up to 30 s.
    let path = t.path();
    crate::harness::eventually(
        Duration::from_secs(30),
        "the write-ahead log checkpointed into the database file",
        || async { file_sizes(&path).0 >= before + 5_000_000 },
    )
    .await;
    t.close().await;
}

#[tokio::test]
async fn the_write_ahead_log_stays_bounded_under_writes_that_never_pause() {
    let t = TestQueue::new().await;
    // Four callers write about 40 MB without a pause between batches, more than twice the 16 MiB past which the
    // writer checkpoints inline.
    let mut callers = tokio::task::JoinSet::new();
    for caller in 0..4 {
        let queue = t.queue.clone();
        callers.spawn(async move {
            for batch in 0..12 {
                let first = (caller * 12 + batch) * 100;
                queue.enqueue_batch(bulky_jobs(first, 100)).await.unwrap();
            }
        });
    }
    while let Some(done) = callers.join_next().await {
        done.unwrap();
    }
    let (_, wal) = file_sizes(&t.path());
    // The log restarts from its beginning after a complete checkpoint, so its file keeps its largest size: at most
    // the inline bound plus the batches committed while a checkpoint on the other thread held the lock.
    assert!(
        wal < 24 * 1024 * 1024,
        "the write-ahead log grew to {wal} bytes"
    );
    t.close().await;
}
