//! Read-only SQL over the queue's database (`cairn sql`, `POST /v1/sql`), as Bedrock's sample session does with
//! `SELECT * FROM jobs`. The documented views (`cairn_jobs`, `cairn_attempts`, `cairn_activity`,
//! `cairn_stats_minute`, `cairn_stats_hour`, `cairn_workers`; migration 0013) show times as RFC 3339 text.
//!
//! Three walls keep it a read that cannot hurt the queue: the connection is opened read-only with `query_only`
//! (nothing can write), an authorizer allows reading and nothing else (no ATTACH of other files, no PRAGMA that
//! changes a setting), and a progress handler stops a query at its time limit. A reader never blocks SQLite's
//! writer in WAL mode; the time limit keeps a long read from holding back the WAL's checkpoint for long.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;

use crate::error::{Error, Result};
use crate::store::sqlite::connection;

/// The most rows a query returns; more are cut off (and the result says so).
pub const MAX_SQL_ROWS: u32 = 10_000;

/// How long a query may run at most.
pub const MAX_SQL_TIME: Duration = Duration::from_secs(30);

/// The largest text or blob a query may make (SQLite's length limit on its connection).
const MAX_VALUE_BYTES: i32 = 16 * 1024 * 1024;

/// About how much a result may hold in all; rows beyond it are cut off as at the row limit.
pub(crate) const MAX_RESULT_BYTES: usize = 32 * 1024 * 1024;

/// How many queries run at once; more wait for a turn, so that queries cannot take every blocking thread.
pub(crate) const CONCURRENT_QUERIES: usize = 4;

/// A read-only query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlQuery {
    /// One `SELECT` (or `WITH … SELECT`, or `VALUES`) statement.
    pub sql: String,
    /// At most this many rows, 1 to [`MAX_SQL_ROWS`].
    pub limit: u32,
    /// Stop the query after this long, at most [`MAX_SQL_TIME`].
    pub timeout: Duration,
}

impl SqlQuery {
    /// `sql` with 1,000 rows at most and five seconds.
    pub fn new(sql: impl Into<String>) -> SqlQuery {
        SqlQuery {
            sql: sql.into(),
            limit: 1000,
            timeout: Duration::from_secs(5),
        }
    }
}

/// What a query returned.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlResult {
    /// The columns' names.
    pub columns: Vec<String>,
    /// The rows, each value as JSON: null, an integer, a real, text; a blob as an array of bytes.
    pub rows: Vec<Vec<serde_json::Value>>,
    /// Whether rows were cut off at the limit.
    pub truncated: bool,
}

/// The query's text, once its limits are checked.
pub(crate) fn checked(query: &SqlQuery) -> Result<&str> {
    if !(1..=MAX_SQL_ROWS).contains(&query.limit) {
        return Err(Error::invalid(
            "limit",
            format!("must be between 1 and {MAX_SQL_ROWS}, got {}", query.limit),
        ));
    }
    if query.timeout.is_zero() || query.timeout > MAX_SQL_TIME {
        return Err(Error::invalid(
            "timeout",
            format!(
                "must be more than 0 and at most {MAX_SQL_TIME:?}, got {:?}",
                query.timeout
            ),
        ));
    }
    let sql = query.sql.trim();
    if sql.is_empty() {
        return Err(Error::invalid("query", "must not be empty"));
    }
    Ok(sql)
}

/// Runs `query` on a fresh read-only connection to the SQLite database at `path` (PostgreSQL's is
/// `store/postgres/sql.rs`).
pub(crate) fn run(path: &Path, query: &SqlQuery) -> Result<SqlResult> {
    let sql = checked(query)?;
    let mut conn = connection::open_reader(path)?;
    // A value cannot grow past this, so no single row can exhaust memory.
    conn.set_limit(
        rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH,
        MAX_VALUE_BYTES,
    )
    .map_err(|e| Error::storage("limiting value lengths", e))?;
    // Without either wall the query does not run.
    conn.authorizer(Some(only_reads))
        .map_err(|e| Error::storage("installing the read-only authorizer", e))?;
    let deadline = Instant::now() + query.timeout;
    conn.progress_handler(10_000, Some(move || Instant::now() > deadline))
        .map_err(|e| Error::storage("installing the time limit", e))?;
    let refused = |e: rusqlite::Error| match e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::OperationInterrupted =>
        {
            Error::invalid(
                "query",
                format!(
                    "ran longer than {:?}: narrow it, or give it more time",
                    query.timeout
                ),
            )
        }
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::AuthorizationForStatementDenied =>
        {
            Error::invalid(
                "query",
                "must only read (SELECT): this statement would do something else",
            )
        }
        rusqlite::Error::MultipleStatement => {
            Error::invalid("query", "must be one statement, got more")
        }
        other => Error::invalid("query", other),
    };
    let mut stmt = conn.prepare(sql).map_err(refused)?;
    if !stmt.readonly() {
        return Err(Error::invalid(
            "query",
            "must only read (SELECT): this statement would write",
        ));
    }
    let columns: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let width = columns.len();
    let mut rows = Vec::new();
    let mut truncated = false;
    let mut bytes = 0;
    let mut cursor = stmt.query([]).map_err(refused)?;
    while let Some(row) = cursor.next().map_err(refused)? {
        if rows.len() == query.limit as usize || bytes > MAX_RESULT_BYTES {
            truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            let value = row.get_ref(i).map_err(refused)?;
            bytes += size(value);
            values.push(json(value));
        }
        rows.push(values);
    }
    Ok(SqlResult {
        columns,
        rows,
        truncated,
    })
}

/// About how many bytes a value takes as JSON (a blob's bytes as numbers take up to four each).
fn size(value: ValueRef<'_>) -> usize {
    match value {
        ValueRef::Null | ValueRef::Integer(_) | ValueRef::Real(_) => 8,
        ValueRef::Text(t) => t.len() + 2,
        ValueRef::Blob(b) => b.len() * 4,
    }
}

/// A SQLite value as JSON.
fn json(value: ValueRef<'_>) -> serde_json::Value {
    match value {
        ValueRef::Null => serde_json::Value::Null,
        ValueRef::Integer(i) => serde_json::Value::from(i),
        ValueRef::Real(r) => {
            serde_json::Number::from_f64(r).map_or(serde_json::Value::Null, Into::into)
        }
        ValueRef::Text(t) => serde_json::Value::from(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => serde_json::Value::from(b.to_vec()),
    }
}

/// Allows reading tables and views, calling functions and recursing (WITH RECURSIVE); refuses everything else,
/// ATTACH and PRAGMA among them (`query_only` already refuses writes).
fn only_reads(context: AuthContext<'_>) -> Authorization {
    match context.action {
        AuthAction::Select
        | AuthAction::Read { .. }
        | AuthAction::Function { .. }
        | AuthAction::Recursive => Authorization::Allow,
        _ => Authorization::Deny,
    }
}
