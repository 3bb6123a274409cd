//! Storage backends. Today: SQLite (`sqlite`), one file, one writer thread, a pool of readers.
pub(crate) mod sqlite;
