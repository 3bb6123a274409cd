//! SQLite's [`Dialect`]: one writer, in process. It locks nothing (nothing else writes), and a step of retention
//! deletes its jobs' history and tags in a statement each, after the jobs.

use crate::error::Result;
use crate::store::activity::ActivityRows;
use crate::store::capabilities::Capabilities;
use crate::store::db::{Db, Sql, params};
use crate::store::dialect::Dialect;

/// The history and tags of the jobs whose ids `$1` lists, as a JSON array.
pub(crate) const DELETE_HISTORY: Sql =
    Sql::sqlite_only("DELETE FROM job_attempts WHERE job_id IN (SELECT value FROM json_each($1))");
pub(crate) const DELETE_TAGS: Sql =
    Sql::sqlite_only("DELETE FROM job_tags WHERE job_id IN (SELECT value FROM json_each($1))");
pub(crate) const DELETE_STEPS: Sql =
    Sql::sqlite_only("DELETE FROM job_steps WHERE job_id IN (SELECT value FROM json_each($1))");

/// SQLite's statements.
pub(crate) struct Sqlite;

impl Dialect for Sqlite {
    fn capabilities(&self) -> Capabilities {
        Capabilities::SQLITE
    }

    fn lock_job(&self, _db: &Db<'_>, _id: i64) -> Result<()> {
        Ok(())
    }

    fn lock_throttle_key(&self, _db: &Db<'_>, _key: &str) -> Result<()> {
        Ok(())
    }

    fn lock_debounce_key(&self, _db: &Db<'_>, _key: &str) -> Result<()> {
        Ok(())
    }

    fn lock_signal_key(&self, _db: &Db<'_>, _key: &str) -> Result<()> {
        Ok(())
    }

    fn lock_queue(&self, _db: &Db<'_>, _queue: &str) -> Result<bool> {
        Ok(false)
    }

    fn prune_history_and_tags(&self, db: &Db<'_>, ids: &[i64]) -> Result<()> {
        let list = serde_json::to_string(ids).expect("integers always serialize");
        db.execute(DELETE_HISTORY, &params![list.as_str()])?;
        db.execute(DELETE_TAGS, &params![list.as_str()])?;
        db.execute(DELETE_STEPS, &params![list.as_str()])?;
        Ok(())
    }

    fn write_activity(&self, db: &Db<'_>, rows: ActivityRows<'_>, _node: &str) -> Result<()> {
        crate::store::sqlite::activity::write(db, rows)
    }
}
