//! The read-only connection pool. Reads run on blocking threads and never wait behind the writer (WAL lets readers
//! see the last committed state while a write is in progress). Each read is one transaction, so all it reads comes
//! from one snapshot.

use std::path::PathBuf;

use rusqlite::Connection;

use crate::error::Result;
use crate::store::db::{Db, Sql};
use crate::store::pool::Pool;
use crate::store::sqlite::connection::open_reader;

/// Read-only connections, opened on demand and kept up to a limit.
pub(crate) struct SqliteReaders {
    path: PathBuf,
    pool: Pool<Connection>,
}

impl SqliteReaders {
    /// Readers of the file at `path`: `keep` connections kept open, at most `max_open` open at once.
    pub fn new(path: PathBuf, keep: usize, max_open: usize) -> Self {
        SqliteReaders {
            path,
            pool: Pool::new(keep, max_open),
        }
    }

    /// Runs `f` in a read transaction (on the calling thread, which may block).
    pub fn read_blocking<T>(&self, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
        let conn = self.pool.take(|| open_reader(&self.path))?;
        let result = read_in_transaction(&conn, f);
        if conn.is_autocommit() {
            conn.give_back();
        } else {
            conn.discard();
        }
        result
    }
}

fn read_in_transaction<T>(conn: &Connection, f: impl FnOnce(&Db<'_>) -> Result<T>) -> Result<T> {
    let db = Db::Sqlite(conn);
    db.batch(Sql::sqlite_only("BEGIN"))?;
    let result = f(&db);
    // A read transaction has nothing to keep: ending it either way releases the snapshot.
    db.batch(Sql::sqlite_only("COMMIT"))?;
    result
}
