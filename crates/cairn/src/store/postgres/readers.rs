//! PostgreSQL sessions for reads, opened on demand and kept up to a limit. Each read is one read-only transaction
//! at `REPEATABLE READ`, so all it reads comes from one snapshot, as on SQLite.

use std::cell::RefCell;

use postgres::Client;

use crate::error::{Error, Result};
use crate::store::db::{Db, PgTransaction, PreparedStatements};
use crate::store::pool::Pool;
use crate::store::postgres::connect::connect;

/// A session and the statements prepared on it.
struct Session {
    client: Client,
    prepared: RefCell<PreparedStatements>,
}

/// The reader pool.
pub(crate) struct PgReaders {
    url: String,
    pool: Pool<Session>,
}

impl PgReaders {
    pub fn new(url: String, keep: usize) -> Self {
        PgReaders {
            url,
            pool: Pool::new(keep),
        }
    }

    /// Runs `f` in a read-only transaction (on the calling thread, which may block).
    pub fn read_blocking<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        let mut session = self.pool.take(|| {
            Ok(Session {
                client: connect(&self.url, "cairn reader")?,
                prepared: RefCell::new(PreparedStatements::new()),
            })
        })?;
        let result = (|| {
            let tx = session
                .client
                .build_transaction()
                .read_only(true)
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .start()
                .map_err(|e| Error::storage("starting a read transaction", e))?;
            let db = Db::Postgres(PgTransaction::new(tx, &session.prepared));
            let value = f(&db)?;
            db.commit()?;
            Ok(value)
        })();
        // A session whose connection broke is not kept; one that only saw a failed statement is fine (its
        // transaction was rolled back when dropped).
        if !session.client.is_closed() {
            self.pool.give_back(session);
        }
        result
    }
}

impl Drop for PgReaders {
    /// Closing a session blocks on its connection, which cannot happen on a thread that drives async tasks (the
    /// last handle to a queue may be dropped there): the sessions are closed on a thread of their own.
    fn drop(&mut self) {
        let idle = self.pool.drain();
        if !idle.is_empty() {
            let _ = std::thread::Builder::new()
                .name("cairn-readers-close".into())
                .spawn(move || drop(idle));
        }
    }
}
