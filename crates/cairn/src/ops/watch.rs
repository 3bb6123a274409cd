//! [`WatchJob`] and [`UnwatchJob`]: a wait for a job to end ([`Jobs::wait`](crate::Jobs::wait)), registered in
//! the database on PostgreSQL so that the node that ends the job tells the node that waits (`cairn_job_waits`, read
//! by `store/postgres/notify.rs`). SQLite has one process, whose writer wakes its waits itself.

use crate::error::Result;
use crate::job::JobState;
use crate::names::JobId;
use crate::ops::{Operation, WriteCtx};
use crate::store::db::{Sql, params};

/// Registers a wait for `job` until `until_ms` and reads the job's state (`None`: no such job), with the wait's own
/// token, which [`UnwatchJob`] takes it back with.
///
/// On PostgreSQL the state is read `FOR SHARE`, after the wait's row is written, in the same transaction. So either
/// a transaction that ends the job committed before the read (which waits for it, and sees the end), or it ends the
/// job after this one commits and finds the wait's row when it looks for waits: a wait never misses an end.
pub(crate) struct WatchJob {
    pub job: JobId,
    pub until_ms: i64,
}

const PRUNE_WAITS: Sql = Sql::postgres_only("DELETE FROM cairn_job_waits WHERE until_ms < $1");
const INSERT_WAIT: Sql = Sql::postgres_only(
    "INSERT INTO cairn_job_waits (job_id, waiter, until_ms) VALUES ($1, $2, $3)",
);
const JOB_STATE: Sql = Sql {
    sqlite: "SELECT state FROM jobs WHERE id = $1",
    postgres: "SELECT state FROM jobs WHERE id = $1 FOR SHARE",
};

impl Operation for WatchJob {
    type Output = Option<(JobState, i64)>;

    fn is_durable(&self) -> bool {
        false
    }

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<Option<(JobState, i64)>> {
        let waiter = ctx.tokens.next_token();
        // Where nodes share the database, another may end the job: the wait is registered there for it to see.
        if ctx.db.capabilities().shared_by_nodes {
            // The waits of a node that stopped without taking them back, past their time.
            ctx.db.execute(PRUNE_WAITS, &params![ctx.now_ms])?;
            ctx.db
                .execute(INSERT_WAIT, &params![self.job, waiter, self.until_ms])?;
        }
        let state: Option<String> = ctx
            .db
            .query_row(JOB_STATE, &params![self.job], |r| r.get(0))?;
        Ok(state
            .and_then(|s| s.parse().ok())
            .map(|state| (state, waiter)))
    }
}

/// Takes back a wait [`WatchJob`] registered, by its token (PostgreSQL; nothing on SQLite).
pub(crate) struct UnwatchJob {
    pub job: JobId,
    pub waiter: i64,
}

const DELETE_WAIT: Sql =
    Sql::postgres_only("DELETE FROM cairn_job_waits WHERE job_id = $1 AND waiter = $2");

impl Operation for UnwatchJob {
    type Output = ();

    fn is_durable(&self) -> bool {
        false
    }

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        // Registered only where nodes share the database (see `WatchJob`).
        if ctx.db.capabilities().shared_by_nodes {
            ctx.db
                .execute(DELETE_WAIT, &params![self.job, self.waiter])?;
        }
        Ok(())
    }
}

/// The statements here, as (SQLite's text, PostgreSQL's text), for the tests that prepare every statement.
pub(crate) fn statements() -> Vec<(String, String)> {
    [PRUNE_WAITS, INSERT_WAIT, JOB_STATE, DELETE_WAIT]
        .iter()
        .map(|s| (s.sqlite.to_owned(), s.postgres.to_owned()))
        .collect()
}
