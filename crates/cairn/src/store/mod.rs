//! Storage backends: SQLite (`sqlite`: one file, one process, one writer thread, a pool of readers) and
//! PostgreSQL (`postgres`: one database shared by many nodes, each with its own writer). `db` is the seam every
//! statement runs behind; `writer_db` is the writer's connection on either (the writer thread itself is `engine`);
//! `readers` is the read pool on either, over `pool`. Where the databases differ beyond a statement's spelling, the
//! operations ask a transaction (`seam`) for its `capabilities`, what the database is, and its `dialect`, the
//! statements whose shape differs (each database's in `sqlite/dialect.rs` and `postgres/dialect.rs`). Nothing here imports the engine or the operations.

pub(crate) mod activity;
pub(crate) mod capabilities;
pub(crate) mod db;
pub(crate) mod dialect;
pub(crate) mod location;
pub(crate) mod pool;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod readers;
mod seam;
pub(crate) mod sqlite;
pub(crate) mod writer_db;
