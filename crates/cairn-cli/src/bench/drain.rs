//! Emptying a bench queue: takes and finishes every ready job in it. Used before a scenario that needs an empty
//! queue (jobs left by an interrupted run would end its waits at once), and after the batch scenario so that its
//! jobs do not stay queued on the server.

use anyhow::Context;
use cairn::Dequeue;
use tokio::task::JoinSet;

use super::progress;
use super::target::Target;

/// Jobs one drain call takes.
const DRAIN_LIMIT: u32 = 100;

/// Takes and finishes every ready job of `queue`, with one task per handle, until none is left. Returns how many
/// jobs it finished.
///
/// # Errors
/// A failed dequeue or finish.
pub async fn drain<T: Target>(handles: &[T], queue: &'static str) -> anyhow::Result<u64> {
    let bar = progress::spinner("cleaning up", &format!("emptying the queue {queue}"));
    let mut tasks = JoinSet::new();
    for (i, handle) in handles.iter().enumerate() {
        let handle = handle.clone();
        let bar = bar.clone();
        tasks.spawn(async move {
            let mut finished = 0u64;
            loop {
                let request = Dequeue::new(format!("bench-drain-{i}"))
                    .queue(queue)
                    .limit(DRAIN_LIMIT);
                let jobs = handle.dequeue(request).await?;
                // With no wait, nothing ready means the queue is empty: no one else adds to it meanwhile.
                if jobs.is_empty() {
                    return Ok::<_, cairn::Error>(finished);
                }
                for claimed in jobs {
                    handle.finish(&claimed.lease).await?;
                    finished += 1;
                    bar.inc(1);
                }
            }
        });
    }
    let mut total = 0;
    while let Some(done) = tasks.join_next().await {
        total += done.context("a drain task stopped")??;
    }
    bar.finish_and_clear();
    Ok(total)
}
