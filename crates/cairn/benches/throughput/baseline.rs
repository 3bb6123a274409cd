//! The reference numbers, with raw rusqlite and no Cairn code: what one durable commit costs on this machine, and how
//! fast SQLite itself inserts job-shaped rows 1,000 to a transaction. The targets are stated against these.

use std::path::Path;
use std::time::{Duration, Instant};

use cairn::rusqlite::{self, Connection, params};

use crate::BenchResult;

/// The columns of Cairn's `jobs` table, with only the primary key: a job row as raw SQLite stores it.
const CREATE_JOBS: &str = "CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, \
     name TEXT NOT NULL, state TEXT NOT NULL, data TEXT NOT NULL, progress TEXT, priority INTEGER NOT NULL, \
     weight INTEGER NOT NULL, run_at INTEGER NOT NULL, attempt INTEGER NOT NULL DEFAULT 0, \
     max_attempts INTEGER NOT NULL, backoff_initial_ms INTEGER NOT NULL, backoff_multiplier REAL NOT NULL, \
     backoff_max_ms INTEGER NOT NULL, backoff_jitter REAL NOT NULL, lease_timeout_ms INTEGER NOT NULL, \
     unique_key TEXT, parent_id INTEGER, worker TEXT, lease_token INTEGER, lease_expires_at INTEGER, \
     created_at INTEGER NOT NULL, started_at INTEGER, finished_at INTEGER, error TEXT, failure_group TEXT, \
     slot_at INTEGER NOT NULL)";

/// The columns Cairn's push fills for a plain job (those it leaves NULL left out); `slot_at` is `run_at`.
const INSERT_JOB: &str = "INSERT INTO jobs (queue, name, state, data, priority, weight, run_at, max_attempts, \
     backoff_initial_ms, backoff_multiplier, backoff_max_ms, backoff_jitter, lease_timeout_ms, unique_key, \
     parent_id, created_at, slot_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?7)";

/// Opens `path` as Cairn's writer does for durable commits: WAL, `synchronous=FULL`.
pub fn open_durable(path: &Path) -> BenchResult<Connection> {
    let conn = Connection::open(path)?;
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(format!("journal_mode is {mode}, not wal").into());
    }
    conn.pragma_update(None, "synchronous", 2)?;
    Ok(conn)
}

/// Creates the job-shaped table without Cairn's indexes.
pub fn create_plain_table(conn: &Connection) -> BenchResult<()> {
    conn.execute_batch(CREATE_JOBS)?;
    Ok(())
}

fn insert_one(
    stmt: &mut rusqlite::CachedStatement<'_>,
    i: u64,
    now_ms: i64,
) -> rusqlite::Result<usize> {
    let data = format!("{{\"i\":{i}}}");
    stmt.execute(params![
        "default",
        "bench.noop",
        "queued",
        data,
        0,
        1,
        now_ms,
        3,
        1000,
        2.0,
        3_600_000,
        0.1,
        60_000,
        None::<String>,
        None::<i64>,
        now_ms,
    ])
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// One INSERT per transaction (autocommit), `commits` times: each sample is one durable commit.
pub fn commit_times(conn: &Connection, commits: u64) -> BenchResult<(Duration, Vec<Duration>)> {
    let mut stmt = conn.prepare_cached(INSERT_JOB)?;
    let mut samples = Vec::with_capacity(commits as usize);
    let start = Instant::now();
    for i in 0..commits {
        let t = Instant::now();
        insert_one(&mut stmt, i, now_ms())?;
        samples.push(t.elapsed());
    }
    Ok((start.elapsed(), samples))
}

/// Inserts `rows` rows, `per_transaction` to a transaction; each sample is one transaction.
pub fn batch_insert(
    conn: &Connection,
    rows: u64,
    per_transaction: u64,
) -> BenchResult<(Duration, Vec<Duration>)> {
    let mut samples = Vec::new();
    let start = Instant::now();
    let mut done = 0;
    while done < rows {
        let t = Instant::now();
        let now = now_ms();
        conn.execute_batch("BEGIN IMMEDIATE")?;
        {
            let mut stmt = conn.prepare_cached(INSERT_JOB)?;
            for i in done..(done + per_transaction).min(rows) {
                insert_one(&mut stmt, i, now)?;
            }
        }
        conn.execute_batch("COMMIT")?;
        done = (done + per_transaction).min(rows);
        samples.push(t.elapsed());
    }
    Ok((start.elapsed(), samples))
}
