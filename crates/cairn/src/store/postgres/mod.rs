//! The PostgreSQL backend (see `docs/design/postgres.md`): sessions' settings and bounds (`settings`), connecting
//! (to whichever of the URL's hosts is the primary: `hosts`), the schema and the migrations that bring a
//! database to it, the reader pool, read-only SQL, the writer's session (`writer`), which node leads the timed work
//! (`leader`), what a commit tells the other nodes (`notify`) and the listener that hears them (`listener`), and the
//! vacuum of the tables a busy queue churns (`vacuum`). The engine's statements carry their PostgreSQL text beside
//! SQLite's (`Sql`, in `store/db/sql.rs`).

pub(crate) mod activity;
pub(crate) mod connect;
pub(crate) mod dialect;
pub(crate) mod hosts;
pub(crate) mod leader;
pub(crate) mod listener;
pub(crate) mod migrations;
pub(crate) mod notify;
pub(crate) mod readers;
pub(crate) mod session;
pub(crate) mod settings;
pub(crate) mod sql;
pub(crate) mod tls;
pub(crate) mod vacuum;
pub(crate) mod writer;
