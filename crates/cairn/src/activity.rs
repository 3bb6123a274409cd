//! Reading the activity log: every job and worker transition, newest first, by job, worker, queue and time range.
//! The writer appends it (see `ops/events.rs`); retention prunes it by age (`Retention::activity_max_age`).

use jiff::Timestamp;

use crate::clock::{from_millis, to_millis};
use crate::error::{Error, Result};
use crate::names::JobId;
use crate::ops::events::ActivityKind;
use crate::store::db::{Db, Sql, ToValue, params};

/// The most events one page holds.
pub const MAX_ACTIVITY_PAGE: u32 = 1000;

/// Which events to list. Filters combine with AND; an empty filter lists everything, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivityFilter {
    /// Only this job's events (served by an index: a job's story is cheap to read).
    pub job: Option<JobId>,
    /// Only events of this worker.
    pub worker: Option<String>,
    /// Only events in this queue.
    pub queue: Option<String>,
    /// Only events at or after this time.
    pub since: Option<Timestamp>,
    /// Only events before this time.
    pub until: Option<Timestamp>,
    /// Only events older than this id: the `next_before` of the previous page.
    pub before: Option<i64>,
    /// At most this many (1 to [`MAX_ACTIVITY_PAGE`]); 100 when 0.
    pub limit: u32,
}

/// One transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityEvent {
    /// Its position in the log: later events have higher ids.
    pub id: i64,
    /// When it happened.
    pub at: Timestamp,
    /// What happened.
    pub kind: ActivityKind,
    /// The job, for a job's transition.
    pub job: Option<JobId>,
    /// The job's queue (or, for an unfail, the queue the jobs went to).
    pub queue: Option<String>,
    /// The job's name.
    pub name: Option<String>,
    /// The worker, when one was involved.
    pub worker: Option<String>,
    /// An error message, a reason, a count.
    pub detail: Option<String>,
}

/// A page of events, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivityPage {
    /// The events.
    pub events: Vec<ActivityEvent>,
    /// Pass as `before` for the next page; `None` when this is the last.
    pub next_before: Option<i64>,
}

/// A job's events through `activity_by_job`: `$1` the job, then [`RECENT`]'s parameters one later (`$2` before
/// this id, … `$7` the limit).
pub(crate) const BY_JOB: Sql = Sql {
    sqlite: "SELECT id, at, event, job_id, queue, name, worker, detail FROM activity \
             INDEXED BY activity_by_job WHERE job_id = $1 AND id < $2 \
             AND (CAST($3 AS TEXT) IS NULL OR worker = $3) AND (CAST($4 AS TEXT) IS NULL OR queue = $4) \
             AND at >= $5 AND at < $6 ORDER BY id DESC LIMIT 0 + $7",
    postgres: "SELECT id, at, event, job_id, queue, name, worker, detail FROM activity \
               WHERE job_id = $1 AND id < $2 \
               AND (CAST($3 AS TEXT) IS NULL OR worker = $3) AND (CAST($4 AS TEXT) IS NULL OR queue = $4) \
               AND at >= $5 AND at < $6 ORDER BY id DESC LIMIT 0 + $7",
};

/// Everything else walks the log from the newest event back: a time range, a worker or a queue filter what it
/// reads, so an old range costs a walk over what is newer. `$1` before this id, `$2` the worker, `$3` the queue,
/// `$4` since, `$5` until, `$6` the limit.
pub(crate) const RECENT: Sql = Sql::both(
    "SELECT id, at, event, job_id, queue, name, worker, detail FROM activity \
     WHERE id < $1 AND (CAST($2 AS TEXT) IS NULL OR worker = $2) AND (CAST($3 AS TEXT) IS NULL OR queue = $3) \
     AND at >= $4 AND at < $5 ORDER BY id DESC LIMIT 0 + $6",
);

/// The events after `after`, oldest first, at most `limit`: where the event stream reads on from (`$1`, `$2`).
pub(crate) const AFTER: Sql = Sql::both(
    "SELECT id, at, event, job_id, queue, name, worker, detail FROM activity WHERE id > $1 ORDER BY id \
     LIMIT 0 + $2",
);

/// The oldest event still retained, if any.
pub(crate) const OLDEST: Sql = Sql::both("SELECT min(id) FROM activity");

/// The oldest event's id still retained, `None` for an empty log.
pub(crate) fn oldest(db: &Db<'_>) -> Result<Option<i64>> {
    db.query_one(OLDEST, &params![], |r| r.get(0))
}

/// The newest event's id, 0 for an empty log.
pub(crate) const NEWEST: Sql = Sql::both("SELECT coalesce(max(id), 0) FROM activity");

/// The events after `after`, oldest first, at most `limit`.
pub(crate) fn after(db: &Db<'_>, after: i64, limit: u32) -> Result<Vec<ActivityEvent>> {
    db.query(AFTER, &params![after, i64::from(limit)], event_from_row)
}

/// The newest event's id, 0 for an empty log.
pub(crate) fn newest(db: &Db<'_>) -> Result<i64> {
    db.query_one(NEWEST, &params![], |r| r.get(0))
}

/// One row of `activity`, as the statements here select it.
fn event_from_row(r: &crate::store::db::Row<'_>) -> Result<ActivityEvent> {
    let kind: String = r.get(2)?;
    // A kind this version does not know was written by a newer Cairn: passed on as unknown, so that a listing, or the
    // event stream's tail, goes on past it rather than stopping there until this node is upgraded.
    let kind = ActivityKind::parse(&kind).unwrap_or(ActivityKind::Unknown);
    Ok(ActivityEvent {
        id: r.get(0)?,
        at: from_millis(r.get(1)?),
        kind,
        job: r.get::<Option<i64>>(3)?.map(JobId),
        queue: r.get(4)?,
        name: r.get(5)?,
        worker: r.get(6)?,
        detail: r.get(7)?,
    })
}

/// Lists events as `filter` says.
pub(crate) fn list(db: &Db<'_>, filter: &ActivityFilter) -> Result<ActivityPage> {
    let limit = match filter.limit {
        0 => 100,
        n if n <= MAX_ACTIVITY_PAGE => n,
        n => {
            return Err(Error::invalid(
                "limit",
                format!("must be between 1 and {MAX_ACTIVITY_PAGE}, got {n}"),
            ));
        }
    };
    if let (Some(since), Some(until)) = (filter.since, filter.until)
        && since > until
    {
        return Err(Error::invalid(
            "since",
            format!("must not be after until ({until}), got {since}"),
        ));
    }
    let sql = if filter.job.is_some() { BY_JOB } else { RECENT };
    let (before, since, until) = (
        filter.before.unwrap_or(i64::MAX),
        filter.since.map_or(i64::MIN, to_millis),
        filter.until.map_or(i64::MAX, to_millis),
    );
    let fetch = i64::from(limit) + 1;
    let mut params = params![
        before,
        filter.worker.as_deref(),
        filter.queue.as_deref(),
        since,
        until,
        fetch,
    ];
    if let Some(job) = filter.job {
        params.0.insert(0, job.to_value());
    }
    let mut events = db.query(sql, &params, event_from_row)?;
    let next_before = if events.len() > limit as usize {
        events.truncate(limit as usize);
        events.last().map(|e| e.id)
    } else {
        None
    };
    Ok(ActivityPage {
        events,
        next_before,
    })
}
