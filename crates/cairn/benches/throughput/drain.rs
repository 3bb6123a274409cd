//! The dequeue+finish workload: workers built on the raw `Jobs::dequeue`/`Jobs::finish` API (not the Worker API),
//! each keeping up to `slots` no-op jobs in flight, until a known number of jobs has been finished.

use cairn::Jobs;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cairn::{Dequeue, Queue};
use tokio::task::JoinSet;

use crate::BenchResult;

/// How long an idle worker's dequeue waits before it looks at whether the run is over.
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// Shared by the workers: how many jobs are finished, and when the last one was.
struct Progress {
    total: u64,
    finished: AtomicU64,
    end: OnceLock<Instant>,
}

impl Progress {
    fn record_finish(&self) {
        if self.finished.fetch_add(1, Ordering::Relaxed) + 1 == self.total {
            let _ = self.end.set(Instant::now());
        }
    }

    fn is_done(&self) -> bool {
        self.finished.load(Ordering::Relaxed) >= self.total
    }
}

/// Runs `workers` workers of `slots` slots on the `default` queue until `total` jobs are finished. Returns the time
/// from start to the last finish, and the latency of each finish call.
pub async fn drain(
    queue: &Queue,
    total: u64,
    workers: usize,
    slots: usize,
) -> BenchResult<(Duration, Vec<Duration>)> {
    drain_named(queue, total, workers, slots, &[]).await
}

/// [`drain`] with dequeues that ask for jobs whose names match `names` (GLOB patterns; any name when empty).
pub async fn drain_named(
    queue: &Queue,
    total: u64,
    workers: usize,
    slots: usize,
    names: &[&str],
) -> BenchResult<(Duration, Vec<Duration>)> {
    let progress = Arc::new(Progress {
        total,
        finished: AtomicU64::new(0),
        end: OnceLock::new(),
    });
    let start = Instant::now();
    let mut set = JoinSet::new();
    for id in 0..workers {
        set.spawn(run_worker(
            queue.clone(),
            format!("bench-{id}"),
            slots,
            names.iter().map(|n| (*n).to_owned()).collect(),
            progress.clone(),
        ));
    }
    let mut samples = Vec::new();
    while let Some(done) = set.join_next().await {
        samples.extend(done??);
    }
    let end = *progress
        .end
        .get()
        .ok_or("the workers stopped before every job was finished")?;
    Ok((end - start, samples))
}

type FinishTasks = JoinSet<cairn::Result<Duration>>;

/// One worker: dequeue up to its free slots (waiting when none is ready), spawn a finish per job.
async fn run_worker(
    queue: Queue,
    name: String,
    slots: usize,
    names: Vec<String>,
    progress: Arc<Progress>,
) -> BenchResult<Vec<Duration>> {
    let mut running: FinishTasks = JoinSet::new();
    let mut samples = Vec::new();
    loop {
        while let Some(done) = running.try_join_next() {
            samples.push(done??);
        }
        if progress.is_done() {
            break;
        }
        let free = slots - running.len();
        if free == 0 {
            let done = running.join_next().await.ok_or("no finish in flight")?;
            samples.push(done??);
            continue;
        }
        let request = Dequeue {
            names: names.clone(),
            ..Dequeue::new(name.as_str())
                .limit(free as u32)
                .wait(IDLE_WAIT)
        };
        for claimed in queue.dequeue(request).await? {
            let queue = queue.clone();
            let progress = progress.clone();
            running.spawn(async move {
                let t = Instant::now();
                queue.finish(&claimed.lease, None).await?;
                let latency = t.elapsed();
                progress.record_finish();
                Ok(latency)
            });
        }
    }
    while let Some(done) = running.join_next().await {
        samples.push(done??);
    }
    Ok(samples)
}
