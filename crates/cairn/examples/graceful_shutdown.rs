//! Graceful shutdown: on Ctrl-C (or after two seconds here), the worker takes no new jobs, lets running jobs
//! finish until a deadline, and gives back the ones that did not, without counting their attempt.
//!
//! Run with `cargo run -p cairn --example graceful_shutdown`.

use cairn::Jobs;
use std::time::Duration;

use cairn::{Push, Queue, Worker};

#[tokio::main]
async fn main() -> cairn::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let queue = Queue::open(dir.path().join("jobs.db")).await?;
    for seconds in [1, 1, 30] {
        queue
            .enqueue(Push::new("work").data(serde_json::json!({ "seconds": seconds })))
            .await?;
    }

    let worker = Worker::builder(&queue, "example-worker")
        .max_concurrency(3)
        .handler("work", |job| async move {
            let seconds = job.data()["seconds"].as_u64().unwrap_or(1);
            println!("job {} works for {seconds}s", job.id());
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            Ok(())
        })
        .start()?;

    tokio::select! {
        _ = tokio::signal::ctrl_c() => println!("Ctrl-C: stopping"),
        _ = tokio::time::sleep(Duration::from_secs(2)) => println!("stopping after two seconds"),
    }
    let report = worker.stop(Duration::from_secs(1)).await?;
    println!(
        "finished {}, given back {}",
        report.finished, report.released
    );
    queue.close(Duration::from_secs(5)).await
}
