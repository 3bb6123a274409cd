//! Storage backends. Today: SQLite (`sqlite`), one file, one writer thread, a pool of readers. Being built:
//! PostgreSQL (`postgres`), so far its schema and migrations.
pub(crate) mod postgres;
pub(crate) mod sqlite;
