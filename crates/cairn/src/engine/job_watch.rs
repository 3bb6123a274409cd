//! Who waits for a job to end ([`Jobs::wait`](crate::Jobs::wait)): a waiter registers the job here, and the
//! writer wakes it after each commit (once durable, for a durable batch) that ended jobs, and on PostgreSQL when
//! another node says it ended one (`cairn_job_ended`). A woken waiter reads the job again: "ended" is only a hint.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The jobs being waited for, each with one [`Notify`] its waiters share.
#[derive(Debug, Default)]
pub(crate) struct JobWatch {
    watched: Mutex<HashMap<i64, (Arc<Notify>, usize)>>,
    /// How many waits there are: a commit with none to wake costs one atomic load.
    waits: AtomicUsize,
    /// Set when the writer stops: every wait ends.
    closed: AtomicBool,
}

/// One wait for a job, registered until dropped.
pub(crate) struct Watch {
    watch: Arc<JobWatch>,
    job: i64,
    /// Woken when the job may have ended.
    pub notify: Arc<Notify>,
}

impl JobWatch {
    /// Registers a wait for `job`.
    pub fn watch(self: &Arc<Self>, job: i64) -> Watch {
        let mut watched = self.lock();
        let (notify, count) = watched
            .entry(job)
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        *count += 1;
        self.waits.fetch_add(1, Ordering::SeqCst);
        Watch {
            watch: self.clone(),
            job,
            notify: notify.clone(),
        }
    }

    /// Wakes the waits for any of `jobs`, which may have ended.
    pub fn wake(&self, jobs: &[i64]) {
        if jobs.is_empty() || self.waits.load(Ordering::SeqCst) == 0 {
            return;
        }
        let watched = self.lock();
        for job in jobs {
            if let Some((notify, _)) = watched.get(job) {
                notify.notify_waiters();
            }
        }
    }

    /// Wakes every wait (notifications of ended jobs may have been missed).
    pub fn wake_all(&self) {
        if self.waits.load(Ordering::SeqCst) == 0 {
            return;
        }
        for (notify, _) in self.lock().values() {
            notify.notify_waiters();
        }
    }

    /// The writer stopped: wakes every wait, and [`JobWatch::is_closed`] tells them why.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for (notify, _) in self.lock().values() {
            notify.notify_waiters();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (Arc<Notify>, usize)>> {
        self.watched
            .lock()
            .expect("the job watch's lock is never poisoned")
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut watched = self.watch.lock();
        if let Some((_, count)) = watched.get_mut(&self.job) {
            *count -= 1;
            if *count == 0 {
                watched.remove(&self.job);
            }
        }
        self.watch.waits.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_reaches_the_waits_for_its_jobs_only() {
        let watch = Arc::new(JobWatch::default());
        let (one, two) = (watch.watch(1), watch.watch(2));
        {
            let (woken_one, woken_two) = (one.notify.notified(), two.notify.notified());
            tokio::pin!(woken_one, woken_two);
            woken_one.as_mut().enable();
            woken_two.as_mut().enable();
            watch.wake(&[1, 3]);
            assert!(futures_now(woken_one.as_mut()));
            assert!(!futures_now(woken_two.as_mut()));
        }
        drop((one, two));
        assert!(watch.lock().is_empty());
        assert_eq!(watch.waits.load(Ordering::SeqCst), 0);
    }

    /// Whether `future` is ready at once.
    fn futures_now<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        future.poll(&mut cx).is_ready()
    }
}
