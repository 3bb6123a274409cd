//! The syncer thread: makes committed batches durable without holding up the writer.
//!
//! The writer commits with `synchronous=NORMAL` (in WAL mode: no fsync per commit; SQLite still syncs around
//! checkpoints, so the database is never corrupted) and hands the batch's replies here. The syncer fsyncs the
//! write-ahead log, then sends every reply queued before that fsync began. An acknowledged commit is therefore as
//! durable as with `synchronous=FULL` (its WAL frames are on disk before the reply), while the writer goes on with
//! the next batch during the fsync, and every batch committed meanwhile shares the next fsync.
//!
//! **Holding for company.** While every reply waiting for the fsync is *unhurried* (no caller waits on it to go
//! on: a [`Worker`](crate::Worker)'s finishes, whose slots are free already), the syncer holds the fsync for at
//! most [`GATHER`], until [`ENOUGH_OPS`] durable operations wait, so that the finishes of the jobs the worker runs
//! meanwhile share it: a worker then pays one fsync for a dozen jobs or more rather than a few. A hurried reply
//! (any other caller's) ends the hold at once, so a caller that waits on its answer never waits for company; while
//! holding, the syncer is woken only by such a reply, by enough operations, or by the stop, not by every reply. What
//! the held batches tell after their replies (the waits on the jobs they ended, the event stream) is held with them.

use std::fs::File;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Replies to send once the WAL is on disk; given the fsync's error if it failed.
pub(crate) type Replies = Box<dyn FnOnce(Option<&Error>) + Send>;

/// The longest the syncer holds an fsync for company.
const GATHER: Duration = Duration::from_millis(1);

/// Enough durable operations for one fsync: the syncer holds it no longer once this many wait. Half of the finishes a
/// worker may leave unanswered before it stops taking jobs (`MIN_UNANSWERED_FINISHES` in `worker/run_loop.rs`).
const ENOUGH_OPS: usize = 16;

/// What waits for the syncer, and whether it is holding an fsync for company.
#[derive(Default)]
struct Waiting {
    replies: Vec<Replies>,
    /// The durable operations the replies answer.
    ops: usize,
    /// Some reply's caller waits on it to go on.
    hurried: bool,
    stop: bool,
    /// The syncer is holding an fsync: only a reason to end the hold wakes it, not every reply (each wake-up is a
    /// context switch, which on a busy machine costs more than the hold saves).
    holding: bool,
}

impl Waiting {
    fn ends_hold(&self) -> bool {
        self.hurried || self.stop || self.ops >= ENOUGH_OPS
    }
}

struct Shared {
    waiting: Mutex<Waiting>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.waiting
            .lock()
            .expect("the syncer's lock is never poisoned")
    }
}

/// The handle the writer keeps.
pub(crate) struct Syncer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    failure: Arc<Mutex<Option<Error>>>,
}

impl Syncer {
    /// Starts the syncer for the WAL file `wal`.
    pub fn start(wal: File) -> Result<Syncer> {
        let shared = Arc::new(Shared {
            waiting: Mutex::new(Waiting::default()),
            wake: Condvar::new(),
        });
        let failure = Arc::new(Mutex::new(None));
        let (theirs, sticky) = (shared.clone(), failure.clone());
        let thread = std::thread::Builder::new()
            .name("cairn-syncer".into())
            .spawn(move || run(&wal, &theirs, &sticky))
            .map_err(|e| Error::storage("starting the syncer thread", e))?;
        Ok(Syncer {
            shared,
            thread: Some(thread),
            failure,
        })
    }

    /// The fsync failure, once one happened. It is permanent: after a failed fsync the kernel may have dropped the
    /// unwritten pages, so no later commit can be promised durable; the queue must be reopened (which recovers from
    /// what is really on disk).
    pub fn failure(&self) -> Option<Error> {
        self.failure
            .lock()
            .expect("failure lock is never poisoned")
            .clone()
    }

    /// Queues the replies of `ops` durable operations to send after the next fsync; `hurried` when a caller waits
    /// on one of them to go on.
    pub fn after_sync(&self, replies: Replies, ops: usize, hurried: bool) {
        let mut waiting = self.shared.lock();
        if waiting.stop {
            // The syncer has been told to stop (the writer stops first, so this is a bug): fail safe.
            drop(waiting);
            replies(Some(&Error::new(
                crate::ErrorKind::Storage,
                "the syncer thread has stopped",
            )));
            return;
        }
        waiting.replies.push(replies);
        waiting.ops += ops;
        waiting.hurried |= hurried;
        if !waiting.holding || waiting.ends_hold() {
            self.shared.wake.notify_one();
        }
    }

    /// Sends every queued reply (after a last fsync) and stops.
    pub fn stop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(wal: &File, shared: &Shared, failure: &Mutex<Option<Error>>) {
    loop {
        let (replies, stop) = next_round(shared);
        if !replies.is_empty() {
            let error = sync(wal, failure);
            for replies in replies {
                replies(error.as_ref());
            }
        }
        if stop {
            return;
        }
    }
}

/// Waits for replies, holds for company while every one is unhurried (see the module's notes), and takes them all,
/// with whether the syncer must stop after this round.
fn next_round(shared: &Shared) -> (Vec<Replies>, bool) {
    let mut waiting = shared.lock();
    while waiting.replies.is_empty() && !waiting.stop {
        waiting = shared
            .wake
            .wait(waiting)
            .expect("the syncer's lock is never poisoned");
    }
    if !waiting.ends_hold() {
        let deadline = Instant::now() + GATHER;
        waiting.holding = true;
        while !waiting.ends_hold() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            waiting = shared
                .wake
                .wait_timeout(waiting, left)
                .expect("the syncer's lock is never poisoned")
                .0;
        }
        waiting.holding = false;
    }
    let taken = std::mem::take(&mut waiting.replies);
    let stop = waiting.stop;
    *waiting = Waiting {
        stop,
        ..Waiting::default()
    };
    (taken, stop)
}

/// Fsyncs the WAL, or gives the failure of an earlier fsync (which is permanent).
fn sync(wal: &File, failure: &Mutex<Option<Error>>) -> Option<Error> {
    let known = failure
        .lock()
        .expect("failure lock is never poisoned")
        .clone();
    known.or_else(|| {
        let e = wal.sync_data().err()?;
        tracing::error!(error = %e, "fsync of the write-ahead log failed; the queue refuses writes until reopened");
        let e = Error::storage(
            "syncing the write-ahead log failed; the outcome of this request is unknown, and the queue must be reopened",
            e,
        );
        *failure.lock().expect("failure lock is never poisoned") = Some(e.clone());
        Some(e)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// A reply that reports, once, whether it was given an error.
    fn reply(answers: &mpsc::Sender<(usize, bool)>, n: usize) -> Replies {
        let answers = answers.clone();
        Box::new(move |error: Option<&Error>| {
            let _ = answers.send((n, error.is_some()));
        })
    }

    fn syncer() -> (tempfile::TempDir, Syncer) {
        let dir = tempfile::tempdir().unwrap();
        let wal = File::create(dir.path().join("wal")).unwrap();
        (dir, Syncer::start(wal).unwrap())
    }

    #[test]
    fn every_reply_is_answered_once_whether_hurried_unhurried_or_queued_at_the_stop() {
        let (_dir, mut syncer) = syncer();
        let (answers, answered) = mpsc::channel();
        // Unhurried replies may be held for company; hurried ones go at the next fsync. Some are still queued, or
        // held, when the syncer is told to stop.
        for n in 0..200 {
            syncer.after_sync(reply(&answers, n), 1 + n % 3, n % 5 == 0);
        }
        syncer.stop();
        drop(answers);
        let mut got: Vec<(usize, bool)> = answered.iter().collect();
        got.sort_unstable();
        assert_eq!(got, (0..200).map(|n| (n, false)).collect::<Vec<_>>());
    }

    #[test]
    fn an_unhurried_reply_alone_is_answered_once_its_hold_ends_with_nothing_else_coming() {
        let (_dir, mut syncer) = syncer();
        let (answers, answered) = mpsc::channel();
        syncer.after_sync(reply(&answers, 1), 1, false);
        // Nothing else comes: the hold ends by itself (at most GATHER), with no stop.
        assert_eq!(
            answered.recv_timeout(Duration::from_secs(10)).unwrap(),
            (1, false)
        );
        syncer.after_sync(reply(&answers, 2), 1, true);
        assert_eq!(
            answered.recv_timeout(Duration::from_secs(10)).unwrap(),
            (2, false)
        );
        syncer.stop();
    }
}
