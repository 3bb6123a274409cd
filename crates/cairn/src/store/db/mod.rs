//! One way to run the engine's SQL on either database. A statement is a [`Sql`]: its literal text for SQLite and
//! for PostgreSQL, the same text where the two dialects agree. Parameters are `$1`, `$2`, … in both, first appearing
//! in that order (SQLite numbers them as they appear, so each binds by position), so nothing rewrites a statement at
//! run time. Values are converted to the types PostgreSQL declared for them; rows read back through [`Row::get`] into
//! the same Rust types on both.
//!
//! It also keeps what the writer needs to know about a transaction on either database: whether a statement wrote
//! (a failed operation that wrote poisons a batch without savepoints) and whether one failed (on PostgreSQL, a
//! failed statement aborts the whole transaction).

#[cfg(feature = "postgres")]
use ::postgres::types::ToSql;

use crate::error::{Error, ErrorKind, Result};

mod multi_row;
#[cfg(feature = "postgres")]
mod postgres;
mod rows;
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod values;

#[cfg(feature = "postgres")]
pub(crate) use postgres::{Access, PgTransaction, PreparedStatements, begin};

pub(crate) use multi_row::{MultiRow, columns};
pub(crate) use rows::Row;
pub(crate) use sql::{OwnedSql, Sql};
pub(crate) use values::{Params, ToValue, Value, params};

/// Where a statement runs.
pub(crate) enum Db<'a> {
    #[cfg(feature = "sqlite")]
    Sqlite(&'a rusqlite::Connection),
    #[cfg(feature = "postgres")]
    Postgres(PgTransaction<'a>),
    /// Built without a backend, nothing runs.
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    Unavailable(NoBackend<'a>),
}

/// What stands in for a connection when the crate is built without a backend: it cannot be made, so code that
/// matches on one has nothing to do.
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), allow(dead_code))]
pub(crate) struct NoBackend<'a>(
    pub std::convert::Infallible,
    std::marker::PhantomData<&'a ()>,
);

/// A point in a transaction, to ask later whether anything was written or failed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DbMark {
    changes: u64,
    failures: u64,
}

impl Db<'_> {
    /// Which database this is. Outside `store/`, ask what it can do ([`Db::capabilities`], in `store/seam.rs`) or
    /// have its dialect run the statement ([`Db::dialect`]).
    pub fn is_postgres(&self) -> bool {
        #[cfg(feature = "postgres")]
        return matches!(self, Db::Postgres(_));
        #[cfg(not(feature = "postgres"))]
        false
    }

    /// The point reached so far.
    pub fn mark(&self) -> DbMark {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(conn) => DbMark {
                changes: conn.total_changes(),
                failures: 0,
            },
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => DbMark {
                changes: pg.changes.get(),
                failures: pg.failures.get(),
            },
        }
    }

    /// Whether a statement wrote a row since `mark`, or failed (which on PostgreSQL aborts the transaction).
    pub fn touched_since(&self, mark: DbMark) -> bool {
        self.mark() != mark
    }

    /// Whether the transaction is still open: on some errors (disk full, I/O, out of memory) SQLite rolls it back
    /// by itself. A PostgreSQL transaction stays open (if aborted) until it is rolled back.
    pub fn in_transaction(&self) -> bool {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(conn) => !conn.is_autocommit(),
            #[cfg(feature = "postgres")]
            Db::Postgres(_) => true,
        }
    }

    /// Whether a batch may have become due since the last time this was asked, so that the writer looks for its
    /// callbacks (`ops/batches.rs`). SQLite always says yes: its look is a read of an empty index, a few
    /// microseconds. PostgreSQL says what the batch trigger's notice said, sparing every transaction a round trip.
    pub fn take_batch_due(&self) -> bool {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(_) => true,
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.bounded.take_batch_due(),
        }
    }

    /// Notes that a batch is due, for the writer's next look (see [`Db::take_batch_due`]).
    pub fn note_batch_due(&self) {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(_) => {}
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.bounded.note_batch_due(),
        }
    }

    /// Runs a statement without parameters or results (`SAVEPOINT`, `RELEASE`, …).
    pub fn batch(&self, sql: Sql<'_>) -> Result<()> {
        let text = sql.text_for(self.is_postgres())?;
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(conn) => {
                conn.prepare_cached(text)?.execute([])?;
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.batch(text),
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub fn execute(&self, sql: Sql<'_>, params: &Params<'_>) -> Result<usize> {
        let text = sql.text_for(self.is_postgres())?;
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(text)?;
                sqlite::bind_sqlite(&mut stmt, params, text)?;
                Ok(stmt.raw_execute()?)
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => {
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.0.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
                let changed = pg.execute(text, &refs)?;
                pg.changes.set(pg.changes.get() + changed);
                Ok(usize::try_from(changed).unwrap_or(usize::MAX))
            }
        }
    }

    /// Runs a query (or a write with `RETURNING`); `f` reads each row.
    pub fn query<T>(
        &self,
        sql: Sql<'_>,
        params: &Params<'_>,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let text = sql.text_for(self.is_postgres())?;
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(text)?;
                sqlite::bind_sqlite(&mut stmt, params, text)?;
                let mut rows = stmt.raw_query();
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(f(&Row::Sqlite(row))?);
                }
                Ok(out)
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => {
                let values: Vec<&(dyn ToSql + Sync)> =
                    params.0.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
                let rows = pg.run(text, &values)?;
                if !is_read_only(text) {
                    pg.changes.set(pg.changes.get() + rows.len() as u64);
                }
                rows.iter().map(|row| f(&Row::Postgres(row))).collect()
            }
        }
    }

    /// Runs a query for at most one row; `None` when there is none.
    pub fn query_row<T>(
        &self,
        sql: Sql<'_>,
        params: &Params<'_>,
        f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.query(sql, params, f)?.into_iter().next())
    }

    /// Runs a query for exactly one row (an aggregate, say).
    pub fn query_one<T>(
        &self,
        sql: Sql<'_>,
        params: &Params<'_>,
        f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_row(sql, params, f)?.ok_or_else(|| {
            Error::new(
                ErrorKind::Storage,
                format!("a query that always returns a row returned none: {sql:?}"),
            )
        })
    }

    /// Runs, on PostgreSQL, a statement whose first parameters are `scalars` and the rest arrays, `columns` in
    /// order (see [`MultiRow`]); `f` reads each row it returns. Such a statement writes.
    ///
    /// # Errors
    /// On SQLite, which has no arrays; and what the statement meets.
    pub fn query_arrays<T>(
        &self,
        postgres: &str,
        scalars: Vec<Value<'_>>,
        columns: Vec<Vec<Value<'_>>>,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(_) => Err(Error::new(
                ErrorKind::Storage,
                format!("a statement of arrays runs on PostgreSQL only: {postgres}"),
            )),
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => {
                let mut values: Vec<&(dyn ToSql + Sync)> =
                    scalars.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
                values.extend(columns.iter().map(|c| c as &(dyn ToSql + Sync)));
                let rows = pg.run(postgres, &values)?;
                pg.changes.set(pg.changes.get() + rows.len() as u64);
                rows.iter().map(|row| f(&Row::Postgres(row))).collect()
            }
        }
    }

    /// Commits the transaction.
    pub fn commit(self) -> Result<()> {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(conn) => {
                conn.prepare_cached("COMMIT")?.execute([])?;
                Ok(())
            }
            #[cfg(feature = "postgres")]
            Db::Postgres(pg) => pg.commit(),
        }
    }
}

/// Whether a statement only reads: its rows returned are not rows written. Every statement of the engine that
/// writes and returns rows begins with `INSERT`, `UPDATE`, `DELETE` or `WITH`.
fn is_read_only(sql: &str) -> bool {
    let head = sql.trim_start();
    head.len() >= 6 && head[..6].eq_ignore_ascii_case("SELECT")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same statements on `db`: what they read back.
    fn exercise(db: &Db<'_>) -> Vec<(String, bool, Option<u32>, f64, i64)> {
        let absent: Option<u32> = None;
        for (name, paused, concurrency) in [("mail", true, absent), ("maps", false, Some(4u32))] {
            let changed = db
                .execute(
                    Sql::both("INSERT INTO queues (name, paused, concurrency) VALUES ($1, $2, $3)"),
                    &params![name, paused, concurrency],
                )
                .unwrap();
            assert_eq!(changed, 1);
        }
        db.execute(
            Sql::both(
                "INSERT INTO stats_minute (minute, queue, name, wait_sum) VALUES ($1, $2, $3, $4)",
            ),
            &Params(vec![
                Value::Integer(60_000),
                Value::Text("mail".into()),
                Value::Text("send".into()),
                Value::Real(0.25),
            ]),
        )
        .unwrap();
        let none = db
            .query_row(
                Sql::both("SELECT name FROM queues WHERE name = $1 OR name = $1 || 'x'"),
                &params!["nope"],
                |r| r.get::<String>(0),
            )
            .unwrap();
        assert_eq!(none, None);
        // Where the dialects differ, each database runs its own text: GLOB, a scalar MAX; a LIMIT PostgreSQL reads
        // as int4, flags and nulls.
        db.query(
            Sql {
                sqlite: "SELECT q.name, q.paused, q.concurrency, MAX(COALESCE(s.wait_sum, 0.0), 0.125), count(*) \
                         FROM queues AS q LEFT JOIN stats_minute AS s ON s.queue = q.name WHERE q.name GLOB $1 \
                         GROUP BY q.name, q.paused, q.concurrency, s.wait_sum ORDER BY q.name LIMIT 0 + $2",
                postgres: "SELECT q.name, q.paused, q.concurrency, GREATEST(COALESCE(s.wait_sum, 0.0), 0.125), \
                           count(*) FROM queues AS q LEFT JOIN stats_minute AS s ON s.queue = q.name \
                           WHERE cairn_glob(q.name, $1) GROUP BY q.name, q.paused, q.concurrency, s.wait_sum \
                           ORDER BY q.name LIMIT 0 + $2",
            },
            &Params(vec![Value::Text("ma*".into()), Value::Integer(10)]),
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap()
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn a_statement_binds_each_value_once_or_says_what_is_wrong() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::store::sqlite::migrations::migrate(&mut conn, 0).unwrap();
        let db = Db::Sqlite(&conn);
        let e = db
            .query_one(Sql::both("SELECT $1 + $2"), &params![1], |r| {
                r.get::<i64>(0)
            })
            .unwrap_err();
        assert!(
            e.to_string().contains("1 values for the 2 parameters"),
            "{e}"
        );
        // Parameters first appear in order, so that SQLite's numbers are theirs (checked in debug builds).
        for out_of_order in ["SELECT $1 + $3", "SELECT $2 - $1"] {
            let e = db
                .query_one(Sql::both(out_of_order), &params![1, 2], |r| r.get::<i64>(0))
                .unwrap_err();
            assert!(e.to_string().contains("must first appear in order"), "{e}");
        }
        let e = db
            .query_one(Sql::postgres_only("SELECT 1"), &Params::NONE, |r| {
                r.get::<i64>(0)
            })
            .unwrap_err();
        assert!(e.to_string().contains("no text for SQLite"), "{e}");
    }

    fn expected() -> Vec<(String, bool, Option<u32>, f64, i64)> {
        vec![
            ("mail".to_owned(), true, None, 0.25, 1),
            ("maps".to_owned(), false, Some(4), 0.125, 1),
        ]
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn statements_run_on_sqlite() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::store::sqlite::migrations::migrate(&mut conn, 0).unwrap();
        assert_eq!(exercise(&Db::Sqlite(&conn)), expected());
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn the_same_statements_run_on_postgresql() {
        let admin = std::env::var("CAIRN_TEST_POSTGRES_URL").expect(
            "CAIRN_TEST_POSTGRES_URL is not set: run the tests with scripts/test, which starts a private \
             PostgreSQL cluster",
        );
        let name = format!("cairn_unit_{}", std::process::id());
        let mut admin_client = ::postgres::Client::connect(&admin, ::postgres::NoTls).unwrap();
        // Two statements: several in one string would run as one transaction, where these cannot.
        admin_client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        admin_client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
        let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
        crate::store::postgres::migrations::migrate(&mut client, 0).unwrap();
        drop(client);
        let hosts = std::sync::Arc::new(crate::store::postgres::hosts::Hosts::parse(&url).unwrap());
        let mut session =
            crate::store::postgres::session::Session::open(&hosts, "test", "").unwrap();
        let prepared = std::cell::RefCell::new(super::PreparedStatements::new());
        let tx = PgTransaction::begin(&mut session, &prepared, Access::Write).unwrap();
        let db = Db::Postgres(tx);
        let got = exercise(&db);
        drop(db);
        drop(session);
        admin_client
            .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .unwrap();
        assert_eq!(got, expected());
    }
}
