//! What the sustained scenario reads about the database at each sample: on PostgreSQL, the statistics
//! collector's live and dead rows and the database's size, through the queue's read-only SQL; on an embedded
//! SQLite file, the size of the file and its write-ahead log.

use std::path::{Path, PathBuf};

use cairn::SqlQuery;
use serde_json::Value;

use super::series::Storage;
use super::target::Target;

/// Rows and size of Cairn's PostgreSQL tables, in the schema that holds `jobs`. The size is the pages of its tables
/// and indexes as vacuum and analyze last counted them (`pg_class.relpages`): the read-only SQL may not call
/// PostgreSQL's size functions.
const POSTGRES_STORAGE: &str = "\
    SELECT t.n_live_tup AS jobs_live, t.n_dead_tup AS jobs_dead, t.autovacuum_count AS jobs_autovacuums, \
           (SELECT sum(n_dead_tup) FROM pg_stat_user_tables a WHERE a.schemaname = t.schemaname)::bigint AS dead, \
           (SELECT sum(c.relpages)::bigint * current_setting('block_size')::bigint FROM pg_class c \
            WHERE c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = t.relid)) AS bytes \
    FROM pg_stat_user_tables t WHERE t.relid = 'jobs'::regclass";

/// Where a run's storage figures come from.
#[derive(Debug)]
pub enum Probe<T> {
    /// A queue on PostgreSQL, asked through this handle.
    Postgres(T),
    /// A SQLite file on this machine.
    File(PathBuf),
    /// Nothing to read: a server on a SQLite file the bench cannot see.
    Unknown,
}

impl<T: Target> Probe<T> {
    /// The probe for a run on `handle`; `file` is the embedded queue's SQLite file, if that is what it runs on.
    pub async fn find(handle: &T, file: Option<&Path>) -> Probe<T> {
        if let Some(file) = file {
            return Probe::File(file.to_owned());
        }
        match handle.sql(SqlQuery::new(POSTGRES_STORAGE)).await {
            Ok(_) => Probe::Postgres(handle.clone()),
            Err(e) => {
                tracing::debug!(error = %e, "no PostgreSQL statistics; the run records no storage figures");
                Probe::Unknown
            }
        }
    }

    /// The figures now, or `None` if they cannot be read (a failed read is not worth stopping a long run for).
    pub async fn read(&self) -> Option<Storage> {
        match self {
            Probe::Postgres(handle) => {
                let result = handle.sql(SqlQuery::new(POSTGRES_STORAGE)).await.ok()?;
                let row = result.rows.first()?;
                let column = |name: &str| {
                    let i = result.columns.iter().position(|c| c == name)?;
                    row.get(i).and_then(Value::as_u64)
                };
                Some(Storage {
                    bytes: column("bytes")?,
                    jobs_live: column("jobs_live"),
                    jobs_dead: column("jobs_dead"),
                    dead: column("dead"),
                    jobs_autovacuums: column("jobs_autovacuums"),
                })
            }
            Probe::File(path) => {
                let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
                let mut wal = path.as_os_str().to_owned();
                wal.push("-wal");
                Some(Storage {
                    bytes: size(path) + size(Path::new(&wal)),
                    ..Storage::default()
                })
            }
            Probe::Unknown => None,
        }
    }
}
