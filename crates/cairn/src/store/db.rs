//! One way to run the engine's SQL on either database. A statement is a [`Sql`]: its literal text for SQLite and
//! for PostgreSQL, the same text where the two dialects agree. Parameters are `$1`, `$2`, … in both (SQLite reads
//! `$1` as a parameter named `$1`; each is bound to its value by that name), so nothing rewrites a statement at run
//! time. Values are converted to the types PostgreSQL declared for them; rows read back through [`Row::get`] into
//! the same Rust types on both.
//!
//! It also keeps what the writer needs to know about a transaction on either database: whether a statement wrote
//! (a failed operation that wrote poisons a batch without savepoints) and whether one failed (on PostgreSQL, a
//! failed statement aborts the whole transaction).

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::error::{Error, ErrorKind, Result};

/// A statement, as each database runs it. Where the dialects differ (a row lock, an index hint, `GLOB`, scalar
/// `MAX`), both texts stand side by side; [`Sql::both`] is one text both read alike. An empty text means the
/// statement does not run on that database ([`Sql::sqlite_only`], [`Sql::postgres_only`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sql<'a> {
    pub sqlite: &'a str,
    pub postgres: &'a str,
}

impl<'a> Sql<'a> {
    /// One text, read alike by both databases.
    pub const fn both(text: &'a str) -> Sql<'a> {
        Sql {
            sqlite: text,
            postgres: text,
        }
    }

    /// A statement only SQLite runs.
    pub const fn sqlite_only(text: &'a str) -> Sql<'a> {
        Sql {
            sqlite: text,
            postgres: "",
        }
    }

    /// A statement only PostgreSQL runs.
    pub const fn postgres_only(text: &'a str) -> Sql<'a> {
        Sql {
            sqlite: "",
            postgres: text,
        }
    }

    /// The text for `db`'s database.
    fn text_for(&self, postgres: bool) -> Result<&'a str> {
        let (text, other, name) = if postgres {
            (self.postgres, self.sqlite, "PostgreSQL")
        } else {
            (self.sqlite, self.postgres, "SQLite")
        };
        if text.is_empty() {
            return Err(Error::new(
                ErrorKind::Storage,
                format!("a statement has no text for {name}: {other}"),
            ));
        }
        Ok(text)
    }
}

/// A statement built at run time (how many parameters it has depends on the request), in each database's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnedSql {
    pub sqlite: String,
    pub postgres: String,
}

impl OwnedSql {
    /// The statement, to run.
    pub fn as_sql(&self) -> Sql<'_> {
        Sql {
            sqlite: &self.sqlite,
            postgres: &self.postgres,
        }
    }
}

/// A value bound to a parameter. Flags are integers 0 and 1 on both databases, as SQLite stores them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(Cow<'a, str>),
}

/// What can be bound to a parameter: taken by value, so that a borrowed text keeps its own lifetime and a
/// computed one is owned.
pub(crate) trait ToValue<'a> {
    fn to_value(self) -> Value<'a>;
}

macro_rules! integer_values {
    ($($t:ty),*) => {$(
        impl<'a> ToValue<'a> for $t {
            fn to_value(self) -> Value<'a> {
                Value::Integer(i64::try_from(self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
integer_values!(i64, i32, u32, u64, usize);

/// Values borrowed where the statement's values are built from references.
macro_rules! borrowed_values {
    ($($t:ty),*) => {$(
        impl<'a> ToValue<'a> for &$t {
            fn to_value(self) -> Value<'a> {
                (*self).to_value()
            }
        }
    )*};
}
borrowed_values!(i64, i32, u32, u64, usize, bool, f64, crate::job::JobId);

impl<'a> ToValue<'a> for &&'a str {
    fn to_value(self) -> Value<'a> {
        Value::Text(Cow::Borrowed(self))
    }
}

impl<'a> ToValue<'a> for crate::job::JobId {
    fn to_value(self) -> Value<'a> {
        Value::Integer(self.0)
    }
}

impl<'a> ToValue<'a> for bool {
    fn to_value(self) -> Value<'a> {
        Value::Integer(i64::from(self))
    }
}

impl<'a> ToValue<'a> for f64 {
    fn to_value(self) -> Value<'a> {
        Value::Real(self)
    }
}

impl<'a> ToValue<'a> for &'a str {
    fn to_value(self) -> Value<'a> {
        Value::Text(Cow::Borrowed(self))
    }
}

impl<'a> ToValue<'a> for &'a String {
    fn to_value(self) -> Value<'a> {
        Value::Text(Cow::Borrowed(self.as_str()))
    }
}

impl<'a> ToValue<'a> for String {
    fn to_value(self) -> Value<'a> {
        Value::Text(Cow::Owned(self))
    }
}

impl<'a, T: ToValue<'a>> ToValue<'a> for Option<T> {
    fn to_value(self) -> Value<'a> {
        self.map_or(Value::Null, ToValue::to_value)
    }
}

/// A statement's parameter values, `$1` first: `params![id, now]`.
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        $crate::store::db::Params(vec![$($crate::store::db::ToValue::to_value($value)),*])
    };
}
pub(crate) use params;

/// The values of a statement's parameters, `$1` first.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Params<'a>(pub Vec<Value<'a>>);

impl Params<'_> {
    /// No parameters.
    pub const NONE: Params<'static> = Params(Vec::new());
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(r) => ValueRef::Real(*r),
            Value::Text(t) => ValueRef::Text(t.as_bytes()),
        }))
    }
}

/// A value written as the type PostgreSQL declared for its parameter: an integer into `int8`, `int4`, `int2`,
/// `float8` or `bool`; a real into `float8` or `float4`; text into any text type, or `json` (whose binary form is
/// its text).
impl ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match (self, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Integer(i), &Type::INT8) => i.to_sql(ty, out),
            (Value::Integer(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Value::Integer(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Value::Integer(i), &Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            (Value::Integer(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
            (Value::Real(r), &Type::FLOAT8) => r.to_sql(ty, out),
            (Value::Real(r), &Type::FLOAT4) => (*r as f32).to_sql(ty, out),
            (Value::Text(t), _) => t.as_ref().to_sql(ty, out),
            (value, ty) => Err(format!("cannot write {value:?} as PostgreSQL type {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A row read back.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl Row<'_> {
    /// Column `index` (from 0) as a `T`.
    pub fn get<T: FromDb>(&self, index: usize) -> Result<T> {
        match self {
            Row::Sqlite(row) => T::from_sqlite(row, index).map_err(Error::from),
            Row::Postgres(row) => T::from_postgres(row, index),
        }
    }
}

/// What a column can be read as, on both databases.
pub(crate) trait FromDb: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self>;
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self>;
}

fn column_error(row: &postgres::Row, index: usize, want: &str) -> Error {
    let ty = row
        .columns()
        .get(index)
        .map_or_else(|| "no such column".to_owned(), |c| c.type_().to_string());
    Error::new(
        ErrorKind::Storage,
        format!("column {index} is {ty}, not readable as {want}"),
    )
}

/// An integer column of any width (and a flag, whether stored as an integer or a boolean).
fn pg_integer(row: &postgres::Row, index: usize) -> Result<Option<i64>> {
    let ty = row.columns().get(index).map(|c| c.type_().clone());
    let pg = |e: postgres::Error| Error::storage(format!("reading column {index}"), e);
    Ok(match ty {
        Some(Type::INT8) => row.try_get::<_, Option<i64>>(index).map_err(pg)?,
        Some(Type::INT4) => row
            .try_get::<_, Option<i32>>(index)
            .map_err(pg)?
            .map(i64::from),
        Some(Type::INT2) => row
            .try_get::<_, Option<i16>>(index)
            .map_err(pg)?
            .map(i64::from),
        Some(Type::BOOL) => row
            .try_get::<_, Option<bool>>(index)
            .map_err(pg)?
            .map(i64::from),
        _ => return Err(column_error(row, index, "an integer")),
    })
}

fn not_null<T>(value: Option<T>, index: usize) -> Result<T> {
    value.ok_or_else(|| {
        Error::new(
            ErrorKind::Storage,
            format!("column {index} is NULL where a value was expected"),
        )
    })
}

macro_rules! integer_columns {
    ($($t:ty),*) => {$(
        impl FromDb for $t {
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
                row.get(index)
            }
            fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
                let value = not_null(pg_integer(row, index)?, index)?;
                <$t>::try_from(value).map_err(|_| column_error(row, index, stringify!($t)))
            }
        }
        impl FromDb for Option<$t> {
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
                row.get(index)
            }
            fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
                pg_integer(row, index)?
                    .map(|v| <$t>::try_from(v).map_err(|_| column_error(row, index, stringify!($t))))
                    .transpose()
            }
        }
    )*};
}
integer_columns!(i64, i32, u32);

impl FromDb for crate::job::JobId {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index).map(crate::job::JobId)
    }
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        i64::from_postgres(row, index).map(crate::job::JobId)
    }
}

impl FromDb for Option<crate::job::JobId> {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        Ok(row.get::<_, Option<i64>>(index)?.map(crate::job::JobId))
    }
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        Ok(Option::<i64>::from_postgres(row, index)?.map(crate::job::JobId))
    }
}

impl FromDb for bool {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        Ok(not_null(pg_integer(row, index)?, index)? != 0)
    }
}

impl FromDb for Option<bool> {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        Ok(pg_integer(row, index)?.map(|v| v != 0))
    }
}

impl FromDb for Option<f64> {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        let pg = |e: postgres::Error| Error::storage(format!("reading column {index}"), e);
        match row.columns().get(index).map(|c| c.type_().clone()) {
            Some(Type::FLOAT8) => row.try_get(index).map_err(pg),
            Some(Type::FLOAT4) => Ok(row
                .try_get::<_, Option<f32>>(index)
                .map_err(pg)?
                .map(f64::from)),
            _ => Ok(pg_integer(row, index)?.map(|v| v as f64)),
        }
    }
}

impl FromDb for f64 {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        not_null(Option::<f64>::from_postgres(row, index)?, index)
    }
}

impl FromDb for Option<String> {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        row.try_get::<_, Option<PgText>>(index)
            .map(|text| text.map(|t| t.0))
            .map_err(|e| Error::storage(format!("reading column {index}"), e))
    }
}

/// A text column read from PostgreSQL, or a `json` one as its text: the engine keeps JSON as text, as written.
struct PgText(String);

impl<'a> postgres::types::FromSql<'a> for PgText {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        if *ty == Type::JSON {
            // `json`'s binary form is its text.
            return Ok(PgText(std::str::from_utf8(raw)?.to_owned()));
        }
        String::from_sql(ty, raw).map(PgText)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON || <String as postgres::types::FromSql>::accepts(ty)
    }
}

impl FromDb for String {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &postgres::Row, index: usize) -> Result<Self> {
        not_null(Option::<String>::from_postgres(row, index)?, index)
    }
}

/// A PostgreSQL transaction, with the statements prepared on its connection.
pub(crate) struct PgTransaction<'a> {
    tx: RefCell<postgres::Transaction<'a>>,
    prepared: &'a RefCell<PreparedStatements>,
    /// Rows written so far, as SQLite's `total_changes` counts them.
    changes: Cell<u64>,
    /// Statements that failed: each aborts the transaction until a savepoint is rolled back.
    failures: Cell<u64>,
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

    fn failed(&self, sql: &str, e: postgres::Error) -> Error {
        self.failures.set(self.failures.get() + 1);
        storage_error(sql, e)
    }

    /// The statement prepared for `sql`, prepared on first use.
    fn prepare(&self, sql: &str) -> Result<postgres::Statement> {
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
    fn run(&self, sql: &str, values: &[&(dyn ToSql + Sync)]) -> Result<Vec<postgres::Row>> {
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

/// Where a statement runs.
pub(crate) enum Db<'a> {
    Sqlite(&'a rusqlite::Connection),
    Postgres(PgTransaction<'a>),
}

/// A point in a transaction, to ask later whether anything was written or failed since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DbMark {
    changes: u64,
    failures: u64,
}

impl Db<'_> {
    /// Which database this is.
    pub fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// The point reached so far.
    pub fn mark(&self) -> DbMark {
        match self {
            Db::Sqlite(conn) => DbMark {
                changes: conn.total_changes(),
                failures: 0,
            },
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
            Db::Sqlite(conn) => !conn.is_autocommit(),
            Db::Postgres(_) => true,
        }
    }

    /// Runs a statement without parameters or results (`SAVEPOINT`, `RELEASE`, …).
    pub fn batch(&self, sql: Sql<'_>) -> Result<()> {
        let text = sql.text_for(self.is_postgres())?;
        match self {
            Db::Sqlite(conn) => {
                conn.prepare_cached(text)?.execute([])?;
                Ok(())
            }
            Db::Postgres(pg) => {
                let result = pg.tx.borrow_mut().batch_execute(text);
                result.map_err(|e| pg.failed(text, e))
            }
        }
    }

    /// Runs a statement; returns how many rows it changed.
    pub fn execute(&self, sql: Sql<'_>, params: &Params<'_>) -> Result<usize> {
        let text = sql.text_for(self.is_postgres())?;
        match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(text)?;
                bind_sqlite(&mut stmt, params, text)?;
                Ok(stmt.raw_execute()?)
            }
            Db::Postgres(pg) => {
                let stmt = pg.prepare(text)?;
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.0.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
                let result = pg.tx.borrow_mut().execute(&stmt, &refs);
                let changed = result.map_err(|e| pg.failed(text, e))?;
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
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(text)?;
                bind_sqlite(&mut stmt, params, text)?;
                let mut rows = stmt.raw_query();
                let mut out = Vec::new();
                while let Some(row) = rows.next()? {
                    out.push(f(&Row::Sqlite(row))?);
                }
                Ok(out)
            }
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
            Db::Sqlite(_) => Err(Error::new(
                ErrorKind::Storage,
                format!("a statement of arrays runs on PostgreSQL only: {postgres}"),
            )),
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
            Db::Sqlite(conn) => {
                conn.prepare_cached("COMMIT")?.execute([])?;
                Ok(())
            }
            Db::Postgres(pg) => pg.commit(),
        }
    }
}

/// Binds every parameter of a SQLite statement in place: no list of references is built per statement, which on
/// the writer's hot path is measurable. Every parameter is bound on each use, so nothing is left from the last.
///
/// SQLite numbers a statement's parameters in the order they first appear, and knows `$N` by its name: each is
/// bound to value N, wherever it first appears.
fn bind_sqlite(stmt: &mut rusqlite::Statement<'_>, params: &Params<'_>, sql: &str) -> Result<()> {
    let count = stmt.parameter_count();
    if params.0.len() != count {
        return Err(Error::new(
            ErrorKind::Storage,
            format!(
                "{} values for the {count} parameters of {sql}",
                params.0.len()
            ),
        ));
    }
    for index in 1..=count {
        let number = stmt
            .parameter_name(index)
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=count).contains(n))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Storage,
                    format!("the parameters of {sql} are not $1 to ${count}"),
                )
            })?;
        stmt.raw_bind_parameter(index, &params.0[number - 1])?;
    }
    Ok(())
}

/// Whether a statement only reads: its rows returned are not rows written. Every statement of the engine that
/// writes and returns rows begins with `INSERT`, `UPDATE`, `DELETE` or `WITH`.
fn is_read_only(sql: &str) -> bool {
    let head = sql.trim_start();
    head.len() >= 6 && head[..6].eq_ignore_ascii_case("SELECT")
}

/// `values`, rows of `width` values one after another, as one list per column: the arrays of a PostgreSQL
/// statement that `unnest`s them back into rows.
pub(crate) fn columns(width: usize, values: Vec<Value<'_>>) -> Vec<Vec<Value<'_>>> {
    let rows = values.len() / width;
    let mut columns: Vec<Vec<Value<'_>>> = (0..width).map(|_| Vec::with_capacity(rows)).collect();
    for (i, value) in values.into_iter().enumerate() {
        columns[i % width].push(value);
    }
    columns
}

/// A statement over many rows of values at once.
///
/// On SQLite it is `head VALUES ($1,…,$w),($w+1,…),… tail`, in statements of 64, 32, 16, 8, 4, 2 and 1 rows, so
/// that any number of rows takes at most a few statements and SQLite prepares at most seven texts of it (only their
/// placeholders are generated). On PostgreSQL, where each statement is a round trip and that is most of the cost,
/// one statement takes every row: its text, written out, binds one array per column (`$1` the first column's
/// values, and so on), turned back into rows by `unnest … WITH ORDINALITY` in the order they were given.
pub(crate) struct MultiRow {
    /// How many values a row has.
    width: usize,
    /// SQLite's head and tail, around the rows; `None` where the statement runs on PostgreSQL only.
    sqlite: Option<(&'static str, &'static str)>,
    /// PostgreSQL's statement of arrays; empty where the statement runs on SQLite only.
    postgres: &'static str,
    texts: std::sync::OnceLock<Vec<String>>,
}

impl MultiRow {
    const SIZES: [usize; 7] = [64, 32, 16, 8, 4, 2, 1];

    /// Rows of `width` values: on SQLite, between `head` and `tail` (an `ON CONFLICT` clause, say; it may be
    /// empty); on PostgreSQL, the statement of arrays `postgres`.
    pub const fn new(
        width: usize,
        head: &'static str,
        tail: &'static str,
        postgres: &'static str,
    ) -> Self {
        MultiRow {
            width,
            sqlite: Some((head, tail)),
            postgres,
            texts: std::sync::OnceLock::new(),
        }
    }

    /// Rows only SQLite writes this way.
    pub const fn sqlite_only(width: usize, head: &'static str, tail: &'static str) -> Self {
        MultiRow::new(width, head, tail, "")
    }

    /// A statement of arrays that only PostgreSQL runs.
    pub const fn postgres_only(width: usize, postgres: &'static str) -> Self {
        MultiRow {
            width,
            sqlite: None,
            postgres,
            texts: std::sync::OnceLock::new(),
        }
    }

    /// PostgreSQL's statement of arrays.
    pub fn postgres(&self) -> &'static str {
        self.postgres
    }

    /// SQLite's statement for `rows` rows, one of 64, 32, 16, 8, 4, 2 or 1; `None` for a statement only PostgreSQL
    /// runs.
    pub fn sqlite_text(&self, rows: usize) -> Option<&str> {
        let (head, tail) = self.sqlite?;
        let texts = self.texts.get_or_init(|| {
            Self::SIZES
                .iter()
                .map(|&n| {
                    let rows: Vec<String> = (0..n)
                        .map(|row| {
                            let values: Vec<String> = (1..=self.width)
                                .map(|column| format!("${}", row * self.width + column))
                                .collect();
                            format!("({})", values.join(","))
                        })
                        .collect();
                    format!("{head} VALUES {} {tail}", rows.join(","))
                })
                .collect()
        });
        let index = Self::SIZES
            .iter()
            .position(|&n| n == rows)
            .expect("rows is one of SIZES");
        Some(&texts[index])
    }

    /// Writes `values`, a row's worth after another, in order.
    pub fn execute(&self, db: &Db<'_>, values: Vec<Value<'_>>) -> Result<()> {
        self.query(db, values, |_| Ok(())).map(drop)
    }

    /// Runs the statement over `values` (a `RETURNING` one, say); `f` reads each row it returns.
    pub fn query<T>(
        &self,
        db: &Db<'_>,
        values: Vec<Value<'_>>,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let width = self.width;
        debug_assert_eq!(values.len() % width, 0);
        let mut rest = values.len() / width;
        if rest == 0 {
            return Ok(Vec::new());
        }
        if db.is_postgres() {
            let postgres = Sql::postgres_only(self.postgres).text_for(true)?;
            return db.query_arrays(postgres, Vec::new(), columns(self.width, values), f);
        }
        let mut values = values.into_iter();
        let mut out = Vec::new();
        while rest > 0 {
            let rows = Self::SIZES
                .into_iter()
                .find(|&n| n <= rest)
                .expect("1 is in SIZES");
            let chunk: Vec<Value<'_>> = values.by_ref().take(rows * width).collect();
            let text = self.sqlite_text(rows).ok_or_else(|| {
                Error::new(
                    ErrorKind::Storage,
                    format!("a statement runs on PostgreSQL only: {}", self.postgres),
                )
            })?;
            out.extend(db.query(Sql::sqlite_only(text), &Params(chunk), &mut f)?);
            rest -= rows;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same statements on `db`: what they read back.
    fn exercise(db: &Db<'_>) -> Vec<(String, bool, Option<u32>, f64, i64)> {
        let absent: Option<u32> = None;
        for (name, paused, concurrency) in [("mail", true, absent), ("maps", false, Some(4u32))] {
            // `$2` before `$1`: each is bound by its number, not by where it stands.
            let changed = db
                .execute(
                    Sql::both("INSERT INTO queues (paused, name, concurrency) VALUES ($2, $1, $3)"),
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
        let e = db
            .query_one(Sql::both("SELECT $1 + $3"), &params![1, 2], |r| {
                r.get::<i64>(0)
            })
            .unwrap_err();
        assert!(e.to_string().contains("are not $1 to $2"), "{e}");
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

    #[test]
    fn statements_run_on_sqlite() {
        let mut conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::store::sqlite::migrations::migrate(&mut conn, 0).unwrap();
        assert_eq!(exercise(&Db::Sqlite(&conn)), expected());
    }

    #[test]
    fn the_same_statements_run_on_postgresql() {
        let admin = std::env::var("CAIRN_TEST_POSTGRES_URL").expect(
            "CAIRN_TEST_POSTGRES_URL is not set: run the tests with scripts/test, which starts a private \
             PostgreSQL cluster",
        );
        let name = format!("cairn_unit_{}", std::process::id());
        let mut admin_client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        // Two statements: several in one string would run as one transaction, where these cannot.
        admin_client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        admin_client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        crate::store::postgres::migrations::migrate(&mut client, 0).unwrap();
        let prepared = RefCell::new(HashMap::new());
        let db = Db::Postgres(PgTransaction::new(client.transaction().unwrap(), &prepared));
        let got = exercise(&db);
        drop(db);
        drop(client);
        admin_client
            .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .unwrap();
        assert_eq!(got, expected());
    }
}
