//! Connecting to PostgreSQL: the URL a queue is opened with, and the settings every Cairn session gets.

use postgres::{Client, NoTls};

use crate::error::{Error, Result};
use crate::store::location::redacted;

/// Opens a session, named `role` in `pg_stat_activity` (`cairn writer`, `cairn reader`, `cairn listener`).
/// Connections are plain TCP or a Unix socket: Cairn does not speak TLS to PostgreSQL yet, so
/// the database should be on the same host or a private network.
pub(crate) fn connect(url: &str, role: &str) -> Result<Client> {
    let mut config: postgres::Config = url.parse().map_err(|e| {
        Error::invalid(
            "database",
            format!("is not a valid PostgreSQL URL ({e}): {}", redacted(url)),
        )
    })?;
    if config.get_application_name().is_none() {
        config.application_name(role);
    }
    let mut client = config
        .connect(NoTls)
        .map_err(|e| Error::storage(format!("connecting to {}", redacted(url)), e))?;
    // UTC, so that nothing depends on the server's zone; Cairn keeps its own times as milliseconds anyway.
    client
        .batch_execute("SET TIME ZONE 'UTC'")
        .map_err(|e| Error::storage("setting up a PostgreSQL session", e))?;
    Ok(client)
}

/// Opens the writer's session: [`connect`], with the planner held to the plans the writer's statements are written
/// for, index lookups and ordered walks of an index joined by nested loops.
///
/// Why: the writer's statements find jobs by key (`UPDATE … FROM (VALUES …)` by id) or walk one partial index in
/// order and stop (a claim's `ORDER BY claim_key, run_at, id LIMIT n FOR UPDATE SKIP LOCKED`). PostgreSQL picks
/// other plans when its statistics are stale, and a job table's always are after a burst: for the first minute of a
/// new database, or when a backlog builds faster than autovacuum's `ANALYZE` follows, and a plan cached then is
/// kept until the next one. It then believes the table small or the ready jobs few, and scans the whole table for
/// a hash join, or gathers every ready job with a bitmap and sorts them, once per claim: 30,000 rows read to lease
/// 25 jobs, and 85,000 read and sorted to claim 50 (140 ms a claim), in `cairn bench`. Turned off, those methods
/// are still used where nothing else can run a statement (housekeeping's scans of the activity log); they are no
/// longer chosen over an index. The readers, which serve filtered listings, keep the planner's full choice.
pub(crate) fn connect_writer(url: &str) -> Result<Client> {
    let mut client = connect(url, "cairn writer")?;
    client
        .batch_execute(
            "SET enable_seqscan TO off; SET enable_bitmapscan TO off; \
             SET enable_hashjoin TO off; SET enable_mergejoin TO off",
        )
        .map_err(|e| Error::storage("setting up the writer's PostgreSQL session", e))?;
    Ok(client)
}
