//! The SQLite backend: connection setup and migrations (`connection`, `migrations`), the syncer that fsyncs the
//! write-ahead log before durable replies (`syncer`), and the read-only pool (`readers`). The writer thread itself
//! is `engine`; the SQL it runs on both databases is in `ops/`.

pub(crate) mod connection;
pub(crate) mod migrations;
pub(crate) mod readers;
pub(crate) mod syncer;
