//! The SQLite backend: connection setup and migrations (`connection`, `migrations`), the writer thread that owns the
//! only write connection and group-commits operations (`writer`), the timed work the writer does before each batch
//! (`maintenance`), the read-only pool (`readers`) and the mapping from rows to [`Job`](crate::Job) (`rows`).

pub(crate) mod connection;
pub(crate) mod maintenance;
pub(crate) mod migrations;
pub(crate) mod readers;
pub(crate) mod rows;
pub(crate) mod syncer;
pub(crate) mod writer;
