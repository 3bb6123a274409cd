//! The application's own SQLite connections to the queue's file: enqueueing in its transaction, and waking the
//! queue's waiting workers when it commits.

use rusqlite::Connection;

use crate::ops::push::{Enqueued, Push};
use crate::ops::queues::SettingsCache;
use crate::ops::{ReadyQueues, TokenSource, WriteCtx};
use crate::store::db::Db;
use crate::store::sqlite::connection;

use std::sync::Arc;

use crate::clock::to_millis;
use crate::error::{Error, Result};
use crate::queue::{Queue, tick};

impl Queue {
    #[cfg(feature = "sqlite")]
    /// Enqueues a job inside the application's own transaction on the same database file: the job exists if and
    /// only if that transaction commits.
    ///
    /// `conn` must be inside a transaction (for example a [`rusqlite::Transaction`]). Waiting workers are woken
    /// when it commits if the connection came from [`Queue::connect`] or went through [`Queue::attach`]; for any
    /// other connection, call [`Queue::wake`] after the commit.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a bad job or a connection outside a transaction; storage errors from `conn`.
    pub fn enqueue_in(&self, conn: &Connection, push: &Push) -> Result<Enqueued> {
        self.sqlite_only("enqueue_in")?;
        if conn.is_autocommit() {
            return Err(Error::invalid(
                "conn",
                "must be inside a transaction (use Connection::transaction)",
            ));
        }
        let mut ready = ReadyQueues::default();
        let mut tokens = TokenSource::new();
        let mut rotation = 0;
        // The queue's settings and options in force, read in the application's transaction.
        let db = Db::Sqlite(conn);
        let mut settings = SettingsCache::load(&db, &self.inner.defaults)?;
        let mut events = crate::ops::events::EventLog::default();
        let mut ctx = WriteCtx {
            db,
            events: &mut events,
            now_ms: to_millis(self.inner.clock.now()),
            ready: &mut ready,
            tokens: &mut tokens,
            rotation: &mut rotation,
            settings: &mut settings,
        };
        // The writer learns that a queue holds keyed jobs when it marks it; it cannot learn it from this connection.
        if push.concurrency.is_some() && !ctx.settings.get(push.queue.as_str()).keyed {
            return Err(Error::invalid(
                "concurrency",
                format!(
                    "queue {:?} has held no job with a concurrency key yet: push its first keyed job with \
                     Queue::enqueue, or set its limit per key (Queue::limit_keys), before enqueue_in",
                    push.queue
                ),
            ));
        }
        let enqueued = crate::ops::push::insert(push, &mut ctx)?;
        ctx.events
            .flush(&ctx.db, None, &ctx.settings.config.limits.name_families)?;
        Ok(enqueued)
    }

    #[cfg(feature = "sqlite")]
    /// Opens a new read-write connection to the queue's file for the application's own tables and
    /// [`Queue::enqueue_in`], set up as by [`Queue::attach`].
    ///
    /// # Errors
    /// Storage errors.
    pub fn connect(&self) -> Result<Connection> {
        self.sqlite_only("connect")?;
        let mut conn = Connection::open(&self.inner.path)
            .map_err(|e| Error::storage(format!("opening {}", self.inner.path.display()), e))?;
        self.attach(&mut conn)?;
        Ok(conn)
    }

    #[cfg(feature = "sqlite")]
    /// Sets up an application connection to the queue's file: a busy timeout (so it waits for the queue's writer
    /// instead of failing), foreign keys, and a commit hook that wakes waiting workers after each commit. The hook
    /// replaces any commit hook the application set.
    ///
    /// # Errors
    /// Storage errors.
    pub fn attach(&self, conn: &mut Connection) -> Result<()> {
        self.sqlite_only("attach")?;
        connection::apply_common(conn)?;
        let weak = Arc::downgrade(&self.inner);
        conn.commit_hook(Some(move || {
            tick(&weak);
            false
        }))?;
        Ok(())
    }
}
