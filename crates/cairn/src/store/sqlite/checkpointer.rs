//! The checkpointer thread: folds the write-ahead log back into the database file without holding up the writer.
//!
//! SQLite's own automatic checkpoint runs inside the commit that grows the WAL past 1,000 pages, on the committing
//! connection: the writer thread copied pages and waited for the database file's fsync, a tenth of its time in a
//! batch-enqueue profile and the slowest commits of every run. Here the writer's connection has a WAL hook instead
//! of that checkpoint: each time the log has grown by [`CHECKPOINT_AFTER`] pages it wakes this thread, which
//! checkpoints on a connection of its own (`PASSIVE`: it copies what no reader still needs, never waits, and runs beside the writer's commits).
//!
//! SQLite starts the WAL again from its beginning only when a write transaction begins with every frame copied back.
//! A writer that never pauses begins its next transaction while the checkpoint of its last commit still runs, so it
//! never sees that: the WAL would grow for as long as the load lasts. So past [`CHECKPOINT_INLINE_AFTER`] pages
//! the writer checkpoints inline, as SQLite would have. By then the checkpointer has copied all but the last few
//! commits, so the writer copies those and waits for the fsyncs, once per [`CHECKPOINT_INLINE_AFTER`] pages rather
//! than copying everything once per [`CHECKPOINT_AFTER`].
//!
//! A checkpoint syncs the WAL before it copies and the database file after (`synchronous=NORMAL`), so it never
//! makes a commit less durable than the syncer made it.

use std::ffi::c_int;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::error::{Error, Result};

/// WAL pages past which a commit wakes the checkpointer: SQLite's default for its automatic checkpoint.
pub(crate) const CHECKPOINT_AFTER: c_int = 1000;

/// WAL pages past which the writer checkpoints inline (4 times [`CHECKPOINT_AFTER`]: 16 MiB with 4 KiB pages).
pub(crate) const CHECKPOINT_INLINE_AFTER: c_int = 4 * CHECKPOINT_AFTER;

enum Request {
    Checkpoint,
    Stop,
}

/// The handle the writer's connection keeps. Dropping it stops the thread.
pub(crate) struct Checkpointer {
    requests: SyncSender<Request>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Opens a connection of its own to `path`, starts the thread, and replaces `writer`'s automatic checkpoint
    /// with a hook that wakes it.
    pub fn start(path: &Path, writer: &mut Connection) -> Result<Checkpointer> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| Error::storage(format!("opening {} to checkpoint", path.display()), e))?;
        // A connection learns that the file is in WAL mode when it first reads it; until then a checkpoint finds
        // no log and does nothing.
        super::connection::require_wal(&conn, path, "PRAGMA journal_mode")?;
        // One request waiting is enough: a checkpoint copies everything committed before it starts.
        let (requests, rx) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("cairn-checkpointer".into())
            .spawn(move || run(&conn, &rx))
            .map_err(|e| Error::storage("starting the checkpointer thread", e))?;
        let wake = requests.clone();
        // The log's size when the checkpointer was last woken: it is woken again once the log has grown by
        // CHECKPOINT_AFTER pages since, not at every commit past it (each checkpoint costs two fsyncs).
        let mut woken_at: c_int = 0;
        writer
            .wal_hook(Some(move |wal: &mut Wal, pages: c_int| {
                if pages < woken_at {
                    // The log started again from its beginning.
                    woken_at = 0;
                }
                if pages >= CHECKPOINT_INLINE_AFTER {
                    // Busy (the checkpointer is at it) is not a failure: the next commit tries again.
                    if let Err(e) = wal.checkpoint_v2(CheckpointMode::PASSIVE)
                        && e.sqlite_error_code() != Some(ErrorCode::DatabaseBusy)
                    {
                        tracing::warn!(error = %e, pages, "the writer's own checkpoint failed");
                    }
                } else if pages >= woken_at + CHECKPOINT_AFTER {
                    woken_at = pages;
                    // Full: a checkpoint is already asked for. Gone: the queue is closing.
                    let _ = wake.try_send(Request::Checkpoint);
                }
                // The commit is done whatever the checkpoint did: never report it as failed.
                Ok(())
            }))
            .map_err(|e| Error::storage("setting the WAL hook", e))?;
        Ok(Checkpointer {
            requests,
            thread: Some(thread),
        })
    }

    /// Stops the thread after the checkpoint it is running, if any.
    pub fn stop(&mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = self.requests.send(Request::Stop);
            let _ = thread.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(conn: &Connection, rx: &Receiver<Request>) {
    while let Ok(Request::Checkpoint) = rx.recv() {
        match conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE) {
            Ok(_) => {}
            // The writer checkpointing inline at the same moment.
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {}
            // Left to the next wake-up, or to the writer's own checkpoint past CHECKPOINT_INLINE_AFTER.
            Err(e) => tracing::warn!(error = %e, "checkpointing the write-ahead log failed"),
        }
    }
}
