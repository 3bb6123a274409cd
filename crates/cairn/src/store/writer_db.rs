//! The writer's connection, on either database: how a batch's transaction begins, how work outside a batch runs,
//! and, on PostgreSQL, what a node tells the others and whether it leads the timed work.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::store::db::{Db, PgTransaction, PreparedStatements, Sql};

/// The connection the writer thread owns.
pub(crate) enum WriterDb {
    Sqlite(Connection),
    Postgres(Box<PgWriter>),
}

/// The PostgreSQL side of a writer: its session, its prepared statements, and whether it leads.
pub(crate) struct PgWriter {
    pub client: postgres::Client,
    pub prepared: RefCell<PreparedStatements>,
    /// This node's name in notifications, so that it can tell its own from the others'.
    pub node: String,
    /// Where to connect again when the session breaks.
    pub url: String,
    /// How many times the session was opened again: what the session held (the lead, prepared statements) went
    /// with the old one.
    pub session: u64,
}

/// The session advisory lock the node doing the timed work holds (lease expiry, promotion, template slots,
/// retention, housekeeping): "cairn-lead" in ASCII. A session lock, so that it lives as long as the node's
/// connection: when the node dies, PostgreSQL ends its session and another node takes the lock.
const LEADER_LOCK: i64 = 0x6361_6972_6e6c_6561;

/// How often a node that does not lead asks for the lock again.
pub(crate) const LEADER_RETRY: Duration = Duration::from_secs(1);

/// The channel on which a commit that made jobs ready tells the other nodes which queues: the payload is the
/// node's name, then one queue per line.
pub(crate) const READY_CHANNEL: &str = "cairn_ready";

/// The channel on which a commit that changed a queue's settings or an option tells the other nodes to load
/// theirs again; the payload is the node's name.
pub(crate) const SETTINGS_CHANNEL: &str = "cairn_settings";

/// PostgreSQL's limit on a notification's payload is 8000 bytes; a larger set of queues goes in several.
const MAX_PAYLOAD: usize = 7000;

/// Asks for the lead of the timed work, in `db`'s transaction (a session lock outlives it): whether this node
/// now holds it. Always on SQLite, where one process has the file.
pub(crate) fn take_lead(db: &Db<'_>) -> Result<bool> {
    if !db.is_postgres() {
        return Ok(true);
    }
    db.query_one(
        Sql::postgres_only("SELECT pg_try_advisory_lock(CAST($1 AS BIGINT))"),
        &crate::store::db::params![LEADER_LOCK],
        |r| r.get::<bool>(0),
    )
}

/// How long the writer keeps trying to start a transaction while another connection holds SQLite's write lock.
/// Past this, the batch fails; before it, nothing has been decided, so waiting is safe.
const BUSY_WAIT: Duration = Duration::from_secs(60);

impl WriterDb {
    /// Begins a batch's transaction. On SQLite, another connection holding the write lock (the application's own
    /// transaction, a VACUUM) makes `BEGIN IMMEDIATE` fail with "busy" after the busy timeout; the batch then waits
    /// and tries again rather than failing requests that nothing has happened to yet.
    pub fn begin(&mut self) -> Result<Db<'_>> {
        Ok(self.begin_in_session()?.0)
    }

    /// [`begin`](Self::begin), and the [`session`](Self::session) the transaction runs in.
    fn begin_in_session(&mut self) -> Result<(Db<'_>, u64)> {
        match self {
            WriterDb::Sqlite(conn) => {
                let started = Instant::now();
                loop {
                    match conn.prepare_cached("BEGIN IMMEDIATE")?.execute([]) {
                        Ok(_) => return Ok((Db::Sqlite(conn), 0)),
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
            WriterDb::Postgres(pg) => {
                if pg.client.is_closed() {
                    // The server restarted, or ended the session: the batch that found out failed; this one
                    // starts on a new session.
                    pg.client = crate::store::postgres::connect::connect_writer(&pg.url)?;
                    pg.prepared.get_mut().clear();
                    pg.session += 1;
                    tracing::warn!(
                        node = pg.node,
                        "the writer's PostgreSQL session broke; connected again"
                    );
                }
                let tx = pg
                    .client
                    .transaction()
                    .map_err(|e| Error::storage("starting a write transaction", e))?;
                Ok((
                    Db::Postgres(PgTransaction::new(tx, &pg.prepared)),
                    pg.session,
                ))
            }
        }
    }

    /// Begins a batch's transaction. A batch with nothing that must be durable (claims, heartbeats: a crash that
    /// loses them leaves the job unleased, and tokens are never reused) commits on PostgreSQL without waiting for
    /// its WAL to reach the disk, as SQLite's writer replies to them before the syncer's fsync. Returns the
    /// transaction and the [`session`](Self::session) it runs in.
    pub fn begin_batch(&mut self, durable: bool) -> Result<(Db<'_>, u64)> {
        let (db, session) = self.begin_in_session()?;
        if !durable && db.is_postgres() {
            db.batch(Sql::postgres_only("SET LOCAL synchronous_commit TO OFF"))?;
        }
        Ok((db, session))
    }

    /// After a batch that did not commit: SQLite's transaction is rolled back (a PostgreSQL one was, when its
    /// `Db` was dropped).
    pub fn roll_back(&self) {
        if let WriterDb::Sqlite(conn) = self
            && !conn.is_autocommit()
        {
            let _ = conn.execute_batch("ROLLBACK");
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

    /// In a PostgreSQL batch about to commit: tells the other nodes which queues gained ready jobs, and whether
    /// settings changed. PostgreSQL delivers the notifications when (and only if) the transaction commits.
    pub fn notify<'q>(
        node: &str,
        db: &Db<'_>,
        ready: impl Iterator<Item = &'q str>,
        settings_changed: bool,
    ) -> Result<()> {
        if !db.is_postgres() {
            return Ok(());
        }
        // Settings first: PostgreSQL delivers a transaction's notifications in order, so another node loads the
        // settings (a queue resumed, a limit raised) before it serves the queues this commit made ready.
        if settings_changed {
            db.query(
                Sql::postgres_only("SELECT pg_notify($1, $2)"),
                &crate::store::db::params![SETTINGS_CHANNEL, node],
                |_| Ok(()),
            )?;
        }
        let mut payload = node.to_owned();
        let flush = |payload: &mut String| -> Result<()> {
            if payload.len() > node.len() {
                db.query(
                    Sql::postgres_only("SELECT pg_notify($1, $2)"),
                    &crate::store::db::params![READY_CHANNEL, payload.as_str()],
                    |_| Ok(()),
                )?;
            }
            payload.truncate(node.len());
            Ok(())
        };
        for queue in ready {
            if payload.len() + 1 + queue.len() > MAX_PAYLOAD {
                flush(&mut payload)?;
            }
            payload.push('\n');
            payload.push_str(queue);
        }
        flush(&mut payload)?;
        Ok(())
    }

    /// Which session of the writer's this is (always 0 on SQLite): a lead taken on one session is lost with it.
    pub fn session(&self) -> u64 {
        match self {
            WriterDb::Sqlite(_) => 0,
            WriterDb::Postgres(pg) => pg.session,
        }
    }

    /// The node's name, on PostgreSQL.
    pub fn node(&self) -> Option<&str> {
        match self {
            WriterDb::Sqlite(_) => None,
            WriterDb::Postgres(pg) => Some(&pg.node),
        }
    }

    /// Last work at close: SQLite's write-ahead log is folded back into the file.
    pub fn close(&mut self) {
        if let WriterDb::Sqlite(conn) = self
            && let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        {
            tracing::debug!(error = %e, "could not checkpoint the WAL on close");
        }
    }
}
