//! Read-only SQL: the documented views answer, anything but a read is refused, and a query stops at its limits.

use cairn::Jobs;
use std::time::Duration;

use cairn::{ErrorKind, JobState, Push, SqlQuery};
use serde_json::json;

use super::harness::TestQueue;

#[tokio::test]
async fn the_views_answer_selects_with_times_as_text() {
    let t = TestQueue::new().await;
    let id = t.push("report").await;
    t.queue
        .enqueue(Push::new("mail").tag("vip").tag("eu"))
        .await
        .unwrap();
    let result = t
        .queue
        .sql(SqlQuery::new(
            "SELECT id, name, state, created_at, tags FROM cairn_jobs ORDER BY id",
        ))
        .await
        .unwrap();
    assert_eq!(
        result.columns,
        ["id", "name", "state", "created_at", "tags"]
    );
    assert_eq!(
        result.rows,
        [
            vec![
                json!(id.0),
                json!("report"),
                json!("queued"),
                json!("2026-01-01T00:00:00.000Z"),
                json!(null)
            ],
            vec![
                json!(id.0 + 1),
                json!("mail"),
                json!("queued"),
                json!("2026-01-01T00:00:00.000Z"),
                json!("eu,vip")
            ],
        ]
    );
    assert!(!result.truncated);
    // The tables are readable too, as in Bedrock's sample session; and so are the other views.
    let raw = t
        .queue
        .sql(SqlQuery::new("SELECT count(*) AS n FROM jobs"))
        .await
        .unwrap();
    assert_eq!(raw.rows, [vec![json!(2)]]);
    for view in [
        "cairn_attempts",
        "cairn_activity",
        "cairn_stats_minute",
        "cairn_stats_hour",
        "cairn_workers",
    ] {
        t.queue
            .sql(SqlQuery::new(format!("SELECT * FROM {view}")))
            .await
            .unwrap_or_else(|e| panic!("{view}: {e}"));
    }
    let hour = t
        .queue
        .sql(SqlQuery::new(
            "SELECT hour, queue, name, added FROM cairn_stats_hour ORDER BY name",
        ))
        .await
        .unwrap();
    assert_eq!(
        hour.rows[0],
        [
            json!("2026-01-01T00:00:00Z"),
            json!("default"),
            json!("mail"),
            json!(1)
        ]
    );
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Queued);
    t.close().await;
}

#[tokio::test]
async fn anything_but_one_read_is_refused_and_changes_nothing() {
    let t = TestQueue::new().await;
    let id = t.push("x").await;
    let attach = format!(
        "ATTACH DATABASE '{}' AS other",
        t.dir.path().join("other.db").display()
    );
    for sql in [
        "DELETE FROM jobs",
        "UPDATE jobs SET state = 'failed'",
        "INSERT INTO job_tags VALUES (1, 'x')",
        "DROP TABLE jobs",
        "CREATE TABLE t (x)",
        attach.as_str(),
        "PRAGMA journal_mode = DELETE",
        "PRAGMA user_version = 5",
        "VACUUM",
        "BEGIN IMMEDIATE",
        "SELECT 1; DELETE FROM jobs",
        "WITH x AS (SELECT 1) DELETE FROM jobs",
        "SELECT * FROM no_such_table",
        "SELECT randomblob(100000000)",
        // Reading the server's files, for a queue on PostgreSQL whose user is a superuser.
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, true, '')",
        "",
    ] {
        let e = t.queue.sql(SqlQuery::new(sql)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{sql}: {e}");
        assert_eq!(e.field(), Some("query"), "{sql}: {e}");
    }
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Queued);
    assert!(!t.dir.path().join("other.db").exists());
    t.close().await;
}

#[tokio::test]
async fn a_query_stops_at_its_row_limit_and_its_time_limit() {
    let t = TestQueue::new().await;
    let many = t
        .queue
        .sql(SqlQuery {
            limit: 5,
            ..SqlQuery::new(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n",
            )
        })
        .await
        .unwrap();
    assert_eq!(many.rows.len(), 5);
    assert!(many.truncated);
    // Rows of a megabyte each stop at the result's size, whatever the row limit.
    let megabyte = if t.is_postgres() {
        "repeat('x', 1048576)"
    } else {
        "printf('%.*c', 1048576, 'x')"
    };
    let big = t
        .queue
        .sql(SqlQuery::new(format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12) SELECT i, {megabyte} FROM n"
        )))
        .await
        .unwrap();
    assert!(big.truncated);
    let held: usize = big
        .rows
        .iter()
        .map(|row| row[1].as_str().unwrap().len())
        .sum();
    assert!(
        !big.rows.is_empty() && held <= cairn::MAX_SQL_BYTES,
        "{} rows, {held} bytes",
        big.rows.len()
    );
    // A query that would run for ever is stopped, and the queue goes on meanwhile and after.
    let endless = SqlQuery {
        timeout: Duration::from_millis(300),
        ..SqlQuery::new(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n",
        )
    };
    let queue = t.queue.clone();
    let running = tokio::spawn(async move { queue.sql(endless).await });
    let id = t.push("during").await;
    let e = running.await.unwrap().unwrap_err();
    assert!(e.to_string().contains("ran longer than"), "{e}");
    assert_eq!(t.queue.get(id).await.unwrap().state, JobState::Queued);
    for (query, field) in [
        (
            SqlQuery {
                limit: 0,
                ..SqlQuery::new("SELECT 1")
            },
            "limit",
        ),
        (
            SqlQuery {
                timeout: Duration::from_secs(60),
                ..SqlQuery::new("SELECT 1")
            },
            "timeout",
        ),
    ] {
        let e = t.queue.sql(query).await.unwrap_err();
        assert_eq!(e.field(), Some(field));
    }
    t.close().await;
}
