//! Opening SQLite connections with Cairn's settings, and reading those settings back.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, Result};

/// How long a connection waits for another connection's write lock before giving up with "database is locked".
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The settings a connection runs with, read back from SQLite itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteSettings {
    /// `PRAGMA journal_mode`: always `wal`.
    pub journal_mode: String,
    /// `PRAGMA synchronous`: 1 (NORMAL). Durable acknowledgements come from Cairn's own fsync of the WAL.
    pub synchronous: i64,
    /// `PRAGMA foreign_keys`: always on.
    pub foreign_keys: bool,
    /// `PRAGMA busy_timeout`, in milliseconds.
    pub busy_timeout_ms: i64,
}

/// Opens the writer's connection, creating the file if needed, and applies the settings.
///
/// `synchronous` is NORMAL whatever the durability: in WAL mode that means no fsync per commit (SQLite still
/// syncs around checkpoints, so the file is never corrupted). With [`Durability::Full`](crate::Durability::Full) the syncer thread fsyncs
/// the WAL before any durable write is acknowledged (see `syncer`), which is what `synchronous=FULL` would do,
/// without holding up the writer.
pub(crate) fn open_writer(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)
        .map_err(|e| Error::storage(format!("opening {}", path.display()), e))?;
    apply_common(&conn)?;
    require_wal(&conn, path, "PRAGMA journal_mode = WAL")?;
    set_synchronous(&conn, 1)?;
    // Savepoint and statement journals in memory: on a temporary file they cost a write per spilled page.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(|e| Error::storage("setting temp_store", e))?;
    Ok(conn)
}

/// Runs `pragma` (which reads, or sets, the journal mode) and refuses a file that is not in WAL mode after it.
pub(crate) fn require_wal(conn: &Connection, path: &Path, pragma: &str) -> Result<()> {
    let mode: String = conn
        .query_row(pragma, [], |row| row.get(0))
        .map_err(|e| Error::storage(format!("{pragma} on {}", path.display()), e))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::new(
            crate::ErrorKind::Storage,
            format!(
                "{} cannot use write-ahead logging (journal_mode is {mode})",
                path.display()
            ),
        ));
    }
    Ok(())
}

/// Opens a read-only connection for the reader pool.
pub(crate) fn open_reader(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| Error::storage(format!("opening {} for reading", path.display()), e))?;
    apply_common(&conn)?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| Error::storage("setting query_only", e))?;
    Ok(conn)
}

/// Settings every connection needs, the application's own included (see [`crate::Queue::enqueue_in`]).
pub(crate) fn apply_common(conn: &Connection) -> Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| Error::storage("setting busy_timeout", e))?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(|e| Error::storage("enabling foreign keys", e))?;
    conn.set_prepared_statement_cache_capacity(64);
    // The query planner's stability guarantee: plans never depend on the values bound to a statement. Without it,
    // SQLite may look at a bound value while planning (a LIMIT, a term against a partial index) and then throw
    // the cached statement away and prepare it again every time that parameter is bound.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(|e| Error::storage("enabling the query planner stability guarantee", e))?;
    Ok(())
}

/// Sets `PRAGMA synchronous` (1 = NORMAL, 2 = FULL).
pub(crate) fn set_synchronous(conn: &Connection, level: i64) -> Result<()> {
    conn.pragma_update(None, "synchronous", level)
        .map_err(|e| Error::storage("setting synchronous", e))
}

/// Reads the connection's settings back from SQLite.
pub(crate) fn read_settings(conn: &Connection) -> Result<SqliteSettings> {
    let get_i64 = |pragma: &str| -> Result<i64> {
        conn.query_row(&format!("PRAGMA {pragma}"), [], |row| row.get(0))
            .map_err(|e| Error::storage(format!("reading PRAGMA {pragma}"), e))
    };
    let journal_mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .map_err(|e| Error::storage("reading PRAGMA journal_mode", e))?;
    Ok(SqliteSettings {
        journal_mode: journal_mode.to_lowercase(),
        synchronous: get_i64("synchronous")?,
        foreign_keys: get_i64("foreign_keys")? == 1,
        busy_timeout_ms: get_i64("busy_timeout")?,
    })
}
