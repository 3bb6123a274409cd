//! Where reads run: a pool of read-only sessions on either database, used from async code on blocking threads.
//! Reads never go through the writer.

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::store::db::Db;
#[cfg(feature = "postgres")]
use crate::store::postgres::readers::PgReaders;
#[cfg(feature = "sqlite")]
use crate::store::sqlite::readers::SqliteReaders;

pub(crate) enum Readers {
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteReaders),
    #[cfg(feature = "postgres")]
    Postgres(PgReaders),
    /// Built without a backend, there are no readers.
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    Unavailable(std::convert::Infallible),
}

impl Readers {
    /// What the database is, where the engine's choices depend on it.
    pub fn capabilities(&self) -> crate::store::capabilities::Capabilities {
        match self {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Readers::Unavailable(never) => match *never {},
            #[cfg(feature = "sqlite")]
            Readers::Sqlite(_) => crate::store::capabilities::Capabilities::SQLITE,
            #[cfg(feature = "postgres")]
            Readers::Postgres(_) => crate::store::capabilities::Capabilities::POSTGRES,
        }
    }

    /// Runs `f` in a read transaction on a blocking thread.
    pub async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&Db<'_>) -> Result<T> + Send + 'static,
    {
        let readers = self.clone();
        tokio::task::spawn_blocking(move || match &*readers {
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Readers::Unavailable(never) => match *never {},
            #[cfg(feature = "sqlite")]
            Readers::Sqlite(pool) => pool.read_blocking(f),
            #[cfg(feature = "postgres")]
            Readers::Postgres(pool) => pool.read_blocking(f),
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Storage, format!("a read task failed: {e}")))?
    }
}
