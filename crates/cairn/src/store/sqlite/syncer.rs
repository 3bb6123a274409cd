//! The syncer thread: makes committed batches durable without holding up the writer.
//!
//! The writer commits with `synchronous=NORMAL` (in WAL mode: no fsync per commit; SQLite still syncs around
//! checkpoints, so the database is never corrupted) and hands the batch's replies here. The syncer fsyncs the
//! write-ahead log, then sends every reply queued before that fsync began. An acknowledged commit is therefore as
//! durable as with `synchronous=FULL` (its WAL frames are on disk before the reply), while the writer goes on with
//! the next batch during the fsync, and every batch committed meanwhile shares the next fsync.

use std::fs::File;
use std::sync::mpsc::{Receiver, Sender, channel};
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
}

impl Syncer {
    /// Starts the syncer for the WAL file `wal`.
    pub fn start(wal: File) -> Result<Syncer> {
        let (requests, rx) = channel();
        let thread = std::thread::Builder::new()
            .name("cairn-syncer".into())
            .spawn(move || run(wal, rx))
            .map_err(|e| Error::storage("starting the syncer thread", e))?;
        Ok(Syncer {
            requests,
            thread: Some(thread),
        })
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

fn run(wal: File, rx: Receiver<Request>) {
    while let Ok(first) = rx.recv() {
        let mut pending = vec![first];
        pending.extend(rx.try_iter());
        let error = wal.sync_data().err().map(|e| {
            tracing::error!(error = %e, "fsync of the write-ahead log failed; replying with errors");
            Error::storage("syncing the write-ahead log", e)
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
