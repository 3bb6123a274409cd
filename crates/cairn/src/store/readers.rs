//! Where reads run: a pool of read-only sessions on either database, used from async code on blocking threads.
//! Reads never go through the writer.

use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::store::db::Db;
use crate::store::postgres::readers::PgReaders;
use crate::store::sqlite::readers::SqliteReaders;

pub(crate) enum Readers {
    Sqlite(SqliteReaders),
    Postgres(PgReaders),
}

impl Readers {
    pub fn is_postgres(&self) -> bool {
        matches!(self, Readers::Postgres(_))
    }

    /// Runs `f` in a read transaction on a blocking thread.
    pub async fn read<T, F>(self: &Arc<Self>, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Db<'_>) -> Result<T> + Send + 'static,
    {
        let readers = self.clone();
        tokio::task::spawn_blocking(move || match &*readers {
            Readers::Sqlite(pool) => pool.read_blocking(f),
            Readers::Postgres(pool) => pool.read_blocking(f),
        })
        .await
        .map_err(|e| Error::new(ErrorKind::Storage, format!("a read task failed: {e}")))?
    }
}
