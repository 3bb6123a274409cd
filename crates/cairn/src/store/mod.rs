//! Storage backends. Today: SQLite (`sqlite`), one file, one writer thread, a pool of readers. Being built:
//! PostgreSQL (`postgres`), so far its schema, migrations and dialect; `db` is the seam both run behind.
pub(crate) mod db;
pub(crate) mod postgres;
pub(crate) mod readers;
pub(crate) mod sqlite;
pub(crate) mod writer_db;
