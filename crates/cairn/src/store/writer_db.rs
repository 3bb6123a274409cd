//! The writer's connection, on either database: the seam the engine calls. How a batch's transaction begins (on
//! SQLite, waiting out another connection's write lock), how work outside a batch runs, and, on PostgreSQL, what a
//! node tells the others and whether it leads the timed work, which are PostgreSQL's own modules: its session
//! (`postgres::writer`), its lead (`postgres::leader`) and its notifications (`postgres::notify`).

use std::time::Duration;
#[cfg(feature = "sqlite")]
use std::time::Instant;

#[cfg(feature = "sqlite")]
use rusqlite::Connection;

#[cfg(feature = "sqlite")]
use crate::error::Error;
use crate::error::Result;
use crate::store::db::{Db, Sql};
#[cfg(feature = "postgres")]
use crate::store::postgres::writer::PgWriter;
#[cfg(feature = "postgres")]
use crate::store::postgres::{leader, notify};
#[cfg(feature = "sqlite")]
use crate::store::sqlite::checkpointer::Checkpointer;

/// How long a node's term as leader of the timed work lasts, by the database's clock: a node cut off from the
/// database is replaced within about this long (see `postgres::leader`).
pub(crate) const LEADER_TERM: Duration = Duration::from_secs(5);

/// How often the leader renews its term, and how often another node asks for it.
pub(crate) const LEAD_RENEWAL: Duration = Duration::from_secs(1);

/// The connection the writer thread owns.
pub(crate) enum WriterDb {
    /// The connection, and the thread that checkpoints its write-ahead log.
    #[cfg(feature = "sqlite")]
    Sqlite {
        conn: Connection,
        checkpointer: Checkpointer,
    },
    #[cfg(feature = "postgres")]
    Postgres(Box<PgWriter>),
    /// Built without a backend, there is no connection.
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    Unavailable(std::convert::Infallible),
}

#[cfg(feature = "sqlite")]
/// How long the writer keeps trying to start a transaction while another connection holds SQLite's write lock.
/// Past this, the batch fails; before it, nothing has been decided, so waiting is safe.
const BUSY_WAIT: Duration = Duration::from_secs(60);

#[cfg(feature = "sqlite")]
/// Begins SQLite's write transaction, waiting up to [`BUSY_WAIT`] while another connection holds the write lock.
fn begin_immediate(conn: &Connection) -> Result<()> {
    let started = Instant::now();
    loop {
        match conn.prepare_cached("BEGIN IMMEDIATE")?.execute([]) {
            Ok(_) => return Ok(()),
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && started.elapsed() < BUSY_WAIT =>
            {
                tracing::warn!(
                    "another connection holds the database's write lock; the queue's writer is waiting"
                );
            }
            Err(e) => return Err(Error::storage("starting a write transaction", e)),
        }
    }
}

impl WriterDb {
    /// Begins a batch's transaction. On SQLite, another connection holding the write lock (the application's own
    /// transaction, a VACUUM) makes `BEGIN IMMEDIATE` fail with "busy" after the busy timeout; the batch then waits
    /// and tries again rather than failing requests that nothing has happened to yet.
    pub fn begin(&mut self) -> Result<Db<'_>> {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            WriterDb::Unavailable(never) => match *never {},
            #[cfg(feature = "sqlite")]
            WriterDb::Sqlite { conn, .. } => {
                begin_immediate(conn)?;
                Ok(Db::Sqlite(conn))
            }
            #[cfg(feature = "postgres")]
            WriterDb::Postgres(pg) => pg.begin(),
        }
    }

    /// Begins a batch's transaction. A batch with nothing that must be durable (claims, heartbeats: a crash that
    /// loses them leaves the job unleased, and tokens are never reused) commits on PostgreSQL without waiting for
    /// its WAL to reach the disk, as SQLite's writer replies to them before the syncer's fsync.
    pub fn begin_batch(&mut self, durable: bool) -> Result<Db<'_>> {
        let db = self.begin()?;
        if !durable && db.is_postgres() {
            db.batch(Sql::postgres_only("SET LOCAL synchronous_commit TO OFF"))?;
        }
        Ok(db)
    }

    /// After a batch that did not commit: SQLite's transaction is rolled back (a PostgreSQL one was, when its
    /// `Db` was dropped).
    pub fn roll_back(&self) {
        #[cfg(feature = "sqlite")]
        if let WriterDb::Sqlite { conn, .. } = self
            && !conn.is_autocommit()
        {
            let _ = conn.execute_batch("ROLLBACK");
        }
    }

    /// After a batch's transaction failed: a batch it found due (and so stopped looking for) is due still, so the
    /// next batch looks again (see `Db::take_batch_due`).
    pub fn look_for_due_batches(&self) {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            WriterDb::Unavailable(never) => match *never {},
            #[cfg(feature = "sqlite")]
            WriterDb::Sqlite { .. } => {}
            #[cfg(feature = "postgres")]
            WriterDb::Postgres(pg) => {
                if let Some(session) = &pg.session {
                    session.parts().1.note_batch_due();
                }
            }
        }
    }

    /// Runs `f` outside a batch, in a transaction of its own, committed if it succeeds.
    pub fn run<T>(&mut self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        let db = self.begin()?;
        match f(&db) {
            Ok(value) => {
                db.commit()?;
                Ok(value)
            }
            Err(e) => {
                drop(db);
                self.roll_back();
                Err(e)
            }
        }
    }

    /// In a PostgreSQL batch about to commit: tells the other nodes which queues gained ready jobs, whether settings
    /// changed, and (to the leader of the timed work) a due time. PostgreSQL delivers the notifications when (and
    /// only if) the transaction commits.
    pub fn notify<'q>(
        node: &str,
        db: &Db<'_>,
        ready: impl Iterator<Item = &'q str>,
        settings_changed: bool,
        due: Option<i64>,
    ) -> Result<()> {
        if !db.is_postgres() {
            return Ok(());
        }
        #[cfg(feature = "postgres")]
        {
            notify::notify(node, db, ready, settings_changed)?;
            if let Some(at) = due {
                notify::notify_due(node, db, at)?;
            }
            Ok(())
        }
        #[cfg(not(feature = "postgres"))]
        unreachable!(
            "only PostgreSQL has other nodes to tell ({node}, {settings_changed}, {due:?}, {})",
            ready.count()
        )
    }

    /// Asks for the lead of the timed work, or renews it, in a transaction of its own: whether this node holds it
    /// for a new term ([`LEADER_TERM`]). Always on SQLite, where
    /// one process has the file.
    pub fn elect(&mut self) -> Result<bool> {
        let Some(node) = self.node().map(str::to_owned) else {
            return Ok(true);
        };
        #[cfg(feature = "postgres")]
        return self.run(|db| leader::elect(db, &node));
        #[cfg(not(feature = "postgres"))]
        unreachable!("only PostgreSQL has other nodes ({node})")
    }

    /// The node's name, on PostgreSQL.
    pub fn node(&self) -> Option<&str> {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            WriterDb::Unavailable(never) => match *never {},
            #[cfg(feature = "sqlite")]
            WriterDb::Sqlite { .. } => None,
            #[cfg(feature = "postgres")]
            WriterDb::Postgres(pg) => Some(&pg.node),
        }
    }

    /// Last work at close: SQLite's write-ahead log is folded back into the file (the checkpointer stopped first,
    /// so that it does not hold the checkpoint lock); a PostgreSQL node gives up the lead of the timed work, so
    /// that another takes it at once.
    pub fn close(&mut self) {
        #[cfg(feature = "postgres")]
        if let Some(node) = self.node().map(str::to_owned)
            && let Err(e) = self.run(|db| leader::resign(db, &node))
        {
            tracing::debug!(error = %e, "could not give up the lead of the timed work on close");
        }
        #[cfg(feature = "sqlite")]
        #[allow(irrefutable_let_patterns)] // the only variant in a build without PostgreSQL
        if let WriterDb::Sqlite { conn, checkpointer } = self {
            checkpointer.stop();
            if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
                tracing::debug!(error = %e, "could not checkpoint the WAL on close");
            }
        }
    }
}
