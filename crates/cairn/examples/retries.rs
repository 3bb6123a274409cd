//! Retries with exponential backoff: a handler fails twice with a transient error, then succeeds.
//! The job's history shows every attempt.
//!
//! Run with `cargo run -p cairn --example retries`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{JobError, JobState, Push, Queue, RetryPolicy, Worker};

#[tokio::main]
async fn main() -> cairn::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let queue = Queue::open(dir.path().join("jobs.db")).await?;

    let policy = RetryPolicy {
        max_attempts: 5,
        initial_delay: Duration::from_millis(100),
        multiplier: 2.0,
        max_delay: Duration::from_secs(1),
        jitter: 0.1,
    };
    let id = queue
        .enqueue(Push::new("flaky.call").retry(policy))
        .await?
        .id;

    let worker = Worker::builder(&queue, "example-worker")
        .handler("flaky.call", |job| async move {
            if job.attempt() < 3 {
                println!("attempt {}: the service is unavailable", job.attempt());
                return Err(JobError::retry("service unavailable (503)"));
            }
            println!("attempt {}: success", job.attempt());
            Ok(())
        })
        .start()?;

    while queue.get(id).await?.state != JobState::Completed {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.stop(Duration::from_secs(5)).await?;

    for attempt in queue.get(id).await?.history {
        println!(
            "attempt {} by {}: {} {}",
            attempt.number,
            attempt.worker,
            attempt.outcome.map_or("running", |o| o.as_str()),
            attempt.error.unwrap_or_default()
        );
    }
    queue.close(Duration::from_secs(5)).await
}
