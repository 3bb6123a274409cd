//! Read-only SQL over the queue's database (`cairn sql`, `POST /v1/sql`), as Bedrock's sample session does with
//! `SELECT * FROM jobs`. The documented views (`cairn_jobs`, `cairn_attempts`, `cairn_activity`,
//! `cairn_stats_minute`, `cairn_stats_hour`, `cairn_workers`; migration 0013) show times as RFC 3339 text.
//!
//! Each backend runs it its own way (`store/sqlite/sql.rs`, `store/postgres/sql.rs`). On SQLite, three walls keep it
//! a read that cannot hurt the queue: the connection is opened read-only with `query_only`
//! (nothing can write), an authorizer allows reading and nothing else (no ATTACH of other files, no PRAGMA that
//! changes a setting), and a progress handler stops a query at its time limit. A reader never blocks SQLite's
//! writer in WAL mode; the time limit keeps a long read from holding back the WAL's checkpoint for long.

use std::time::Duration;

use crate::error::{Error, Result};

/// The most rows a query returns; more are cut off (and the result says so).
pub const MAX_SQL_ROWS: u32 = 10_000;

/// How long a query may run at most.
pub const MAX_SQL_TIME: Duration = Duration::from_secs(30);

/// The most a result holds, about, in bytes of its values: rows that would take it past this are cut off, as at
/// the row limit (a first row larger than this is kept whole).
pub const MAX_SQL_BYTES: usize = 8 * 1024 * 1024;

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
