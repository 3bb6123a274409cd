//! What a batch is to the jobs pushed into it: its id, whether it takes jobs, and the count of those added (a
//! batch's `total`). Its own module, so that a push reaches it without the rest of `batches.rs`, which pushes
//! jobs itself.

use std::fmt;

use crate::clock::from_millis;
use crate::error::{Error, Result};
use crate::ops::WriteCtx;
use crate::store::db::{Sql, params};

/// A batch's id, assigned by Cairn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchId(pub i64);

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Adds jobs to a batch's `total`. The code that inserts jobs counts them here ([`count_added`]), rather than a
/// trigger on `jobs` as for their ends: on SQLite a row trigger runs its program for every row inserted, a batch
/// job or not, which costs every enqueue a tenth of its time.
const ADD_TO_TOTAL: Sql = Sql::both("UPDATE batches SET total = total + $1 WHERE id = $2");

/// Counts the jobs just inserted into `batches` (one entry per job, `None` for a job of no batch): one update per
/// batch. Runs in the inserting transaction, so that a batch's total is never short of its jobs.
pub(crate) fn count_added(
    ctx: &WriteCtx<'_>,
    batches: impl IntoIterator<Item = Option<BatchId>>,
) -> Result<()> {
    let mut counts: Vec<(BatchId, i64)> = Vec::new();
    for batch in batches.into_iter().flatten() {
        match counts.iter_mut().find(|(b, _)| *b == batch) {
            Some((_, n)) => *n += 1,
            None => counts.push((batch, 1)),
        }
    }
    for (batch, added) in counts {
        ctx.db.execute(ADD_TO_TOTAL, &params![added, batch.0])?;
    }
    Ok(())
}

/// Whether a batch exists and has completed; on PostgreSQL its row is locked until the transaction ends, so that it
/// cannot complete on another node while jobs are added here.
const SELECT_TAKES_JOBS: Sql = Sql {
    sqlite: "SELECT completed_at FROM batches WHERE id = $1",
    postgres: "SELECT completed_at FROM batches WHERE id = $1 FOR UPDATE",
};

/// Checks that `batch` takes jobs: it exists and has not completed.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) on `batch` when it does not exist;
/// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) when it has completed.
pub(crate) fn check_takes_jobs(ctx: &WriteCtx<'_>, batch: BatchId) -> Result<()> {
    let row: Option<Option<i64>> = ctx
        .db
        .query_row(SELECT_TAKES_JOBS, &params![batch.0], |r| r.get(0))?;
    match row {
        None => Err(Error::invalid(
            "batch",
            format!("batch {batch} does not exist"),
        )),
        Some(Some(at)) => Err(Error::invalid_state(format!(
            "batch {batch} completed at {}; it takes no more jobs",
            from_millis(at)
        ))),
        Some(None) => Ok(()),
    }
}
