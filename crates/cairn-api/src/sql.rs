//! Read-only SQL (`POST /v1/sql`): one statement, and the rows it returned.

use std::time::Duration;

use cairn::{SqlQuery, SqlResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::ADMIN;
use crate::millis::to_millis;
use crate::route::{Answer, RouteVisitor, route};

/// One read-only SQL statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SqlRequest {
    /// One `SELECT` over the tables or the documented views (`cairn_jobs`, `cairn_attempts`, `cairn_activity`,
    /// `cairn_stats_minute`, `cairn_stats_hour`, `cairn_workers`).
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub query: String,
    /// At most this many rows (1 to 10,000; 1,000 when absent).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10_000))]
    pub limit: Option<u32>,
    /// Stop the query after this many milliseconds (at most 30,000; 5,000 when absent).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 30_000))]
    pub timeout_ms: Option<u64>,
}

impl SqlRequest {
    /// The engine's form, with the defaults filled in.
    pub fn to_query(&self) -> SqlQuery {
        let defaults = SqlQuery::new(self.query.clone());
        SqlQuery {
            limit: self.limit.unwrap_or(defaults.limit),
            timeout: self
                .timeout_ms
                .map_or(defaults.timeout, Duration::from_millis),
            ..defaults
        }
    }
}

impl From<&SqlQuery> for SqlRequest {
    fn from(q: &SqlQuery) -> Self {
        SqlRequest {
            query: q.sql.clone(),
            limit: Some(q.limit),
            timeout_ms: Some(to_millis(q.timeout)),
        }
    }
}

/// What a query returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct SqlBody {
    /// The columns' names.
    pub columns: Vec<String>,
    /// The rows, each value as JSON (a blob as an array of bytes).
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Vec<Object>>))]
    pub rows: Vec<Vec<Value>>,
    /// Whether rows were cut off at the limit.
    pub truncated: bool,
}

impl From<SqlResult> for SqlBody {
    fn from(r: SqlResult) -> Self {
        SqlBody {
            columns: r.columns,
            rows: r.rows,
            truncated: r.truncated,
        }
    }
}

impl SqlBody {
    /// The engine's form.
    pub fn into_result(self) -> SqlResult {
        SqlResult {
            columns: self.columns,
            rows: self.rows,
            truncated: self.truncated,
        }
    }
}

impl Answer<SqlResult> for SqlBody {
    fn from_output(result: SqlResult) -> Self {
        result.into()
    }

    fn into_output(self) -> cairn::Result<SqlResult> {
        Ok(self.into_result())
    }
}

/// The SQL console's route, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_sql_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<SqlQuery>();
}

route! {
    SqlQuery: Post "/v1/sql", params [], tag "stats", id "sql", access ADMIN, reach Server,
    summary "Runs one read-only SQL statement over the queue's database. Anything but a read is refused; a query \
        stops at its time limit and never blocks the queue's writes.",
    done "The rows",
    errors [(400, "Not one read, SQLite's complaint, too slow, or a bad limit")],
    path |_r| [],
    body SqlRequest = |r| SqlRequest::from(r),
    answer SqlBody,
    from |_received, body| Ok(body.to_query()),
    reads,
    waits |r| r.timeout,
}
