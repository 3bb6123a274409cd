//! Storage backends. Today: SQLite (`sqlite`), one file, one writer thread, a pool of readers. Being built:
//! PostgreSQL (`postgres`), so far its schema and migrations.
// Not used by the operations yet: they move onto it one module at a time (docs/design/postgres.md, step 1).
#[allow(dead_code)]
pub(crate) mod db;
pub(crate) mod postgres;
pub(crate) mod sqlite;
