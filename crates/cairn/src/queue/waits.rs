//! Reading a job, and waiting for it to end: woken by the commit that ends it, on PostgreSQL whichever node does.

use std::time::Duration;

use crate::clock::to_millis;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::names::JobId;
use crate::ops::rows;
use crate::queue::Queue;

impl Queue {
    /// What [`Jobs::get`](crate::Jobs::get) runs embedded.
    pub(crate) async fn load_job(&self, job: JobId) -> Result<Job> {
        self.inner
            .readers
            .read(move |conn| rows::load_job_with_history(conn, job))
            .await
    }

    /// What [`Jobs::wait`](crate::Jobs::wait) runs embedded.
    pub(crate) async fn wait_until_ended(&self, job: JobId, timeout: Duration) -> Result<Job> {
        if timeout > crate::ops::claim::MAX_WAIT {
            return Err(Error::invalid(
                "wait",
                format!(
                    "must be at most {:?}, got {timeout:?}",
                    crate::ops::claim::MAX_WAIT
                ),
            ));
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let watch = self.inner.job_watch.watch(job.0);
        // On PostgreSQL another node may end the job: the wait is registered in the database too, until a minute
        // past its time (a node that stops without taking it back leaves it that long).
        let registered = self.inner.readers.capabilities().shared_by_nodes.then(|| {
            let until = to_millis(self.inner.clock.now()) + timeout.as_millis() as i64 + 60_000;
            crate::ops::watch::WatchJob {
                job,
                until_ms: until,
            }
        });
        // Takes the registration back however the wait ends, a caller that stops waiting (a client gone) included.
        let mut unwatch = Unwatch {
            queue: self,
            job,
            waiter: None,
        };
        let waited = async {
            let mut register = registered;
            loop {
                let woken = watch.notify.notified();
                tokio::pin!(woken);
                // Enabled before the job is read: an end committed after the read wakes it.
                woken.as_mut().enable();
                if self.inner.job_watch.is_closed() {
                    return Err(Error::closed());
                }
                if let Some(op) = register.take() {
                    let registered = self.write(op).await?;
                    unwatch.waiter = registered.map(|(_, waiter)| waiter);
                    match registered {
                        None => return Err(Error::not_found(format!("job {job}"))),
                        Some((state, _)) if state.is_live() => {}
                        Some(_) => return self.load_job(job).await,
                    }
                } else {
                    let current = self.load_job(job).await?;
                    if current.state.is_finished() || tokio::time::Instant::now() >= deadline {
                        return Ok(current);
                    }
                }
                tokio::select! {
                    () = &mut woken => {}
                    () = tokio::time::sleep_until(deadline) => return self.load_job(job).await,
                }
            }
        }
        .await;
        drop(unwatch);
        waited
    }
}

/// A wait's registration on PostgreSQL, taken back when the wait ends, however it ends: in the writer's next batch,
/// which the caller does not wait for.
struct Unwatch<'q> {
    queue: &'q Queue,
    job: JobId,
    waiter: Option<i64>,
}

impl Drop for Unwatch<'_> {
    fn drop(&mut self) {
        let (Some(waiter), Ok(runtime)) = (self.waiter, tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (queue, job) = (self.queue.clone(), self.job);
        runtime.spawn(async move {
            let _ = queue
                .write(crate::ops::watch::UnwatchJob { job, waiter })
                .await;
        });
    }
}
