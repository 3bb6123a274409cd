//! Wake-up latency: a worker parked in `dequeue(.. .wait(..))`, and the time from `enqueue` returning to that
//! dequeue returning with the job. One sample at a time, so nothing else is in flight.

use cairn::Jobs;
use std::time::{Duration, Instant};

use cairn::{ClaimedJob, Dequeue, Queue};
use tokio::sync::mpsc;

use crate::BenchResult;
use crate::enqueue::job;

/// How long to let the worker's dequeue reach the writer and park before enqueueing.
const PARK_SETTLE: Duration = Duration::from_millis(3);

/// What one run measured.
pub struct Wakeups {
    /// From `enqueue` returning to the parked dequeue returning (zero when the dequeue returned first).
    pub after_enqueue: Vec<Duration>,
    /// From calling `enqueue` to the parked dequeue returning: the whole path, commit included.
    pub from_call: Vec<Duration>,
    /// How many times the dequeue returned before `enqueue` did.
    pub dequeue_first: usize,
    /// Wall time of the run (settling and cleanup included).
    pub elapsed: Duration,
}

/// Takes `samples` samples.
pub async fn measure(queue: &Queue, samples: usize) -> BenchResult<Wakeups> {
    let (ready_tx, mut ready) = mpsc::channel::<()>(1);
    let (got_tx, mut got) = mpsc::channel::<(Instant, ClaimedJob)>(1);
    let waiter = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for _ in 0..samples {
                ready_tx.send(()).await?;
                let request = Dequeue::new("bench-waiter").wait(Duration::from_secs(30));
                let jobs = queue.dequeue(request).await?;
                let returned = Instant::now();
                let claimed = jobs
                    .into_iter()
                    .next()
                    .ok_or("the wait ended without a job")?;
                got_tx.send((returned, claimed)).await?;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        })
    };

    let mut result = Wakeups {
        after_enqueue: Vec::with_capacity(samples),
        from_call: Vec::with_capacity(samples),
        dequeue_first: 0,
        elapsed: Duration::ZERO,
    };
    let start = Instant::now();
    for i in 0..samples {
        ready.recv().await.ok_or("the waiter stopped")?;
        tokio::time::sleep(PARK_SETTLE).await;
        let called = Instant::now();
        queue.enqueue(job(i as u64)).await?;
        let enqueued = Instant::now();
        let (returned, claimed) = got.recv().await.ok_or("the waiter stopped")?;
        if returned < enqueued {
            result.dequeue_first += 1;
        }
        result
            .after_enqueue
            .push(returned.saturating_duration_since(enqueued));
        result.from_call.push(returned - called);
        queue.finish(&claimed.lease, None).await?;
    }
    result.elapsed = start.elapsed();
    waiter.await??;
    Ok(result)
}
