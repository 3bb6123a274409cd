//! The smallest useful program: open a queue, enqueue jobs, run a worker until they are done.
//!
//! Run with `cargo run -p cairn --example simple`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Push, Queue, Worker};
use serde_json::json;
use tokio::sync::mpsc;

#[tokio::main]
async fn main() -> cairn::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let queue = Queue::open(dir.path().join("jobs.db")).await?;

    for to in ["ada@example.com", "grace@example.com", "edsger@example.com"] {
        queue
            .enqueue(Push::new("email.send").data(json!({ "to": to })))
            .await?;
    }

    let (done, mut finished) = mpsc::unbounded_channel();
    let worker = Worker::builder(&queue, "example-worker")
        .handler("email.send", move |job| {
            let done = done.clone();
            async move {
                println!("sending an email to {}", job.data()["to"]);
                let _ = done.send(job.id());
                Ok(())
            }
        })
        .start()?;

    for _ in 0..3 {
        finished.recv().await.expect("the worker reports each job");
    }
    let report = worker.stop(Duration::from_secs(5)).await?;
    println!("finished {} jobs", report.finished);
    queue.close(Duration::from_secs(5)).await
}
