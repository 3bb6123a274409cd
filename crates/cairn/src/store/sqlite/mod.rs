//! The SQLite backend: connection setup and migrations (`connection`, `migrations`), the syncer that fsyncs the
//! write-ahead log before durable replies (`syncer`), the read-only pool (`readers`), and what both backends share
//! though it began here: the writer's timed work (`maintenance`) and the mapping from rows to
//! [`Job`](crate::Job) (`rows`). The writer thread itself is `store/writer.rs`.

pub(crate) mod connection;
pub(crate) mod maintenance;
pub(crate) mod migrations;
pub(crate) mod readers;
pub(crate) mod rows;
pub(crate) mod syncer;
