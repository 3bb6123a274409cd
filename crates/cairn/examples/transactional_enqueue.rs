//! Enqueueing in the application's own transaction: the job exists if and only if the application's write commits,
//! and a waiting worker gets it the moment the transaction commits.
//!
//! Run with `cargo run -p cairn --example transactional_enqueue`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Dequeue, JobFilter, Push, Queue};
use serde_json::json;

#[tokio::main]
async fn main() -> cairn::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let queue = Queue::open(dir.path().join("shop.db")).await?;

    // The application's own connection to the same file, with its own table.
    let mut conn = queue.connect()?;
    conn.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")?;

    // A failed checkout: the order and its job roll back together.
    let tx = conn.transaction()?;
    tx.execute("INSERT INTO orders (item) VALUES ('teapot')", [])?;
    queue.enqueue_in(
        &tx,
        &Push::new("order.ship").data(json!({ "item": "teapot" })),
    )?;
    tx.rollback()?;
    assert!(queue.list(JobFilter::default()).await?.jobs.is_empty());
    println!("rolled back: no order, no job");

    // A worker waiting for shipping jobs.
    let waiting = {
        let queue = queue.clone();
        tokio::spawn(async move {
            queue
                .dequeue(Dequeue::new("shipper").wait(Duration::from_secs(10)))
                .await
        })
    };

    // A successful checkout: the job is committed with the order, and the worker wakes.
    let tx = conn.transaction()?;
    tx.execute("INSERT INTO orders (item) VALUES ('kettle')", [])?;
    let job = queue.enqueue_in(
        &tx,
        &Push::new("order.ship").data(json!({ "item": "kettle" })),
    )?;
    tx.commit()?;
    let claimed = waiting
        .await
        .expect("the waiting task runs")?
        .pop()
        .expect("the worker got the job");
    assert_eq!(claimed.job.id, job.id);
    println!(
        "committed: the worker got job {} for {}",
        claimed.job.id, claimed.job.data["item"]
    );
    queue.finish(&claimed.lease, None).await?;
    queue.close(Duration::from_secs(5)).await
}
