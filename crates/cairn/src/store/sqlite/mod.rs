//! The SQLite backend: connection setup and migrations (`connection`, `migrations`), the syncer that fsyncs the
//! write-ahead log before durable replies (`syncer`), the checkpointer that folds it back into the file
//! (`checkpointer`), and the read-only pool (`readers`). The writer thread itself
//! is `engine`; the SQL it runs on both databases is in `ops/`, but for its own statements where the two differ in
//! shape (`dialect`, `activity`).

#[cfg(feature = "sqlite")]
pub(crate) mod activity;
#[cfg(feature = "sqlite")]
pub(crate) mod checkpointer;
#[cfg(feature = "sqlite")]
pub(crate) mod connection;
#[cfg(feature = "sqlite")]
pub(crate) mod dialect;
#[cfg(feature = "sqlite")]
pub(crate) mod migrations;
#[cfg(feature = "sqlite")]
pub(crate) mod readers;
#[cfg(feature = "sqlite")]
pub(crate) mod sql;
// The syncer is plain file I/O; the writer holds one (or none) whatever the build.
pub(crate) mod syncer;
