//! Priorities: higher runs first, then earlier run_at, then the order of enqueueing.
//!
//! Run with `cargo run -p cairn --example priority`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Dequeue, Push, Queue};

#[tokio::main]
async fn main() -> cairn::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let queue = Queue::open(dir.path().join("jobs.db")).await?;

    // Bedrock's conventional levels: 0 low, 500 medium, 1000 high.
    for (name, priority) in [
        ("nightly.report", 0),
        ("invoice.send", 500),
        ("password.reset", 1000),
        ("cleanup", 0),
    ] {
        queue.enqueue(Push::new(name).priority(priority)).await?;
    }

    let mut order = Vec::new();
    while let Some(claimed) = queue.dequeue(Dequeue::new("example-worker")).await?.pop() {
        println!("{:>5}  {}", claimed.job.priority, claimed.job.name);
        order.push(claimed.job.name.to_string());
        queue.finish(&claimed.lease, None).await?;
    }
    assert_eq!(
        order,
        [
            "password.reset",
            "invoice.send",
            "nightly.report",
            "cleanup"
        ]
    );
    queue.close(Duration::from_secs(5)).await
}
