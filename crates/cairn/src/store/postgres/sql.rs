//! Read-only SQL on PostgreSQL (`Jobs::sql` for a queue on PostgreSQL; SQLite's is `sql.rs`), with the same
//! documented views and limits.
//!
//! The walls: the query runs in a `READ ONLY` transaction on a session of its own, with `statement_timeout` at its
//! time limit; it is run as a subquery (`SELECT * FROM (…) LIMIT n`), so it must be one `SELECT`, `WITH … SELECT`
//! or `VALUES` (no data-modifying `WITH`, no `COPY`, no second statement), and at most one row past the limit is
//! read; and calls of PostgreSQL's administration functions (`pg_*`: reading server files, ending sessions) and
//! of functions that run SQL given as text (`query_to_xml` and its family) are refused, since the database user
//! may be a superuser.

use std::sync::Arc;

use tokio_postgres::SimpleQueryMessage;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::error::{Error, Result};
use crate::sql::{MAX_SQL_BYTES, SqlQuery, SqlResult, checked};
use crate::store::postgres::hosts::Hosts;
use crate::store::postgres::session::{Opening, Session};
use crate::store::postgres::settings::CALL_MARGIN;

/// Prefixes of the functions a query may not call.
const REFUSED_CALLS: &[&str] = &["pg_", "lo_", "dblink", "query_to_xml", "cursor_to_xml"];

/// Runs `query` on a fresh session to the primary of `hosts`, each call bounded a little past the query's time.
pub(crate) fn run(hosts: &Arc<Hosts>, query: &SqlQuery) -> Result<SqlResult> {
    let sql = checked(query)?;
    let sql = sql.strip_suffix(';').unwrap_or(sql).trim_end();
    refuse_writes(sql)?;
    refuse_calls(sql)?;
    let session = Session::open_with(
        hosts,
        Opening {
            role: "cairn sql",
            extra: "",
            notifications: None,
            call_timeout: query.timeout + CALL_MARGIN,
            stop: None,
            // The query's transaction is read-only: a write it tries is refused as such, which says nothing of
            // the server.
            writes: false,
        },
    )?;
    read(&session, sql, query)
}

fn read(session: &Session, sql: &str, query: &SqlQuery) -> Result<SqlResult> {
    let client = session.client();
    let storage = |e: tokio_postgres::Error| Error::storage("running a read-only query", e);
    session.call(
        client.batch_execute(&format!(
            "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = {}",
            query.timeout.as_millis().max(1)
        )),
        storage,
    )?;
    let wrapped = format!(
        "SELECT * FROM ({sql}\n) AS cairn_query LIMIT {}",
        u64::from(query.limit) + 1
    );
    let refused = |e: tokio_postgres::Error| refusal(e, query);
    // Prepared first for the columns' types; run as a simple query, whose values come as text.
    let statement = session.call(client.prepare(&wrapped), refused)?;
    let columns: Vec<String> = statement
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    let types: Vec<Type> = statement
        .columns()
        .iter()
        .map(|c| c.type_().clone())
        .collect();
    let messages = session.call(client.simple_query(&wrapped), refused)?;
    let mut rows = Vec::new();
    let mut truncated = false;
    let mut bytes = 0;
    for message in &messages {
        let SimpleQueryMessage::Row(row) = message else {
            continue;
        };
        if rows.len() == query.limit as usize {
            truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(types.len());
        let mut row_bytes = 0;
        for (i, ty) in types.iter().enumerate() {
            let text = row.get(i);
            row_bytes += text.map_or(8, |t| t.len() + 2);
            values.push(json(text, ty));
        }
        if !rows.is_empty() && bytes + row_bytes > MAX_SQL_BYTES {
            truncated = true;
            break;
        }
        bytes += row_bytes;
        rows.push(values);
    }
    session.call(client.batch_execute("ROLLBACK"), storage)?;
    Ok(SqlResult {
        columns,
        rows,
        truncated,
    })
}

/// What a query's error tells its author: its time ran out, it would write, it is not one statement, or what
/// PostgreSQL found wrong with it; an error of the server or the link is the database's (`Unavailable` when it
/// passes with time), not the query's.
fn refusal(e: tokio_postgres::Error, query: &SqlQuery) -> Error {
    let message = || {
        e.as_db_error()
            .map_or_else(|| e.to_string(), |db| db.message().to_owned())
    };
    let Some(code) = e.code() else {
        return Error::storage("running a read-only query", e);
    };
    match code {
        c if *c == SqlState::QUERY_CANCELED => Error::invalid(
            "query",
            format!(
                "ran longer than {:?}: narrow it, or give it more time",
                query.timeout
            ),
        ),
        c if *c == SqlState::READ_ONLY_SQL_TRANSACTION => Error::invalid(
            "query",
            "must only read (SELECT): this statement would write",
        ),
        // A `WITH` that deletes or updates, which a subquery may not hold.
        c if *c == SqlState::FEATURE_NOT_SUPPORTED && message().contains("data-modifying") => {
            Error::invalid(
                "query",
                "must only read (SELECT): this statement would write",
            )
        }
        c if *c == SqlState::SYNTAX_ERROR => Error::invalid(
            "query",
            format!(
                "must be one SELECT, WITH … SELECT or VALUES statement: {}",
                message()
            ),
        ),
        // The connection, the server's resources or state, a conflict: not the query's doing.
        c if ["08", "40", "53", "55", "57", "58", "XX"]
            .iter()
            .any(|class| c.code().starts_with(class)) =>
        {
            Error::storage("running a read-only query", e)
        }
        _ => Error::invalid("query", message()),
    }
}

/// A value PostgreSQL sent as text, as JSON by its column's type: numbers and flags as themselves, `bytea` as an
/// array of bytes (as SQLite's blobs), anything else as its text.
fn json(text: Option<&str>, ty: &Type) -> serde_json::Value {
    let Some(text) = text else {
        return serde_json::Value::Null;
    };
    let as_text = || serde_json::Value::from(text);
    match *ty {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => {
            text.parse::<i64>().map_or_else(|_| as_text(), Into::into)
        }
        Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => text
            .parse::<i64>()
            .map(serde_json::Value::from)
            .ok()
            .or_else(|| {
                text.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Into::into)
            })
            .unwrap_or_else(as_text),
        Type::BOOL => serde_json::Value::from(text == "t"),
        Type::BYTEA => text
            .strip_prefix("\\x")
            .and_then(|hex| {
                (0..hex.len())
                    .step_by(2)
                    .map(|i| {
                        hex.get(i..i + 2)
                            .and_then(|b| u8::from_str_radix(b, 16).ok())
                    })
                    .collect::<Option<Vec<u8>>>()
            })
            .map_or_else(as_text, Into::into),
        _ => as_text(),
    }
}

/// Refuses a statement that does not start as a read does (`SELECT`, `WITH`, `VALUES`, `TABLE`, or a
/// parenthesis), in the words SQLite's side uses.
fn refuse_writes(sql: &str) -> Result<()> {
    let first: String = sql
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_lowercase();
    let reads = sql.trim_start().starts_with('(')
        || matches!(first.as_str(), "select" | "with" | "values" | "table");
    if !reads {
        return Err(Error::invalid(
            "query",
            "must only read (SELECT): this statement would do something else",
        ));
    }
    Ok(())
}

/// Refuses a query that calls one of [`REFUSED_CALLS`]: a name with one of those prefixes followed by `(`,
/// wherever it stands (in a string too, which `query_to_xml` would run).
fn refuse_calls(sql: &str) -> Result<()> {
    let lower = sql.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
    for prefix in REFUSED_CALLS {
        let mut from = 0;
        while let Some(at) = lower[from..].find(prefix) {
            let start = from + at;
            from = start + prefix.len();
            if start > 0 && is_name(bytes[start - 1]) {
                continue;
            }
            let mut end = start;
            while end < bytes.len() && is_name(bytes[end]) {
                end += 1;
            }
            let name = &sql[start..end];
            let mut next = end;
            while next < bytes.len() && (bytes[next].is_ascii_whitespace() || bytes[next] == b'"') {
                next += 1;
            }
            if bytes.get(next) == Some(&b'(') {
                return Err(Error::invalid(
                    "query",
                    format!(
                        "may not call {name}: PostgreSQL's administration functions, large objects and functions \
                         that run SQL given as text are refused"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn administration_functions_are_refused_wherever_they_are_called() {
        for sql in [
            "SELECT pg_read_file('/etc/passwd')",
            "SELECT * FROM jobs WHERE PG_TERMINATE_BACKEND (1)",
            "SELECT query_to_xml('SELECT 1', true, true, '')",
            "SELECT lo_import('/etc/passwd')",
        ] {
            assert!(refuse_calls(sql).is_err(), "{sql}");
        }
        for sql in [
            "SELECT * FROM pg_stat_activity",
            "SELECT my_pg_thing(1) FROM jobs",
            "SELECT 'pg_' AS x",
            "SELECT count(*) FROM cairn_jobs",
        ] {
            assert!(refuse_calls(sql).is_ok(), "{sql}");
        }
    }

    #[test]
    fn only_reads_are_taken() {
        for sql in [
            "SELECT 1",
            "  with x AS (SELECT 1) SELECT * FROM x",
            "VALUES (1)",
            "(SELECT 1)",
            "TABLE jobs",
        ] {
            assert!(refuse_writes(sql).is_ok(), "{sql}");
        }
        for sql in [
            "DELETE FROM jobs",
            "update jobs set state = 'x'",
            "COPY jobs TO '/tmp/x'",
            "VACUUM",
            "",
        ] {
            assert!(refuse_writes(sql).is_err(), "{sql}");
        }
    }

    #[test]
    fn values_come_back_as_json_by_type() {
        assert_eq!(json(Some("42"), &Type::INT8), serde_json::json!(42));
        assert_eq!(json(Some("0.5"), &Type::FLOAT8), serde_json::json!(0.5));
        assert_eq!(json(Some("t"), &Type::BOOL), serde_json::json!(true));
        assert_eq!(
            json(Some("\\x0aff"), &Type::BYTEA),
            serde_json::json!([10, 255])
        );
        assert_eq!(json(Some("x"), &Type::TEXT), serde_json::json!("x"));
        assert_eq!(json(None, &Type::TEXT), serde_json::Value::Null);
    }
}
