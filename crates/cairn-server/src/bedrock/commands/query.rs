//! Query, the command of Bedrock's DB plugin that the seed's sample session ends with (`Query: SELECT * FROM
//! jobs;`): one read-only statement over Bedrock's own table, answered as a text table (or JSON with
//! `Format: json`). For that statement `jobs` is Bedrock's table made from Cairn's jobs ([`bedrock_jobs`]: its
//! columns, states, priorities and times, for the jobs this protocol sees), and the statement goes through the
//! engine's read-only SQL, with its walls and limits (`cairn sql`): jobs change through the Jobs commands, never
//! through a query.

use cairn::Jobs;
use std::time::Duration;

use cairn::SqlQuery;
use serde_json::{Value, json};

use crate::bedrock::commands::create::engine_error;
use crate::bedrock::commands::values::{self, status};
use crate::bedrock::commands::{Answer, BedrockCommands};
use crate::bedrock::frame::{Request, Response};

/// The longest query, in bytes (Bedrock's limit on a query's size).
const MAX_QUERY: usize = 1024 * 1024;

/// How long a query may run.
const QUERY_TIME: Duration = Duration::from_secs(10);

/// Bedrock's spelling of the view's columns: PostgreSQL names them in lower case.
const COLUMNS: [&str; 11] = [
    "created",
    "jobID",
    "state",
    "name",
    "nextRun",
    "lastRun",
    "repeat",
    "data",
    "priority",
    "parentJobID",
    "retryAfter",
];

impl BedrockCommands {
    /// Query: `Query: …sql…` on the method line, or the verb `Query` with a `query` header.
    pub(super) async fn query(&self, request: &Request) -> Answer {
        let sql = query_text(request).trim();
        if sql.is_empty() || sql.len() > MAX_QUERY {
            return Err(status("402 Missing query"));
        }
        let Some(statement) = sql.strip_suffix(';') else {
            return Err(status("502 Query Missing Semicolon"));
        };
        let statement = statement.trim_end();
        let first_word = statement
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if !matches!(first_word.as_str(), "select" | "with" | "values") {
            return Err(bad_query(
                "must only read (SELECT): jobs change through the Jobs commands",
            ));
        }
        // `jobs` is Bedrock's table for this statement: a name in a WITH hides the table of that name. The line
        // break ends a `--` comment the statement may end with.
        let wrapped = format!(
            "WITH jobs AS ({}) SELECT * FROM ({statement}\n) AS bedrock_query",
            bedrock_jobs(self.queue.is_postgres())
        );
        let result = self
            .queue
            .sql(SqlQuery {
                sql: wrapped,
                limit: cairn::MAX_SQL_ROWS,
                timeout: QUERY_TIME,
            })
            .await
            .map_err(|e| {
                if e.kind() == cairn::ErrorKind::InvalidInput {
                    bad_query(e.message())
                } else {
                    // The database could not be read: not the query's fault.
                    engine_error(e)
                }
            })?;
        let columns: Vec<String> = result.columns.iter().map(|c| bedrock_spelling(c)).collect();
        let body = if request
            .headers
            .get("format")
            .is_some_and(|f| f.eq_ignore_ascii_case("json"))
        {
            json!({"headers": columns, "rows": result.rows}).to_string()
        } else {
            text_table(&columns, &result.rows)
        };
        let mut response = Response::json(body);
        if result.truncated {
            response
                .headers
                .push(("rowsTruncated".to_owned(), cairn::MAX_SQL_ROWS.to_string()));
        }
        Ok(response)
    }
}

/// Bedrock's table of jobs (reference §2), as a query of Cairn's, in the dialect of the database that runs it:
/// the jobs of Bedrock's queues, without the standalone ones that finished (Bedrock deletes them), with Bedrock's
/// columns in its order, its states, its priorities, and its times (`YYYY-MM-DD HH:MM:SS`, UTC). PostgreSQL folds
/// the names a statement writes without quotes to lower case (`jobID` is `jobid`), so its columns are named so,
/// and the answer spells them as Bedrock does ([`bedrock_spelling`]). Inside the WITH that names this `jobs`,
/// SQLite's own table is `main.jobs`; PostgreSQL's non-recursive WITH does not see its own name.
fn bedrock_jobs(postgres: bool) -> String {
    // PostgreSQL keeps a job's data as `json`, which has no `=` or `LIKE`; Bedrock's model, and SQLite's, is text.
    let (table, time, data) = if postgres {
        (
            "jobs",
            "to_char(to_timestamp(({ms}) / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')",
            "CAST(data AS TEXT)",
        )
    } else {
        (
            "main.jobs",
            "strftime('%Y-%m-%d %H:%M:%S', ({ms}) / 1000, 'unixepoch')",
            "data",
        )
    };
    let time = |ms: &str| time.replace("{ms}", ms);
    let tag = values::RETRY_AFTER_TAG;
    // A RUNQUEUED job is due again when its time runs out: the end of its lease.
    let next_run = time(
        "CASE WHEN state = 'running' AND retry_after IS NOT NULL THEN lease_expires_at ELSE run_at END",
    );
    format!(
        "SELECT {created} AS created, id AS jobid, \
         CASE WHEN state = 'scheduled' OR state = 'queued' THEN 'QUEUED' \
         WHEN state = 'running' AND retry_after IS NOT NULL THEN 'RUNQUEUED' \
         WHEN state = 'running' THEN 'RUNNING' WHEN state = 'waiting' THEN 'PAUSED' \
         WHEN state = 'failed' THEN 'FAILED' WHEN state = 'cancelled' THEN 'CANCELLED' \
         ELSE 'FINISHED' END AS state, \
         name, {next_run} AS nextrun, {last_run} AS lastrun, COALESCE(schedule, '') AS repeat, {data} AS data, \
         priority + {offset} AS priority, COALESCE(parent_id, 0) AS parentjobid, \
         COALESCE(retry_after, '') AS retryafter \
         FROM (SELECT j.*, (SELECT MIN(substr(tag, {from})) FROM job_tags \
         WHERE job_id = j.id AND substr(tag, 1, {len}) = '{tag}') AS retry_after \
         FROM {table} AS j WHERE (queue = '{queue}' OR queue = '{mock}') \
         AND (state != 'completed' OR parent_id IS NOT NULL)) AS bedrock",
        created = time("created_at"),
        last_run = time("attempt_started_at"),
        offset = values::DEFAULT_PRIORITY,
        from = tag.len() + 1,
        len = tag.len(),
        queue = values::QUEUE,
        mock = values::MOCK_QUEUE,
    )
}

/// The statement: after `Query:` on the method line, or in the `query` header.
fn query_text(request: &Request) -> &str {
    let line = request.method_line.as_str();
    match line.get(..6) {
        Some(prefix) if prefix.eq_ignore_ascii_case("query:") => &line[6..],
        _ => request.headers.get("query").unwrap_or(""),
    }
}

/// `402 Bad query`, with what was wrong in an `error` header, as Bedrock answers a query it cannot run.
fn bad_query(message: &str) -> Response {
    let mut response = status("402 Bad query");
    response
        .headers
        .push(("error".to_owned(), message.to_owned()));
    response
}

/// A column's name as Bedrock spells it, when it is one of its table's.
fn bedrock_spelling(column: &str) -> String {
    COLUMNS
        .iter()
        .find(|c| c.eq_ignore_ascii_case(column))
        .map_or_else(|| column.to_owned(), |c| (*c).to_owned())
}

/// Bedrock's text table: the column names, then a line per row, values joined by ` | `; a null is empty.
fn text_table(columns: &[String], rows: &[Vec<Value>]) -> String {
    let mut out = columns.join(" | ");
    out.push('\n');
    for row in rows {
        let values: Vec<String> = row
            .iter()
            .map(|value| match value {
                Value::Null => String::new(),
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect();
        out.push_str(&values.join(" | "));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_table_is_names_then_rows_joined_by_bars() {
        let columns = vec!["jobID".to_owned(), "name".to_owned(), "lastRun".to_owned()];
        let rows = vec![
            vec![json!(1), json!("CheckLiveness"), json!(null)],
            vec![json!(2), json!("a | b"), json!("2026-01-01 00:00:00")],
        ];
        assert_eq!(
            text_table(&columns, &rows),
            "jobID | name | lastRun\n1 | CheckLiveness | \n2 | a | b | 2026-01-01 00:00:00\n"
        );
    }

    #[test]
    fn columns_take_bedrocks_spelling_whatever_the_database_folded() {
        assert_eq!(bedrock_spelling("jobid"), "jobID");
        assert_eq!(bedrock_spelling("NEXTRUN"), "nextRun");
        assert_eq!(bedrock_spelling("n"), "n");
    }
}
