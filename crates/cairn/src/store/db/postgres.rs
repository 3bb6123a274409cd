//! A statement on PostgreSQL: the transaction it runs in, with the statements prepared on its connection, each call
//! under the session's time bound (`store/postgres/session.rs`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use postgres::types::ToSql;

use crate::error::{Error, ErrorKind, Result};
use crate::store::postgres::session::{Bounded, Session};

/// A PostgreSQL transaction, with the statements prepared on its connection. Begun and ended with plain
/// statements (`BEGIN`, `COMMIT`, `ROLLBACK` when dropped uncommitted), so that beginning is a call like any other.
pub(crate) struct PgTransaction<'a> {
    client: &'a tokio_postgres::Client,
    pub(super) bounded: Bounded<'a>,
    prepared: &'a RefCell<PreparedStatements>,
    /// Whether it still has to be committed or rolled back.
    open: Cell<bool>,
    /// Rows written so far, as SQLite's `total_changes` counts them.
    pub(super) changes: Cell<u64>,
    /// Statements that failed: each aborts the transaction until a savepoint is rolled back.
    pub(super) failures: Cell<u64>,
}

/// The most statements kept prepared on one connection.
const MAX_PREPARED: usize = 256;

/// The statements prepared on one PostgreSQL connection, by their text; `S` is a statement, any clonable type in
/// the tests. At most [`MAX_PREPARED`]: some texts are assembled per request (a claim's name patterns, read-only
/// SQL), and each prepared statement holds memory in the server's backend as well as here. When full, they are
/// all dropped (which closes them on the server) and prepared again as they are used.
pub(crate) struct PreparedStatements<S = tokio_postgres::Statement> {
    by_text: HashMap<String, S>,
}

impl<S: Clone> PreparedStatements<S> {
    pub fn new() -> Self {
        PreparedStatements {
            by_text: HashMap::new(),
        }
    }

    fn get(&self, sql: &str) -> Option<S> {
        self.by_text.get(sql).cloned()
    }

    fn insert(&mut self, sql: &str, statement: S) {
        if self.by_text.len() >= MAX_PREPARED {
            self.by_text.clear();
        }
        self.by_text.insert(sql.to_owned(), statement);
    }

    /// Forgets every statement: the connection they were prepared on is gone.
    pub fn clear(&mut self) {
        self.by_text.clear();
    }
}

impl<S: Clone> Default for PreparedStatements<S> {
    fn default() -> Self {
        PreparedStatements::new()
    }
}

/// How a transaction reads and writes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The writer's: `READ COMMITTED`, rows locked as they are changed.
    Write,
    /// A reader's: `READ ONLY` at `REPEATABLE READ`, so that everything it reads comes from one snapshot.
    Read,
}

impl Access {
    fn begin(self) -> &'static str {
        match self {
            // Read committed, whatever the database's default: each statement sees what committed before it, which
            // the writer's claims and the waits' registration (`ops/watch.rs`) rely on.
            Access::Write => "BEGIN ISOLATION LEVEL READ COMMITTED",
            Access::Read => "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        }
    }
}

/// Sends `BEGIN` for `access` on `session`: the first call of a transaction, which fails if the session was
/// closed while it sat idle.
pub(crate) fn begin(session: &mut Session, access: Access) -> Result<()> {
    let (client, bounded) = session.parts();
    bounded.call(client.batch_execute(access.begin()), |e| {
        Error::storage("starting a transaction", e)
    })
}

impl<'a> PgTransaction<'a> {
    /// Begins a transaction on `session`, whose prepared statements are `prepared`.
    pub fn begin(
        session: &'a mut Session,
        prepared: &'a RefCell<PreparedStatements>,
        access: Access,
    ) -> Result<Self> {
        begin(session, access)?;
        Ok(PgTransaction::begun(session, prepared))
    }

    /// The transaction [`begin`] started on `session`.
    pub fn begun(session: &'a mut Session, prepared: &'a RefCell<PreparedStatements>) -> Self {
        let (client, bounded) = session.parts();
        PgTransaction {
            client,
            bounded,
            prepared,
            open: Cell::new(true),
            changes: Cell::new(0),
            failures: Cell::new(0),
        }
    }

    /// Commits the transaction.
    pub fn commit(self) -> Result<()> {
        self.open.set(false);
        self.bounded.call(self.client.batch_execute("COMMIT"), |e| {
            Error::storage("committing a transaction", e)
        })
    }

    fn failed(&self, sql: &str, e: tokio_postgres::Error) -> Error {
        self.failures.set(self.failures.get() + 1);
        storage_error(sql, e)
    }

    /// Runs statements without parameters or results, as one message.
    pub(super) fn batch(&self, sql: &str) -> Result<()> {
        self.bounded
            .call(self.client.batch_execute(sql), |e| self.failed(sql, e))
    }

    /// The statement prepared for `sql`, prepared on first use.
    fn prepare(&self, sql: &str) -> Result<tokio_postgres::Statement> {
        if let Some(stmt) = self.prepared.borrow().get(sql) {
            return Ok(stmt);
        }
        let stmt = self
            .bounded
            .call(self.client.prepare(sql), |e| self.failed(sql, e))?;
        self.prepared.borrow_mut().insert(sql, stmt.clone());
        Ok(stmt)
    }

    /// The statement prepared for `sql`, checked to take as many parameters as `values` holds.
    fn prepare_for(
        &self,
        sql: &str,
        values: &[&(dyn ToSql + Sync)],
    ) -> Result<tokio_postgres::Statement> {
        let stmt = self.prepare(sql)?;
        if stmt.params().len() != values.len() {
            return Err(Error::new(
                ErrorKind::Storage,
                format!(
                    "{} values for the {} parameters of {sql}",
                    values.len(),
                    stmt.params().len()
                ),
            ));
        }
        Ok(stmt)
    }

    /// Runs `sql` with `values` as `$1`, `$2`, …; returns how many rows it changed.
    pub(super) fn execute(&self, sql: &str, values: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let stmt = self.prepare_for(sql, values)?;
        self.bounded
            .call(self.client.execute(&stmt, values), |e| self.failed(sql, e))
    }

    /// Runs `sql` with `values` as `$1`, `$2`, …; returns its rows.
    pub(super) fn run(
        &self,
        sql: &str,
        values: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let stmt = self.prepare_for(sql, values)?;
        self.bounded
            .call(self.client.query(&stmt, values), |e| self.failed(sql, e))
    }
}

impl Drop for PgTransaction<'_> {
    /// A transaction neither committed nor ended by an error that broke its session is rolled back, so that the
    /// session can begin the next.
    fn drop(&mut self) {
        if self.open.get() && !self.bounded.is_broken() {
            let _ = self
                .bounded
                .call(self.client.batch_execute("ROLLBACK"), |e| {
                    Error::storage("rolling back a transaction", e)
                });
        }
    }
}

/// A PostgreSQL error, with the statement it came from; what the engine depends on (a unique key taken, a
/// serialization failure between nodes) stays readable as its SQLSTATE.
fn storage_error(sql: &str, e: tokio_postgres::Error) -> Error {
    let mut sql = sql.trim().to_owned();
    if sql.len() > 120 {
        let mut cut = 120;
        while !sql.is_char_boundary(cut) {
            cut -= 1;
        }
        sql.truncate(cut);
        sql.push('…');
    }
    Error::storage(format!("running {sql}"), e)
}

#[cfg(test)]
mod tests {
    use super::{MAX_PREPARED, PreparedStatements};

    #[test]
    fn the_prepared_statements_of_a_connection_stay_bounded_whatever_texts_come() {
        let mut prepared = PreparedStatements::<u32>::new();
        for i in 0..10 * MAX_PREPARED {
            let text = format!("SELECT {i}");
            prepared.insert(&text, 7);
            assert!(prepared.by_text.len() <= MAX_PREPARED);
            assert_eq!(prepared.get(&text), Some(7), "the newest is always kept");
        }
        prepared.clear();
        assert_eq!(prepared.get("SELECT 0"), None);
    }
}
