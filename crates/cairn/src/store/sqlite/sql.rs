//! Read-only SQL on SQLite (`cairn sql`): a read-only connection with `query_only`, an authorizer that allows
//! reading and nothing else, and a progress handler that stops a query at its time limit (see `crate::sql`).

use std::path::Path;
use std::time::Instant;

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::ValueRef;

use crate::error::{Error, Result};
use crate::sql::{MAX_SQL_BYTES, SqlQuery, SqlResult, checked};
use crate::store::sqlite::connection;

/// The largest text or blob a query may make (SQLite's length limit on its connection).
const MAX_VALUE_BYTES: i32 = 16 * 1024 * 1024;

/// Runs `query` on a fresh read-only connection to the SQLite database at `path`.
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
        if rows.len() == query.limit as usize {
            truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(width);
        let mut row_bytes = 0;
        for i in 0..width {
            let value = row.get_ref(i).map_err(refused)?;
            row_bytes += size(value);
            values.push(json(value));
        }
        if !rows.is_empty() && bytes + row_bytes > MAX_SQL_BYTES {
            truncated = true;
            break;
        }
        bytes += row_bytes;
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
