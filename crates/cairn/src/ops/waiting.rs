//! Jobs that wait on other jobs, and what moves them: dependencies, and parents with children.
//!
//! A job is `waiting` while any of these holds (see migration 0004):
//! - it has a dependency that has not completed (a row in `job_dependencies`);
//! - a running job created it as a child, and that run has not finished (`awaits_parent`);
//! - it is a parent whose run finished while it had live children.
//!
//! The rules, applied in the transaction of the event that causes them:
//! - A dependency that **completes** (for a recurring job: a run that finishes) is met: its row goes, and a job
//!   with nothing left to wait for becomes ready.
//! - A dependency that **fails** keeps its dependents waiting: requeue it to go on, or cancel it to give up.
//! - A dependency that is **cancelled or deleted** cancels its dependents, and theirs, saying why.
//! - A child created by a running job starts when that run **finishes**. If the run ends any other way (retried,
//!   failed, lease expired, released, cancelled), the children it created are cancelled: they were part of a run
//!   that did not happen, and the next run creates its own.
//! - A parent whose run finishes with live children waits for them; when none is left live, it runs again (with
//!   fresh attempts) and finds them with `JobFilter::parent`. A child that **fails** holds its waiting parent, as
//!   a failed dependency holds its dependents: requeue the child to go on, or cancel or delete it to give up
//!   (Bedrock's parents wait the same way).
//! - A parent whose children are the job's ([`Children::OfTheJob`](crate::Children::OfTheJob), as Bedrock's are)
//!   keeps the children a run created when that run ends without finishing but the job runs again: they start
//!   when a later run finishes. A failed child does not hold it once another child completes or is cancelled.
//! - Cancelling or deleting a parent cancels its live children.

use crate::ops::events::{ActivityKind, JobRef};
use crate::store::db::{Sql, params};

use crate::error::{Error, Result};
use crate::job::{AttemptOutcome, JobState};
use crate::names::JobId;
use crate::ops::{WriteCtx, end_attempt, live, parse_stored_state, running_job};

/// Moves a waiting job with nothing left to wait for to `queued` (or `scheduled`, if its `run_at` is ahead): no
/// dependency, and no child that is live or (unless its children are the job's) failed. A job ready now is ready from now: `run_at` is when it became
/// ready, for its wait time and its priority aging.
/// `$1` now, `$2` the job.
pub(crate) const RELEASE_IF_UNBLOCKED: Sql = Sql {
    sqlite: concat!(
        "UPDATE jobs SET state = CASE WHEN run_at <= $1 THEN 'queued' ELSE 'scheduled' END, \
         run_at = MAX(run_at, $1) \
         WHERE id = $2 AND state = 'waiting' AND awaits_parent = FALSE \
         AND NOT EXISTS (SELECT 1 FROM job_dependencies WHERE job_id = $2) \
         AND NOT EXISTS (SELECT 1 FROM jobs AS c WHERE c.parent_id = $2 AND (",
        live!("c"),
        " OR (c.state = 'failed' AND NOT jobs.children_of_job))) RETURNING queue, state"
    ),
    postgres: concat!(
        "UPDATE jobs SET state = CASE WHEN run_at <= $1 THEN 'queued' ELSE 'scheduled' END, \
         run_at = GREATEST(run_at, $1) \
         WHERE id = $2 AND state = 'waiting' AND awaits_parent = FALSE \
         AND NOT EXISTS (SELECT 1 FROM job_dependencies WHERE job_id = $2) \
         AND NOT EXISTS (SELECT 1 FROM jobs AS c WHERE c.parent_id = $2 AND (",
        live!("c"),
        " OR (c.state = 'failed' AND NOT jobs.children_of_job))) RETURNING queue, state"
    ),
};

/// The ids a one-column statement selects for job `id`.
fn job_ids(ctx: &WriteCtx<'_>, sql: Sql<'_>, id: JobId) -> Result<Vec<JobId>> {
    ctx.db.query(sql, &params![id], |r| r.get::<JobId>(0))
}

/// Makes `id` ready if it waits and nothing holds it any more. Returns whether it moved.
pub(crate) fn release_if_unblocked(ctx: &mut WriteCtx<'_>, id: JobId) -> Result<bool> {
    // Between nodes, the last two dependencies (or children) may end at once, each in a transaction that still
    // sees the other's edge: the waiting job's row is locked first, so the second to get it sees the first's
    // commit. SQLite's single writer gives that order already (its dialect locks nothing).
    ctx.db.dialect().lock_job(&ctx.db, id.0)?;
    let moved: Option<(String, String)> =
        ctx.db
            .query_row(RELEASE_IF_UNBLOCKED, &params![ctx.now_ms, id.0], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
    match moved {
        Some((queue, state)) => {
            if state == JobState::Queued.as_str() {
                ctx.ready.mark(&queue);
            }
            Ok(true)
        }
        None => Ok(false),
    }
}

const START_CHILDREN: Sql = Sql::both(
    "UPDATE jobs SET awaits_parent = FALSE WHERE parent_id = $1 AND awaits_parent = TRUE RETURNING id",
);

const HAS_LIVE_CHILDREN: Sql = Sql::both(concat!(
    "SELECT EXISTS (SELECT 1 FROM jobs AS c WHERE c.parent_id = $1 AND ",
    live!("c"),
    ")"
));

/// The run of parent `id` finished: the children it created start. Returns whether `id` has live children,
/// which it must then wait for.
pub(crate) fn start_children(ctx: &mut WriteCtx<'_>, id: JobId) -> Result<bool> {
    let started = job_ids(ctx, START_CHILDREN, id)?;
    for child in started {
        release_if_unblocked(ctx, child)?;
    }
    let live: bool = ctx
        .db
        .query_one(HAS_LIVE_CHILDREN, &params![id.0], |r| r.get(0))?;
    Ok(live)
}

const PARENT_WAITS: Sql =
    Sql::both("UPDATE jobs SET state = 'waiting', finished_at = NULL, attempt = 0 WHERE id = $1");

/// A parent's run finished and it has live children: it waits for them, and its next run starts its attempts
/// afresh.
pub(crate) fn wait_for_children(ctx: &WriteCtx<'_>, id: JobId) -> Result<()> {
    ctx.db.execute(PARENT_WAITS, &params![id.0])?;
    Ok(())
}

const UNSTARTED_CHILDREN: Sql = Sql::both(
    "SELECT id FROM jobs WHERE parent_id = $1 AND awaits_parent = TRUE AND state = 'waiting'",
);

/// The run of parent `id` ended without finishing: the children it created are cancelled.
pub(crate) fn discard_unstarted_children(ctx: &mut WriteCtx<'_>, id: JobId) -> Result<()> {
    let children = job_ids(ctx, UNSTARTED_CHILDREN, id)?;
    let reason = format!("the run of parent job {id} that created it did not finish");
    let work = children
        .into_iter()
        .map(|child| (child, Some(reason.clone())))
        .collect();
    cancel_jobs(ctx, work)
}

/// How a job came to an end, for what waited on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It completed, or (recurring) one of its runs finished.
    Completed,
    /// It failed (for a recurring job, only when its recurrence ended too).
    Failed,
}

const MET_DEPENDENCIES: Sql =
    Sql::both("DELETE FROM job_dependencies WHERE depends_on = $1 RETURNING job_id");

/// Moves what waited on job `id`, which just ended as `ending`: its dependents, and its parent.
pub(crate) fn job_ended(
    ctx: &mut WriteCtx<'_>,
    id: JobId,
    parent: Option<JobId>,
    has_dependents: bool,
    ending: Ending,
) -> Result<()> {
    if has_dependents && ending == Ending::Completed {
        let dependents = job_ids(ctx, MET_DEPENDENCIES, id)?;
        for dependent in dependents {
            release_if_unblocked(ctx, dependent)?;
        }
    }
    // A failed dependency keeps its dependents waiting, and a failed child its parent: nothing to do for them. But a
    // parent suspended in a join is told, since a failed child does not hold a join of children that are the job's
    // own (the rule `RELEASE_IF_UNBLOCKED` applies).
    if let Some(parent) = parent
        && (ending == Ending::Completed || joining(ctx, parent)?)
    {
        release_if_unblocked(ctx, parent)?;
    }
    Ok(())
}

const JOINING: Sql = Sql::both(
    "SELECT 1 FROM jobs WHERE id = $1 AND state = 'waiting' AND suspended_at IS NOT NULL AND children_of_job",
);

/// Whether `parent` is suspended in a join of children that are its own, which a failed child does not hold.
fn joining(ctx: &WriteCtx<'_>, parent: JobId) -> Result<bool> {
    Ok(ctx
        .db
        .query_row(JOINING, &params![parent.0], |r| r.get::<i64>(0))?
        .is_some())
}

const SELECT_RELATIONS: Sql = Sql {
    sqlite: "SELECT state, parent_id, has_children, has_dependents, queue, name FROM jobs WHERE id = $1",
    postgres: "SELECT state, parent_id, has_children, has_dependents, queue, name FROM jobs WHERE id = $1 FOR UPDATE",
};

const CANCEL_ONE: Sql = Sql::both(
    "UPDATE jobs SET state = 'cancelled', finished_at = $1, error = COALESCE($2, error), \
     awaits_parent = FALSE, lease_token = NULL, lease_expires_at = NULL WHERE id = $3",
);

const DROP_OWN_DEPENDENCIES: Sql = Sql::both("DELETE FROM job_dependencies WHERE job_id = $1");

const LIVE_CHILDREN: Sql = Sql::both(concat!(
    "SELECT id FROM jobs AS c WHERE c.parent_id = $1 AND ",
    live!("c")
));

const DEPENDENTS: Sql = Sql::both("SELECT job_id FROM job_dependencies WHERE depends_on = $1");

/// Cancels each job in `work` that has not completed (a failed one included), with the reason (if any) as its
/// error, and
/// what that brings: its running attempt ends, and its live children and its dependents are cancelled in turn.
/// Parents of cancelled jobs run again if nothing else holds them. A worklist, not recursion: a chain of dependents
/// may be long.
pub(crate) fn cancel_jobs(
    ctx: &mut WriteCtx<'_>,
    mut work: Vec<(JobId, Option<String>)>,
) -> Result<()> {
    let mut parents = Vec::new();
    while let Some((id, reason)) = work.pop() {
        type Relations = (String, Option<i64>, bool, bool, String, String);
        let row: Option<Relations> = ctx.db.query_row(SELECT_RELATIONS, &params![id.0], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?;
        let Some((state, parent, has_children, has_dependents, queue, name)) = row else {
            continue;
        };
        let state = parse_stored_state(&state)?;
        if matches!(state, JobState::Completed | JobState::Cancelled) {
            continue;
        }
        if state == JobState::Running
            && let Some(held) = running_job(ctx, id)?
        {
            let error = reason.as_deref().unwrap_or("cancelled");
            // The children its run created are live children: the cascade below cancels them.
            end_attempt(
                ctx,
                &held,
                AttemptOutcome::Cancelled,
                crate::ops::Ending {
                    error: Some(error),
                    ..Default::default()
                },
            )?;
        }
        ctx.db
            .execute(CANCEL_ONE, &params![ctx.now_ms, reason.as_deref(), id])?;
        let job = JobRef {
            id: id.0,
            queue: &queue,
            name: &name,
        };
        ctx.events.job(
            ctx.now_ms,
            ActivityKind::Cancelled,
            job,
            None,
            reason.as_deref(),
        );
        ctx.db.execute(DROP_OWN_DEPENDENCIES, &params![id.0])?;
        if has_children {
            let children = job_ids(ctx, LIVE_CHILDREN, id)?;
            let why = format!("its parent job {id} was cancelled");
            work.extend(children.into_iter().map(|c| (c, Some(why.clone()))));
        }
        if has_dependents {
            let dependents = job_ids(ctx, DEPENDENTS, id)?;
            let why = format!("job {id}, which it depends on, was cancelled");
            work.extend(dependents.into_iter().map(|d| (d, Some(why.clone()))));
        }
        if let Some(parent) = parent {
            parents.push(JobId(parent));
        }
    }
    for parent in parents {
        release_if_unblocked(ctx, parent)?;
    }
    Ok(())
}

/// What a new dependency on a job means, from that job's state.
pub(crate) enum DependencyOn {
    /// It completed: the dependency is met already.
    Met,
    /// It has not completed: the dependent waits.
    Pending,
}

/// Locked: a dependency recorded on a job that another node is completing would otherwise miss the release that
/// completion makes (the completion updates the job's row, so one of the two waits for the other).
const SELECT_STATE: Sql = Sql {
    sqlite: "SELECT state FROM jobs WHERE id = $1",
    postgres: "SELECT state FROM jobs WHERE id = $1 FOR UPDATE",
};

/// Checks a dependency on `on` of `job`, or of a job about to be pushed under `parent`: `on` must exist and not be
/// cancelled, and must not wait, directly or not, for the dependent job (through its own dependencies, or as a
/// parent waits for its children): that would be a cycle, and neither could ever run.
pub(crate) fn check_dependency(
    ctx: &WriteCtx<'_>,
    job: Option<JobId>,
    parent: Option<JobId>,
    on: JobId,
) -> Result<DependencyOn> {
    if Some(on) == job {
        return Err(Error::invalid(
            "depends_on",
            format!("job {on} cannot depend on itself"),
        ));
    }
    if Some(on) == parent {
        return Err(Error::invalid_state(format!(
            "depends_on: a child cannot depend on its parent, job {on}, which waits for its children"
        )));
    }
    let state: Option<String> = ctx
        .db
        .query_row(SELECT_STATE, &params![on.0], |r| r.get(0))?;
    let Some(state) = state else {
        return Err(Error::invalid(
            "depends_on",
            format!("job {on} does not exist"),
        ));
    };
    match parse_stored_state(&state)? {
        JobState::Completed => return Ok(DependencyOn::Met),
        JobState::Cancelled => {
            return Err(Error::invalid_state(format!(
                "depends_on: job {on} was cancelled and will never complete"
            )));
        }
        _ => {}
    }
    // A new job has no dependents yet: it is waited for only as its parent's child.
    for target in [job, parent].into_iter().flatten() {
        if waits_for(ctx, on, target)? {
            return Err(Error::invalid_state(format!(
                "depends_on: job {on} already waits for job {target}; depending on it would make a cycle"
            )));
        }
    }
    Ok(DependencyOn::Pending)
}

/// What a job waits for: its unmet dependencies, and (as a parent) its live children.
const WAITED_FOR: Sql = Sql::both(concat!(
    "SELECT depends_on FROM job_dependencies WHERE job_id = $1 \
     UNION ALL SELECT c.id FROM jobs AS c WHERE c.parent_id = $1 AND ",
    live!("c")
));

/// Whether `from` waits, directly or through others, for `target`. The walk follows only unmet dependencies and
/// live children, so it stays within jobs that still wait or run.
fn waits_for(ctx: &WriteCtx<'_>, from: JobId, target: JobId) -> Result<bool> {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![from];
    while let Some(id) = stack.pop() {
        if id == target {
            return Ok(true);
        }
        if !seen.insert(id) {
            continue;
        }
        let next = ctx
            .db
            .query(WAITED_FOR, &params![id], |r| r.get::<JobId>(0))?;
        stack.extend(next);
    }
    Ok(false)
}

const RECORD_DEPENDENCY: Sql = Sql::both(
    "INSERT INTO job_dependencies (job_id, depends_on) VALUES ($1, $2) ON CONFLICT DO NOTHING",
);
const MARK_HAS_DEPENDENTS: Sql =
    Sql::both("UPDATE jobs SET has_dependents = TRUE WHERE id = $1 AND has_dependents = FALSE");

/// Records that `job` waits for `on` (checked with [`check_dependency`]).
pub(crate) fn record_dependency(ctx: &WriteCtx<'_>, job: JobId, on: JobId) -> Result<()> {
    ctx.db.execute(RECORD_DEPENDENCY, &params![job.0, on.0])?;
    ctx.db.execute(MARK_HAS_DEPENDENTS, &params![on.0])?;
    Ok(())
}
