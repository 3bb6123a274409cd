//! [`Dialect`]: the statements whose shape differs between the databases, not only their spelling, each database's
//! in its own module (`store/sqlite/dialect.rs`, `store/postgres/dialect.rs`), as a driver's. The operations call
//! one method and run on either; a pair of texts of the same shape stays a [`Sql`](crate::store::db::Sql).

use crate::error::Result;
use crate::store::activity::ActivityRows;
use crate::store::capabilities::Capabilities;
use crate::store::db::Db;

/// A database's own statements where the two differ in shape. Every method runs in the writer's transaction `db`,
/// which is of this dialect's database.
pub(crate) trait Dialect: Sync {
    /// What the database is (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities;

    /// Locks waiting job `id`'s row until the transaction ends, so that of two transactions freeing it at once
    /// the second sees the first's commit. A single writer needs no lock.
    fn lock_job(&self, db: &Db<'_>, id: i64) -> Result<()>;

    /// Makes pushes of throttle key `key` take turns until their transactions end, so that two cannot both find it
    /// free. A single writer needs no lock.
    fn lock_throttle_key(&self, db: &Db<'_>, key: &str) -> Result<()>;

    /// Makes pushes of debounce key `key` take turns until their transactions end, as
    /// [`Dialect::lock_throttle_key`] (never waiting for a throttle key of the same text).
    fn lock_debounce_key(&self, db: &Db<'_>, key: &str) -> Result<()>;

    /// Makes the signals sent to `key` and the waits for it take turns until their transactions end, so that a
    /// signal and a wait racing on two nodes never miss each other (each would find the other not there yet).
    fn lock_signal_key(&self, db: &Db<'_>, key: &str) -> Result<()>;

    /// Locks `queue`'s row until the transaction ends, so that claims count a key's running jobs one after another;
    /// returns whether it locked (a single writer needs no lock, and takes none).
    fn lock_queue(&self, db: &Db<'_>, queue: &str) -> Result<bool>;

    /// Deletes the history and tags of finished jobs `ids` that a step of retention deleted, where its statement
    /// did not delete them with the jobs.
    fn prune_history_and_tags(&self, db: &Db<'_>, ids: &[i64]) -> Result<()>;

    /// Writes a transaction's activity and statistics rows. Where nodes share the database, the statistics go to
    /// rows of `node`'s own, and the nodes that wait for any of the jobs it ended are told.
    fn write_activity(&self, db: &Db<'_>, rows: ActivityRows<'_>, node: &str) -> Result<()>;
}
