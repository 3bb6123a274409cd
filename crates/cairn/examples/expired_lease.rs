//! Expired leases: a worker that stops heartbeating loses its job, which is retried by another worker; the first
//! worker's late finish is refused, so the job is never finished twice.
//!
//! Run with `cargo run -p cairn --example expired_lease`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Dequeue, Push, Queue, RetryPolicy};

#[tokio::main]
async fn main() -> cairn::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let queue = Queue::open(dir.path().join("jobs.db")).await?;

    queue
        .enqueue(
            Push::new("video.encode")
                .lease_timeout(Duration::from_millis(300))
                .retry(RetryPolicy::immediate(3)),
        )
        .await?;

    let stuck = queue
        .dequeue(Dequeue::new("worker-a"))
        .await?
        .pop()
        .expect("a job is ready");
    println!(
        "worker-a took job {} and hangs without heartbeats",
        stuck.job.id
    );

    // worker-b waits; the job comes to it the moment worker-a's lease expires.
    let retried = queue
        .dequeue(Dequeue::new("worker-b").wait(Duration::from_secs(5)))
        .await?
        .pop()
        .expect("the expired job is retried");
    println!(
        "worker-b took job {} on attempt {}",
        retried.job.id, retried.job.attempt
    );

    let late = queue
        .finish(&stuck.lease, None)
        .await
        .expect_err("a stale lease is refused");
    println!("worker-a's late finish is refused: {late}");
    queue.finish(&retried.lease, None).await?;
    queue.close(Duration::from_secs(5)).await
}
