//! The PostgreSQL schema, as numbered append-only migrations embedded in the binary, numbered on their own (the
//! SQLite ones are in `store/sqlite/migrations.rs`). Many nodes may start at once against one database: each
//! migration runs under a transaction-level advisory lock, so exactly one node applies it and the others wait and
//! then find it done.

use postgres::Client;

use crate::error::{Error, ErrorKind, Result};

/// Every migration, in order: (version, name, SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "schema",
        include_str!("../../../migrations/postgres/0001_schema.sql"),
    ),
    (
        2,
        "rate_buckets",
        include_str!("../../../migrations/postgres/0002_rate_buckets.sql"),
    ),
    (
        3,
        "statistics_per_node",
        include_str!("../../../migrations/postgres/0003_statistics_per_node.sql"),
    ),
    (
        4,
        "own_types",
        include_str!("../../../migrations/postgres/0004_own_types.sql"),
    ),
    (
        5,
        "leader",
        include_str!("../../../migrations/postgres/0005_leader.sql"),
    ),
    (
        6,
        "ready_by_name",
        include_str!("../../../migrations/postgres/0006_ready_by_name.sql"),
    ),
    (
        7,
        "enqueue_function",
        include_str!("../../../migrations/postgres/0007_enqueue_function.sql"),
    ),
    (
        8,
        "recurring_overlap",
        include_str!("../../../migrations/postgres/0008_recurring_overlap.sql"),
    ),
    (
        9,
        "debounce",
        include_str!("../../../migrations/postgres/0009_debounce.sql"),
    ),
    (
        10,
        "throttle",
        include_str!("../../../migrations/postgres/0010_throttle.sql"),
    ),
    (
        11,
        "concurrency_keys",
        include_str!("../../../migrations/postgres/0011_concurrency_keys.sql"),
    ),
    (
        12,
        "results",
        include_str!("../../../migrations/postgres/0012_results.sql"),
    ),
    (
        13,
        "trace_context",
        include_str!("../../../migrations/postgres/0013_trace_context.sql"),
    ),
    (
        14,
        "batches",
        include_str!("../../../migrations/postgres/0014_batches.sql"),
    ),
    (
        15,
        "recurring_pause",
        include_str!("../../../migrations/postgres/0015_recurring_pause.sql"),
    ),
    (
        16,
        "batch_callbacks",
        include_str!("../../../migrations/postgres/0016_batch_callbacks.sql"),
    ),
    (
        17,
        "batch_total_counted_by_insert",
        include_str!("../../../migrations/postgres/0017_batch_total_counted_by_insert.sql"),
    ),
    (
        18,
        "push_tells_due_times",
        include_str!("../../../migrations/postgres/0018_push_tells_due_times.sql"),
    ),
    (
        19,
        "push_runs_as_its_owner",
        include_str!("../../../migrations/postgres/0019_push_runs_as_its_owner.sql"),
    ),
    (
        20,
        "tags_capped",
        include_str!("../../../migrations/postgres/0020_tags_capped.sql"),
    ),
    (
        21,
        "children_of_the_job",
        include_str!("../../../migrations/postgres/0021_children_of_the_job.sql"),
    ),
    (
        22,
        "retry_parts",
        include_str!("../../../migrations/postgres/0022_retry_parts.sql"),
    ),
    (
        23,
        "sql_pushes_count_by_family",
        include_str!("../../../migrations/postgres/0023_sql_pushes_count_by_family.sql"),
    ),
    (
        24,
        "job_steps",
        include_str!("../../../migrations/postgres/0024_job_steps.sql"),
    ),
    (
        25,
        "steps_counted_by_insert",
        include_str!("../../../migrations/postgres/0025_steps_counted_by_insert.sql"),
    ),
    (
        26,
        "signals",
        include_str!("../../../migrations/postgres/0026_signals.sql"),
    ),
    (
        27,
        "record_step_function",
        include_str!("../../../migrations/postgres/0027_record_step_function.sql"),
    ),
    (
        28,
        "suspended_at",
        include_str!("../../../migrations/postgres/0028_suspended_at.sql"),
    ),
];

/// The advisory lock key the migrations take: "cairn" in ASCII, so that it is unlikely to meet an application's.
const MIGRATION_LOCK: i64 = 0x0063_6169_726e;

/// The schema version this build of Cairn writes.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Refuses a database whose encoding is not UTF-8 (or SQL_ASCII, which keeps UTF-8's bytes as they are): job names
/// are UTF-8, and a claim finds the names a GLOB's prefix allows as a range in byte order, which is code points'
/// order only in UTF-8. In another encoding the range could hold none of them, and the claim would find nothing.
fn check_encoding(client: &mut Client) -> Result<()> {
    let encoding: String = client
        .query_one("SHOW server_encoding", &[])
        .map_err(|e| Error::storage("reading the database's encoding", e))?
        .get(0);
    if encoding == "UTF8" || encoding == "SQL_ASCII" {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Storage,
        format!(
            "the database's encoding is {encoding}; Cairn needs UTF8 (CREATE DATABASE … ENCODING 'UTF8' \
             TEMPLATE template0)"
        ),
    ))
}

/// Brings the database up to the latest version, one transaction per migration.
///
/// # Errors
/// A storage error, or [`ErrorKind::Storage`] when the database was written by a newer Cairn or is not in UTF-8.
pub(crate) fn migrate(client: &mut Client, now_ms: i64) -> Result<()> {
    migrate_to(client, now_ms, latest_version())
}

/// Brings the database up to version `last` (at most the latest): [`migrate`], stopped early, for the tests of
/// an upgrade.
pub(crate) fn migrate_to(client: &mut Client, now_ms: i64, last: i64) -> Result<()> {
    let context = |what: &str| {
        let what = what.to_owned();
        move |e: postgres::Error| Error::storage(what, e)
    };
    check_encoding(client)?;
    for &(version, name, sql) in MIGRATIONS.iter().filter(|m| m.0 <= last) {
        let label = format!("applying migration {version:04}_{name}");
        let mut tx = client.transaction().map_err(context(&label))?;
        // Nodes starting together queue here; the one that gets the lock first applies, the others see it done.
        // The lock comes before the table of versions is created: `CREATE TABLE IF NOT EXISTS` is not safe against
        // a concurrent create (the loser fails on `pg_type_typname_nsp_index`).
        // Without the sessions' statement bound: waiting for another node's migration, and rewriting a large
        // table, take as long as they take.
        tx.batch_execute("SET LOCAL statement_timeout = 0")
            .map_err(context(&label))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(context(&label))?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS cairn_migrations (
                 version    BIGINT PRIMARY KEY,
                 name       TEXT   NOT NULL,
                 applied_at BIGINT NOT NULL
             )",
        )
        .map_err(context("creating cairn_migrations"))?;
        let current: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(version), 0) FROM cairn_migrations",
                &[],
            )
            .map_err(context("reading the schema version"))?
            .get(0);
        if current > latest_version() {
            return Err(Error::new(
                ErrorKind::Storage,
                format!(
                    "the database has schema version {current}, newer than this build of Cairn understands ({})",
                    latest_version()
                ),
            ));
        }
        if current >= version {
            continue;
        }
        tx.batch_execute(sql).map_err(context(&label))?;
        tx.execute(
            "INSERT INTO cairn_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
            &[&version, &name, &now_ms],
        )
        .map_err(context(&label))?;
        tx.commit().map_err(context(&label))?;
        tracing::info!(version, name, "applied migration");
    }
    Ok(())
}
