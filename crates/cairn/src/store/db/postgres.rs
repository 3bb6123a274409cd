//! A statement on PostgreSQL: the transaction it runs in, with the statements prepared on its connection.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use postgres::types::ToSql;

use crate::error::{Error, ErrorKind, Result};

/// A PostgreSQL transaction, with the statements prepared on its connection.
pub(crate) struct PgTransaction<'a> {
    pub(super) tx: RefCell<postgres::Transaction<'a>>,
    prepared: &'a RefCell<PreparedStatements>,
    /// Rows written so far, as SQLite's `total_changes` counts them.
    pub(super) changes: Cell<u64>,
    /// Statements that failed: each aborts the transaction until a savepoint is rolled back.
    pub(super) failures: Cell<u64>,
}

/// The statements prepared on one PostgreSQL connection, by their text.
pub(crate) type PreparedStatements = HashMap<String, postgres::Statement>;

impl<'a> PgTransaction<'a> {
    pub fn new(tx: postgres::Transaction<'a>, prepared: &'a RefCell<PreparedStatements>) -> Self {
        PgTransaction {
            tx: RefCell::new(tx),
            prepared,
            changes: Cell::new(0),
            failures: Cell::new(0),
        }
    }

    /// Commits the transaction.
    pub fn commit(self) -> Result<()> {
        self.tx
            .into_inner()
            .commit()
            .map_err(|e| Error::storage("committing a transaction", e))
    }

    pub(super) fn failed(&self, sql: &str, e: postgres::Error) -> Error {
        self.failures.set(self.failures.get() + 1);
        storage_error(sql, e)
    }

    /// The statement prepared for `sql`, prepared on first use.
    pub(super) fn prepare(&self, sql: &str) -> Result<postgres::Statement> {
        if let Some(stmt) = self.prepared.borrow().get(sql) {
            return Ok(stmt.clone());
        }
        let prepared_now = self.tx.borrow_mut().prepare(sql);
        let stmt = prepared_now.map_err(|e| self.failed(sql, e))?;
        self.prepared
            .borrow_mut()
            .insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    /// Runs `sql` with `values` as `$1`, `$2`, …; returns its rows.
    pub(super) fn run(
        &self,
        sql: &str,
        values: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>> {
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
        let result = self.tx.borrow_mut().query(&stmt, values);
        result.map_err(|e| self.failed(sql, e))
    }
}

/// A PostgreSQL error, with the statement it came from; what the engine depends on (a unique key taken, a
/// serialization failure between nodes) stays readable as its SQLSTATE.
fn storage_error(sql: &str, e: postgres::Error) -> Error {
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
