//! The schema, as numbered append-only migrations embedded in the binary. To fix a mistake, add a migration.

use rusqlite::{Connection, params};

use crate::error::{Error, ErrorKind, Result};

/// Every migration, in order: (version, name, SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "jobs",
        include_str!("../../../migrations/sqlite/0001_jobs.sql"),
    ),
    (
        2,
        "recurring",
        include_str!("../../../migrations/sqlite/0002_recurring.sql"),
    ),
    (
        3,
        "attempt_usage",
        include_str!("../../../migrations/sqlite/0003_attempt_usage.sql"),
    ),
    (
        4,
        "waiting",
        include_str!("../../../migrations/sqlite/0004_waiting.sql"),
    ),
    (
        5,
        "timeout",
        include_str!("../../../migrations/sqlite/0005_timeout.sql"),
    ),
    (
        6,
        "queue_control",
        include_str!("../../../migrations/sqlite/0006_queue_control.sql"),
    ),
    (
        7,
        "tracking_and_workers",
        include_str!("../../../migrations/sqlite/0007_tracking_and_workers.sql"),
    ),
    (
        8,
        "queue_concurrency",
        include_str!("../../../migrations/sqlite/0008_queue_concurrency.sql"),
    ),
    (
        9,
        "queue_rate_limit",
        include_str!("../../../migrations/sqlite/0009_queue_rate_limit.sql"),
    ),
    (
        10,
        "priority_aging",
        include_str!("../../../migrations/sqlite/0010_priority_aging.sql"),
    ),
    (
        11,
        "config",
        include_str!("../../../migrations/sqlite/0011_config.sql"),
    ),
    (
        12,
        "activity_and_stats",
        include_str!("../../../migrations/sqlite/0012_activity_and_stats.sql"),
    ),
    (
        13,
        "views",
        include_str!("../../../migrations/sqlite/0013_views.sql"),
    ),
    (
        14,
        "rate_buckets",
        include_str!("../../../migrations/sqlite/0014_rate_buckets.sql"),
    ),
    (
        15,
        "ready_by_name",
        include_str!("../../../migrations/sqlite/0015_ready_by_name.sql"),
    ),
    (
        16,
        "recurring_overlap",
        include_str!("../../../migrations/sqlite/0016_recurring_overlap.sql"),
    ),
    (
        17,
        "debounce",
        include_str!("../../../migrations/sqlite/0017_debounce.sql"),
    ),
    (
        18,
        "throttle",
        include_str!("../../../migrations/sqlite/0018_throttle.sql"),
    ),
    (
        19,
        "concurrency_keys",
        include_str!("../../../migrations/sqlite/0019_concurrency_keys.sql"),
    ),
    (
        20,
        "results",
        include_str!("../../../migrations/sqlite/0020_results.sql"),
    ),
    (
        21,
        "trace_context",
        include_str!("../../../migrations/sqlite/0021_trace_context.sql"),
    ),
    (
        22,
        "batches",
        include_str!("../../../migrations/sqlite/0022_batches.sql"),
    ),
    (
        23,
        "recurring_pause",
        include_str!("../../../migrations/sqlite/0023_recurring_pause.sql"),
    ),
    (
        24,
        "batch_callbacks",
        include_str!("../../../migrations/sqlite/0024_batch_callbacks.sql"),
    ),
    (
        25,
        "batch_total_counted_by_insert",
        include_str!("../../../migrations/sqlite/0025_batch_total_counted_by_insert.sql"),
    ),
    (
        26,
        "children_of_the_job",
        include_str!("../../../migrations/sqlite/0026_children_of_the_job.sql"),
    ),
    (
        27,
        "job_steps",
        include_str!("../../../migrations/sqlite/0027_job_steps.sql"),
    ),
    (
        28,
        "steps_counted_by_insert",
        include_str!("../../../migrations/sqlite/0028_steps_counted_by_insert.sql"),
    ),
    (
        29,
        "signals",
        include_str!("../../../migrations/sqlite/0029_signals.sql"),
    ),
    (
        30,
        "suspended_at",
        include_str!("../../../migrations/sqlite/0030_suspended_at.sql"),
    ),
];

/// The schema version this build of Cairn writes.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Brings the database up to the latest version, one transaction per migration.
///
/// # Errors
/// A storage error, or [`ErrorKind::Storage`] when the file was written by a newer Cairn.
pub(crate) fn migrate(conn: &mut Connection, now_ms: i64) -> Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS cairn_migrations (
             version    INTEGER PRIMARY KEY,
             name       TEXT    NOT NULL,
             applied_at INTEGER NOT NULL
         )",
    )
    .map_err(|e| Error::storage("creating cairn_migrations", e))?;
    let current: i64 = conn
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM cairn_migrations",
            [],
            |row| row.get(0),
        )
        .map_err(|e| Error::storage("reading the schema version", e))?;
    if current > latest_version() {
        return Err(Error::new(
            ErrorKind::Storage,
            format!(
                "the database has schema version {current}, newer than this build of Cairn understands ({})",
                latest_version()
            ),
        ));
    }
    for &(version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 > current) {
        let context = |e| Error::storage(format!("applying migration {version:04}_{name}"), e);
        let tx = conn.transaction().map_err(context)?;
        tx.execute_batch(sql).map_err(context)?;
        tx.execute(
            "INSERT INTO cairn_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
            params![version, name, now_ms],
        )
        .map_err(context)?;
        tx.commit().map_err(context)?;
        tracing::info!(version, name, "applied migration");
    }
    Ok(())
}
