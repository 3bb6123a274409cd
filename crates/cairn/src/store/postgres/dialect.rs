//! PostgreSQL's [`Dialect`]: a database nodes write at once. Rows and keys that decide a write are locked until the
//! transaction ends; a step of retention deletes its jobs' history and tags in the jobs' own statement.

use crate::error::Result;
use crate::store::activity::ActivityRows;
use crate::store::capabilities::Capabilities;
use crate::store::db::{Db, Sql, params};
use crate::store::dialect::Dialect;

/// Locks a job's row until the transaction ends.
pub(crate) const LOCK_JOB: Sql = Sql::postgres_only("SELECT id FROM jobs WHERE id = $1 FOR UPDATE");

/// Pushes of one throttle or debounce key, and the signals and waits of one signal key, take turns across nodes
/// until their transactions end. Each kind of key hashes with its own seed, so that one never waits for another.
pub(crate) const LOCK_THROTTLE_KEY: Sql =
    Sql::postgres_only("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))");
pub(crate) const LOCK_DEBOUNCE_KEY: Sql =
    Sql::postgres_only("SELECT pg_advisory_xact_lock(hashtextextended($1, 11))");
pub(crate) const LOCK_SIGNAL_KEY: Sql =
    Sql::postgres_only("SELECT pg_advisory_xact_lock(hashtextextended($1, 13))");

/// Locks a queue's row until the transaction ends.
pub(crate) const LOCK_QUEUE: Sql =
    Sql::postgres_only("SELECT 1 FROM queues WHERE name = $1 FOR UPDATE");

/// PostgreSQL's statements.
pub(crate) struct Postgres;

impl Dialect for Postgres {
    fn capabilities(&self) -> Capabilities {
        Capabilities::POSTGRES
    }

    fn lock_job(&self, db: &Db<'_>, id: i64) -> Result<()> {
        db.query(LOCK_JOB, &params![id], |_| Ok(()))?;
        Ok(())
    }

    fn lock_throttle_key(&self, db: &Db<'_>, key: &str) -> Result<()> {
        db.query(LOCK_THROTTLE_KEY, &params![key], |_| Ok(()))?;
        Ok(())
    }

    fn lock_debounce_key(&self, db: &Db<'_>, key: &str) -> Result<()> {
        db.query(LOCK_DEBOUNCE_KEY, &params![key], |_| Ok(()))?;
        Ok(())
    }

    fn lock_signal_key(&self, db: &Db<'_>, key: &str) -> Result<()> {
        db.query(LOCK_SIGNAL_KEY, &params![key], |_| Ok(()))?;
        Ok(())
    }

    fn lock_queue(&self, db: &Db<'_>, queue: &str) -> Result<bool> {
        db.query(LOCK_QUEUE, &params![queue], |_| Ok(()))?;
        Ok(true)
    }

    /// Nothing: the step's statement deleted them with the jobs, in one round trip.
    fn prune_history_and_tags(&self, _db: &Db<'_>, _ids: &[i64]) -> Result<()> {
        Ok(())
    }

    fn write_activity(&self, db: &Db<'_>, rows: ActivityRows<'_>, node: &str) -> Result<()> {
        crate::store::postgres::activity::write(db, rows, node)
    }
}
