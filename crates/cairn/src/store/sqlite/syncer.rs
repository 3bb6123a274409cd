//! The syncer thread: makes committed batches durable without holding up the writer.
//!
//! The writer commits with `synchronous=NORMAL` (in WAL mode: no fsync per commit; SQLite still syncs around
//! checkpoints, so the database is never corrupted) and hands the batch's replies here. The syncer fsyncs the
//! write-ahead log, then sends every reply queued before that fsync began. An acknowledged commit is therefore as
//! durable as with `synchronous=FULL` (its WAL frames are on disk before the reply), while the writer goes on with
//! the next batch during the fsync, and every batch committed meanwhile shares the next fsync.

use std::fs::File;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};

/// Replies to send once the WAL is on disk; given the fsync's error if it failed.
pub(crate) type Replies = Box<dyn FnOnce(Option<&Error>) + Send>;

enum Request {
    Replies(Replies),
    Stop,
}

/// The handle the writer keeps.
pub(crate) struct Syncer {
    requests: Sender<Request>,
    thread: Option<JoinHandle<()>>,
    failure: Arc<Mutex<Option<Error>>>,
}

impl Syncer {
    /// Starts the syncer for the WAL file `wal`.
    pub fn start(wal: File) -> Result<Syncer> {
        let (requests, rx) = channel();
        let failure = Arc::new(Mutex::new(None));
        let sticky = failure.clone();
        let thread = std::thread::Builder::new()
            .name("cairn-syncer".into())
            .spawn(move || run(wal, rx, sticky))
            .map_err(|e| Error::storage("starting the syncer thread", e))?;
        Ok(Syncer {
            requests,
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

    /// Queues replies to send after the next fsync.
    pub fn after_sync(&self, replies: Replies) {
        if let Err(std::sync::mpsc::SendError(Request::Replies(replies))) =
            self.requests.send(Request::Replies(replies))
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

fn run(wal: File, rx: Receiver<Request>, failure: Arc<Mutex<Option<Error>>>) {
    while let Ok(first) = rx.recv() {
        let mut pending = vec![first];
        pending.extend(rx.try_iter());
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
        let mut stop = false;
        for request in pending {
            match request {
                Request::Replies(replies) => replies(error.as_ref()),
                Request::Stop => stop = true,
            }
        }
        if stop {
            return;
        }
    }
}
