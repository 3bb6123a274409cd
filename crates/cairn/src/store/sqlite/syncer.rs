//! The syncer thread: makes committed batches durable without holding up the writer.
//!
//! The writer commits with `synchronous=NORMAL` (in WAL mode: no fsync per commit; SQLite still syncs around
//! checkpoints, so the database is never corrupted) and hands the batch's replies here. The syncer fsyncs the
//! write-ahead log, then sends every reply queued before that fsync began. An acknowledged commit is therefore as
//! durable as with `synchronous=FULL` (its WAL frames are on disk before the reply), while the writer goes on with
//! the next batch during the fsync, and every batch committed meanwhile shares the next fsync.
//!
//! **Gathering.** The syncer may hold an fsync for at most [`GATHER`], so that batches committed meanwhile share it:
//! - while every reply waiting for it is *unhurried*: no caller waits on it to go on (a worker's finishes, whose
//!   slots are free already: `worker/run_loop.rs`). A worker then pays one fsync for dozens of jobs, not a few.
//! - while the writer is still busy, when durable batches come faster than fsyncs (some arrived while the last one
//!   ran): the batch it is committing will likely share the fsync.
//!
//! Otherwise it syncs at once: when the writer has nothing left to do, every caller with something to say is
//! waiting for this fsync, and holding it would only add to their wait. A lone caller, whose next write waits for
//! this one's answer, never meets a held fsync.
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Replies to send once the WAL is on disk; given the fsync's error if it failed.
pub(crate) type Replies = Box<dyn FnOnce(Option<&Error>) + Send>;

/// The longest the syncer holds an fsync for the batches the writer is still committing.
const GATHER: Duration = Duration::from_millis(1);

/// Enough durable operations for one fsync: the syncer holds it no longer once this many wait. Half of the finishes a
/// worker may leave unanswered before it stops taking jobs (`MIN_UNANSWERED_FINISHES` in `worker/run_loop.rs`), so
/// that a worker never waits for its answers while the syncer waits for its finishes.
const ENOUGH_OPS: usize = 16;

enum Request {
    /// Replies to send after the next fsync, of `ops` durable operations; `hurried` when a caller waits on one of
    /// them to go on.
    Replies {
        replies: Replies,
        ops: usize,
        hurried: bool,
    },
    /// The writer has run out of work while the syncer was gathering: sync now.
    WriterIdle,
    Stop,
}

/// What the writer and the syncer tell each other about gathering (see the module's notes). Both flags are read
/// and written with `SeqCst`: the syncer sets `gathering` then reads `writer_idle`, the writer sets `writer_idle`
/// then reads `gathering`, so at least one of them sees the other, and a syncer never gathers while the writer
/// sleeps without being told.
#[derive(Default)]
struct Gathering {
    gathering: AtomicBool,
    writer_idle: AtomicBool,
}

/// The handle the writer keeps.
pub(crate) struct Syncer {
    requests: Sender<Request>,
    thread: Option<JoinHandle<()>>,
    failure: Arc<Mutex<Option<Error>>>,
    gathering: Arc<Gathering>,
}

impl Syncer {
    /// Starts the syncer for the WAL file `wal`.
    pub fn start(wal: File) -> Result<Syncer> {
        let (requests, rx) = channel();
        let failure = Arc::new(Mutex::new(None));
        let sticky = failure.clone();
        let gathering = Arc::new(Gathering::default());
        let shared = gathering.clone();
        let thread = std::thread::Builder::new()
            .name("cairn-syncer".into())
            .spawn(move || run(wal, rx, sticky, &shared))
            .map_err(|e| Error::storage("starting the syncer thread", e))?;
        Ok(Syncer {
            requests,
            thread: Some(thread),
            failure,
            gathering,
        })
    }

    /// The writer is about to wait for work (`true`), or has work again (`false`). Costs an atomic store, and a
    /// message only when the syncer is gathering.
    pub fn writer_idle(&self, idle: bool) {
        self.gathering.writer_idle.store(idle, Ordering::SeqCst);
        if idle && self.gathering.gathering.load(Ordering::SeqCst) {
            let _ = self.requests.send(Request::WriterIdle);
        }
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
        if let Err(std::sync::mpsc::SendError(Request::Replies { replies, .. })) =
            self.requests.send(Request::Replies {
                replies,
                ops,
                hurried,
            })
        {
            // The syncer is gone (it only stops when told to, so this is a bug): fail safe, reply with an error.
            replies(Some(&Error::new(
                crate::ErrorKind::Storage,
                "the syncer thread has stopped",
            )));
        }
    }

    /// Sends every queued reply (after a last fsync) and stops.
    pub fn stop(&mut self) {
        let _ = self.requests.send(Request::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(
    wal: File,
    rx: Receiver<Request>,
    failure: Arc<Mutex<Option<Error>>>,
    gathering: &Gathering,
) {
    // Replies that came while the last fsync ran: the next round's, and the sign that batches come faster than
    // fsyncs.
    let mut early: Vec<Request> = Vec::new();
    loop {
        let mut pending = std::mem::take(&mut early);
        let early_round = !pending.is_empty();
        if pending.is_empty() {
            match rx.recv() {
                Ok(Request::WriterIdle) => continue,
                Ok(first) => pending.push(first),
                Err(_) => return,
            }
            pending.extend(rx.try_iter());
        } else {
            pending.extend(rx.try_iter());
        }
        gather(&rx, &mut pending, !early_round, gathering);
        let known = failure
            .lock()
            .expect("failure lock is never poisoned")
            .clone();
        let error = known.or_else(|| {
            let e = wal.sync_data().err()?;
            tracing::error!(error = %e, "fsync of the write-ahead log failed; the queue refuses writes until reopened");
            let e = Error::storage(
                "syncing the write-ahead log failed; the outcome of this request is unknown, and the queue must be reopened",
                e,
            );
            *failure.lock().expect("failure lock is never poisoned") = Some(e.clone());
            Some(e)
        });
        early.extend(rx.try_iter().filter(|r| !matches!(r, Request::WriterIdle)));
        let mut stop = false;
        for request in pending {
            match request {
                Request::Replies { replies, .. } => replies(error.as_ref()),
                Request::WriterIdle => {}
                Request::Stop => stop = true,
            }
        }
        if stop {
            if early.is_empty() {
                return;
            }
            // Replies that came during the last fsync get one of their own first.
            early.push(Request::Stop);
        }
    }
}

/// Adds to `pending` the replies of batches committed for at most [`GATHER`] and until [`ENOUGH_OPS`] wait, while
/// every reply is unhurried, or while the writer is busy unless `alone` (no batch came during the last fsync).
fn gather(rx: &Receiver<Request>, pending: &mut Vec<Request>, alone: bool, gathering: &Gathering) {
    let unhurried = |pending: &[Request]| {
        pending.iter().all(|r| match r {
            Request::Replies { hurried, .. } => !hurried,
            Request::WriterIdle => true,
            Request::Stop => false,
        })
    };
    let stopping = |pending: &[Request]| pending.iter().any(|r| matches!(r, Request::Stop));
    if stopping(pending) || (alone && !unhurried(pending)) {
        return;
    }
    let ops = |pending: &[Request]| -> usize {
        pending
            .iter()
            .map(|r| match r {
                Request::Replies { ops, .. } => *ops,
                _ => 0,
            })
            .sum()
    };
    let deadline = Instant::now() + GATHER;
    gathering.gathering.store(true, Ordering::SeqCst);
    loop {
        if ops(pending) >= ENOUGH_OPS {
            break;
        }
        let writer_busy = !alone && !gathering.writer_idle.load(Ordering::SeqCst);
        if !(writer_busy || unhurried(pending)) {
            break;
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            break;
        };
        match rx.recv_timeout(left) {
            Ok(Request::WriterIdle) => {}
            Ok(request) => {
                pending.push(request);
                if stopping(pending) {
                    break;
                }
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
        }
    }
    gathering.gathering.store(false, Ordering::SeqCst);
}
