//! The seam between the operations and the two databases: a transaction's [`Db::dialect`], the statements whose
//! shape differs, and [`Db::capabilities`], what the database is. Methods of [`Db`] written here, apart from it,
//! since `db/` runs statements for the dialects (`sqlite/dialect.rs`, `postgres/dialect.rs`), which cannot be
//! imported back by it.

use crate::store::capabilities::Capabilities;
use crate::store::db::Db;
use crate::store::dialect::Dialect;

impl Db<'_> {
    /// This database's own statements, where the two differ in shape.
    pub fn dialect(&self) -> &'static dyn Dialect {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Db::Unavailable(never) => match never.0 {},
            #[cfg(feature = "sqlite")]
            Db::Sqlite(_) => &crate::store::sqlite::dialect::Sqlite,
            #[cfg(feature = "postgres")]
            Db::Postgres(_) => &crate::store::postgres::dialect::Postgres,
        }
    }

    /// What this database is, where the engine's choices depend on it (see [`Capabilities`]).
    pub fn capabilities(&self) -> Capabilities {
        self.dialect().capabilities()
    }
}
