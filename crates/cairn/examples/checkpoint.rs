//! Checkpoints: a long job saves its position, so a retry after a failure resumes there instead of starting over.
//!
//! Run with `cargo run -p cairn --example checkpoint`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{JobError, JobState, Push, Queue, RetryPolicy, Worker};
use serde_json::json;

#[tokio::main]
async fn main() -> cairn::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let queue = Queue::open(dir.path().join("jobs.db")).await?;

    let id = queue
        .enqueue(
            Push::new("import.rows")
                .data(json!({ "next_row": 0, "total": 10 }))
                .retry(RetryPolicy::immediate(3)),
        )
        .await?
        .id;

    let worker = Worker::builder(&queue, "example-worker")
        .handler("import.rows", |job| async move {
            let total = job.data()["total"].as_u64().unwrap_or(0);
            let mut row = job.data()["next_row"].as_u64().unwrap_or(0);
            println!("attempt {} starts at row {row}", job.attempt());
            while row < total {
                row += 1; // … import one row …
                job.checkpoint(json!({ "next_row": row, "total": total }))
                    .await?;
                if row == 6 && job.attempt() == 1 {
                    return Err(JobError::retry("the database connection dropped"));
                }
            }
            println!("attempt {} imported everything", job.attempt());
            Ok(())
        })
        .start()?;

    while queue.get(id).await?.state != JobState::Completed {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.stop(Duration::from_secs(5)).await?;
    assert_eq!(queue.get(id).await?.data["next_row"], 10);
    queue.close(Duration::from_secs(5)).await
}
