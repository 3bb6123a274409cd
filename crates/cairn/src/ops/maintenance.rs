//! Timed work the writer does at the start of a batch, each step bounded so no batch stalls: promoting jobs whose
//! `run_at` arrived, retrying jobs whose lease expired, recovering jobs a dead process left running, and pruning
//! finished jobs past retention, with the batches they leave, and old workers, activity and statistics. Also the
//! lookup of when the next timed step is due.

use crate::ops::events::ActivityKind;
use crate::store::db::{Db, Params, Sql, params};

use crate::clock::duration_millis;
use crate::error::Result;
use crate::job::AttemptOutcome;
use crate::ops::{
    HeldJob, ReadyQueues, TokenSource, WriteCtx, held_job_columns, held_job_from_row, retry_or_fail,
};
use crate::options::{RecoveryPolicy, Retention};

/// The most rows one step touches; if more are due, the writer comes back at once in its next batch.
/// Written as a literal in the statements too: a bound LIMIT makes SQLite re-prepare a cached statement on each use.
pub(crate) const STEP_ROWS: i64 = 5000;

const PROMOTE_DUE_JOBS: Sql = Sql {
    sqlite: "UPDATE jobs SET state = 'queued' WHERE id IN (SELECT id FROM jobs INDEXED BY \
             jobs_scheduled WHERE state = 'scheduled' AND run_at <= $1 ORDER BY run_at LIMIT 5000) RETURNING queue",
    // The outer `state = 'scheduled'`: PostgreSQL checks it again on a row another node changed while this one waited
    // for its lock (a node that promoted it and leased it at once), where the inner query's snapshot would not.
    postgres: "UPDATE jobs SET state = 'queued' WHERE state = 'scheduled' AND id IN (SELECT id FROM jobs WHERE state = 'scheduled' AND run_at <= $1 ORDER BY run_at LIMIT 5000) RETURNING queue",
};

/// Makes scheduled jobs whose time has come ready. Returns how many.
pub(crate) fn promote_due(ctx: &mut WriteCtx<'_>) -> Result<usize> {
    let queues = ctx
        .db
        .query(PROMOTE_DUE_JOBS, &params![ctx.now_ms], |row| {
            row.get::<String>(0)
        })?;
    let mut per_queue: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for queue in &queues {
        *per_queue.entry(queue.as_str()).or_default() += 1;
    }
    for (queue, count) in per_queue {
        ctx.ready.mark(queue);
        let detail = match count {
            1 => "1 job due".to_owned(),
            n => format!("{n} jobs due"),
        };
        ctx.events.other(
            ctx.now_ms,
            crate::ops::events::ActivityKind::Promoted,
            Some(queue),
            None,
            Some(&detail),
        );
    }
    Ok(queues.len())
}

const SELECT_RUNNING: Sql = Sql {
    sqlite: concat!(
        "SELECT ",
        held_job_columns!(),
        " FROM jobs INDEXED BY jobs_leases WHERE state = 'running' AND lease_expires_at <= $1 \
         ORDER BY lease_expires_at LIMIT 5000"
    ),
    postgres: concat!(
        "SELECT ",
        held_job_columns!(),
        " FROM jobs WHERE state = 'running' AND lease_expires_at <= $1 \
         ORDER BY lease_expires_at LIMIT 5000 FOR UPDATE SKIP LOCKED"
    ),
};

/// On PostgreSQL the rows are locked, skipping those another transaction holds: two nodes expiring leases at
/// once (around a handover of the lead) never retry the same attempt twice.
fn running_jobs(ctx: &WriteCtx<'_>, until: i64) -> Result<Vec<HeldJob>> {
    ctx.db
        .query(SELECT_RUNNING, &params![until], held_job_from_row)
}

/// Retries (or, out of attempts, fails) jobs whose lease ran out. Returns how many.
pub(crate) fn expire_leases(ctx: &mut WriteCtx<'_>) -> Result<usize> {
    let expired = running_jobs(ctx, ctx.now_ms)?;
    for held in &expired {
        ctx.events.job(
            ctx.now_ms,
            ActivityKind::HeartbeatLost,
            held.into(),
            Some(&held.worker),
            None,
        );
        retry_or_fail(
            ctx,
            held,
            AttemptOutcome::LeaseExpired,
            "the lease expired before the worker finished",
            None,
            None,
        )?;
    }
    Ok(expired.len())
}

#[cfg(feature = "sqlite")]
/// Runs [`recover_orphans`] in its own transaction, when a queue is opened and before its writer starts: nothing
/// else runs yet, so every running job belongs to a dead process.
pub(crate) fn recover_at_open(
    conn: &mut rusqlite::Connection,
    now_ms: i64,
    settings: &crate::ops::queues::SettingsCache,
    policy: RecoveryPolicy,
) -> Result<usize> {
    if policy == RecoveryPolicy::KeepLeases {
        // Lease expiry, which the writer runs anyway, recovers the jobs whose workers are gone.
        return Ok(0);
    }
    let tx = conn.transaction()?;
    let (mut ready, mut tokens, mut rotation) = (ReadyQueues::default(), TokenSource::new(), 0);
    let mut settings = settings.clone();
    let mut events = crate::ops::events::EventLog::default();
    let mut ctx = WriteCtx {
        db: Db::Sqlite(&tx),
        now_ms,
        events: &mut events,
        ready: &mut ready,
        tokens: &mut tokens,
        rotation: &mut rotation,
        settings: &mut settings,
    };
    let recovered = recover_orphans(&mut ctx, policy)?;
    ctx.events
        .flush(&ctx.db, None, &ctx.settings.config.limits.name_families)?;
    drop(ctx);
    tx.commit()?;
    Ok(recovered)
}

/// Recovers every job left running by a process that died. Only called when this process holds the database's
/// lock, so no live worker can hold those jobs. Returns how many.
fn recover_orphans(ctx: &mut WriteCtx<'_>, policy: RecoveryPolicy) -> Result<usize> {
    let mut total = 0;
    loop {
        let orphans = running_jobs(ctx, i64::MAX)?;
        for held in &orphans {
            let run_at = match policy {
                RecoveryPolicy::Backoff => None,
                RecoveryPolicy::RetryNow | RecoveryPolicy::KeepLeases => Some(ctx.now_ms),
            };
            ctx.events.job(
                ctx.now_ms,
                ActivityKind::HeartbeatLost,
                held.into(),
                Some(&held.worker),
                Some("the process running the job exited"),
            );
            retry_or_fail(
                ctx,
                held,
                AttemptOutcome::Crashed,
                "the process running the job exited",
                run_at,
                None,
            )?;
        }
        total += orphans.len();
        if (orphans.len() as i64) < STEP_ROWS {
            return Ok(total);
        }
    }
}

/// The finished jobs at or before (`$1`, `$2`) and after (`$3`, `$4`) in (finished_at, id) order, up to `$5` of
/// them (numbered in the order they appear, which is how SQLite numbers `$` parameters): ids break ties, since a batch finishes many jobs in the same millisecond. Each bound is written twice, once
/// on `finished_at` alone so that it bounds the walk of `jobs_finished`, once to break the tie. Children of a live
/// parent are kept: the parent reads them when it runs again. Written into the two statements below.
macro_rules! prunable_finished {
    ($indexed:literal) => {
        concat!(
            "SELECT id FROM jobs ",
            $indexed,
            " WHERE (state = 'completed' OR state = 'cancelled') \
             AND finished_at <= $1 AND (finished_at < $1 OR id <= $2) \
             AND finished_at >= $3 AND (finished_at > $3 OR id > $4) \
             AND (parent_id IS NULL OR NOT EXISTS (SELECT 1 FROM jobs AS p WHERE p.id = jobs.parent_id AND ",
            crate::ops::live!("p"),
            ")) ORDER BY finished_at, id LIMIT 0 + $5"
        )
    };
}

/// The prunable jobs, deleted. On SQLite only the jobs: their history and tags follow, one statement each for the
/// whole step (`Dialect::prune_history_and_tags`). On PostgreSQL with their history and tags, in one statement: one
/// round trip per step, however many jobs it deletes.
const PRUNE_FINISHED: Sql = Sql {
    sqlite: concat!(
        "DELETE FROM jobs WHERE id IN (",
        prunable_finished!("INDEXED BY jobs_finished"),
        ") RETURNING id, finished_at"
    ),
    postgres: concat!(
        "WITH gone AS (DELETE FROM jobs WHERE id IN (",
        prunable_finished!(""),
        ") RETURNING id, finished_at), \
         history AS (DELETE FROM job_attempts WHERE job_id IN (SELECT id FROM gone)), \
         tags AS (DELETE FROM job_tags WHERE job_id IN (SELECT id FROM gone)), \
         steps AS (DELETE FROM job_steps WHERE job_id IN (SELECT id FROM gone)) \
         SELECT id, finished_at FROM gone"
    ),
};

/// The newest finished job past the ones retention keeps, in (finished_at, id) order.
const NTH_NEWEST_FINISHED: Sql = Sql {
    sqlite: "SELECT finished_at, id FROM jobs INDEXED BY jobs_finished \
             WHERE (state = 'completed' OR state = 'cancelled') ORDER BY finished_at DESC, id DESC LIMIT 1 OFFSET 0 + $1",
    postgres: "SELECT finished_at, id FROM jobs \
               WHERE (state = 'completed' OR state = 'cancelled') ORDER BY finished_at DESC, id DESC LIMIT 1 OFFSET 0 + $1",
};

/// The most finished jobs one step of retention deletes, and the fewest: the writer sizes its steps between them
/// to its time budget (`engine::timed`), since a step runs inside one of its batches and every enqueue and claim of
/// that batch waits for it; a backlog drains a step at a time, between batches.
pub(crate) const MAX_PRUNE_STEP_JOBS: i64 = 2000;
pub(crate) const MIN_PRUNE_STEP_JOBS: i64 = 100;

/// Deletes up to `limit` finished jobs after `floor` and at or before `cutoff` (finished_at, id), with their
/// history and tags, set by set: never a statement per job. Returns how many, and the last one deleted.
fn prune_between(
    ctx: &WriteCtx<'_>,
    floor: (i64, i64),
    cutoff: (i64, i64),
    limit: i64,
) -> Result<(usize, Option<(i64, i64)>)> {
    let params = params![cutoff.0, cutoff.1, floor.0, floor.1, limit];
    let gone: Vec<(i64, i64)> = ctx
        .db
        .query(PRUNE_FINISHED, &params, |r| Ok((r.get(1)?, r.get(0)?)))?;
    if !gone.is_empty() {
        // SQLite's statement deleted only the jobs; its dialect deletes their history and tags after them.
        let ids: Vec<i64> = gone.iter().map(|(_, id)| *id).collect();
        ctx.db.dialect().prune_history_and_tags(&ctx.db, &ids)?;
    }
    Ok((gone.len(), gone.into_iter().max()))
}

/// What one step of retention did.
pub(crate) struct Pruned {
    /// Rows deleted, of every kind.
    pub rows: usize,
    /// Finished jobs deleted.
    pub jobs: usize,
    /// How long deleting them took (not finding the count's cutoff, nor the other kinds): what a step's size is
    /// measured by.
    pub deleting: std::time::Duration,
    /// Whether some kind filled its step: there may be more to delete, in a later batch.
    pub more: bool,
    /// Where the drain has got to, for the next step; the default once nothing is left.
    pub progress: PruneProgress,
}

/// How far a drain has got, carried from one step of retention to the next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PruneProgress {
    /// Whether finished jobs are still to go.
    jobs: bool,
    /// Whether activity or statistics are still to go.
    others: bool,
    /// The cutoff the retention count gave, found once per drain: the newest `max_count` finished jobs are newer
    /// still at the next step, so everything up to it is still to go, and walking past them again is waste.
    count_cutoff: Option<CountCutoff>,
    /// The last finished job deleted, (finished_at, id): the next step walks the index from there, not from its
    /// head. What is before it was deleted, but for children kept for a live parent and jobs that finished behind
    /// it after it passed (in the same millisecond with a lower id, or on a node whose clock runs behind): those
    /// wait for the next drain, which starts from the head. Why not from the head each step: on PostgreSQL the head
    /// holds the entries of every job the drain deleted until vacuum removes them, and walking past those again at
    /// each step made each step slower than the last.
    floor: Option<(i64, i64)>,
}

/// The newest finished job past the `keep` newest, (finished_at, id), as one step of retention found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CountCutoff {
    keep: i64,
    at: (i64, i64),
}

/// Deletes finished jobs beyond the retention age and count, up to `step_jobs` of them, and old workers, activity
/// and statistics, a bounded step of each. A `pass` (once per retention interval) looks at every kind; a step of a
/// drain under way (`progress`) only at the kinds that had more to delete, so that each of its steps costs what it
/// deletes and no more.
pub(crate) fn prune(
    ctx: &mut WriteCtx<'_>,
    retention: &Retention,
    pass: bool,
    progress: PruneProgress,
    step_jobs: i64,
) -> Result<Pruned> {
    let mut deleting = std::time::Duration::ZERO;
    let (jobs, count_cutoff, floor) = if pass || progress.jobs {
        prune_jobs(ctx, retention, progress, step_jobs, &mut deleting)?
    } else {
        (0, None, None)
    };
    let jobs_more = jobs as i64 >= step_jobs;
    let mut others_more = false;
    let mut rows = jobs;
    if pass || progress.others {
        let mut other = |deleted: usize| {
            rows += deleted;
            others_more |= deleted as i64 >= STEP_ROWS;
        };
        if pass {
            crate::ops::workers::lose_silent(ctx)?;
            if let Some(max_age) = retention.worker_max_age {
                let cutoff = ctx.now_ms.saturating_sub(duration_millis(max_age));
                other(crate::ops::workers::forget_before(ctx, cutoff)?);
            }
        }
        // Batches follow their jobs: kept while retention keeps any of them, and as long as it keeps a finished
        // job (`max_age`); with no retention of jobs, kept as the jobs are.
        if retention.max_age.is_some() || retention.max_count.is_some() {
            let cutoff = retention.max_age.map_or(ctx.now_ms, |max_age| {
                ctx.now_ms.saturating_sub(duration_millis(max_age))
            });
            other(ctx.db.execute(PRUNE_BATCHES, &params![cutoff])?);
        }
        // A signal no job waited for within a finished job's age goes as such a job would.
        if let Some(max_age) = retention.max_age {
            let cutoff = ctx.now_ms.saturating_sub(duration_millis(max_age));
            other(crate::ops::signal::prune_kept(ctx, cutoff, STEP_ROWS)?);
        }
        if let Some(max_age) = retention.activity_max_age {
            let cutoff = ctx.now_ms.saturating_sub(duration_millis(max_age));
            other(ctx.db.execute(PRUNE_ACTIVITY, &params![cutoff])?);
        }
        if let Some(keep) = retention.activity_max_count {
            let keep = i64::try_from(keep).unwrap_or(i64::MAX);
            other(ctx.db.execute(PRUNE_ACTIVITY_BY_COUNT, &params![keep])?);
        }
        if let Some(max_age) = retention.stats_max_age {
            let cutoff = ctx.now_ms.saturating_sub(duration_millis(max_age));
            for sql in PRUNE_STATS {
                other(ctx.db.execute(sql, &params![cutoff])?);
            }
        }
    }
    Ok(Pruned {
        rows,
        jobs,
        deleting,
        more: jobs_more || others_more,
        progress: PruneProgress {
            jobs: jobs_more,
            others: others_more,
            // A drain of jobs that is over starts from the head of the index next time: the children it kept may
            // be free to go by then, and vacuum has had time to clear the entries it left.
            count_cutoff: count_cutoff.filter(|_| jobs_more),
            floor: floor.filter(|_| jobs_more),
        },
    })
}

/// The finished-jobs part of [`prune`]: returns how many it deleted, the count's cutoff if it deleted up to it,
/// and the last job deleted; adds the time its deletes took to `deleting`.
#[allow(clippy::type_complexity)]
fn prune_jobs(
    ctx: &mut WriteCtx<'_>,
    retention: &Retention,
    progress: PruneProgress,
    step_jobs: i64,
    deleting: &mut std::time::Duration,
) -> Result<(usize, Option<CountCutoff>, Option<(i64, i64)>)> {
    let floor = progress.floor.unwrap_or((i64::MIN, i64::MIN));
    let mut last = progress.floor;
    let mut jobs = 0;
    if let Some(max_age) = retention.max_age {
        // Older than max_age: finished strictly before now - max_age, whatever the id.
        let cutoff = ctx
            .now_ms
            .saturating_sub(duration_millis(max_age))
            .saturating_sub(1);
        let started = std::time::Instant::now();
        let (deleted, reached) = prune_between(ctx, floor, (cutoff, i64::MAX), step_jobs)?;
        *deleting += started.elapsed();
        jobs += deleted;
        last = last.max(reached);
    }
    let mut count_cutoff = None;
    if let Some(keep) = retention.max_count {
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let cutoff: Option<(i64, i64)> = match progress.count_cutoff {
            // Found for the same count (a count changed since is looked up afresh).
            Some(cutoff) if cutoff.keep == keep => Some(cutoff.at),
            // An index walk past the newest `keep` finished jobs: done once per drain, not once per step.
            _ => ctx.db.query_row(NTH_NEWEST_FINISHED, &params![keep], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?,
        };
        let left = step_jobs - jobs as i64;
        if let (Some(cutoff), true) = (cutoff, left > 0) {
            // The age's step may have gone past where the drain was: start from wherever is further.
            let from = last.unwrap_or((i64::MIN, i64::MIN));
            let started = std::time::Instant::now();
            let (deleted, reached) = prune_between(ctx, from, cutoff, left)?;
            *deleting += started.elapsed();
            jobs += deleted;
            last = last.max(reached);
            if deleted as i64 >= left {
                count_cutoff = Some(CountCutoff { keep, at: cutoff });
            }
        }
    }
    Ok((jobs, count_cutoff, last))
}

/// The oldest activity rows are the lowest ids: look at those, and delete the ones past the cutoff. The newest row
/// always stays: on SQLite a new row's id is the largest plus one, so an emptied log would hand out ids again from
/// 1, behind where the event stream's readers stand.
pub(crate) const PRUNE_ACTIVITY: Sql = Sql::both(
    "DELETE FROM activity WHERE id IN (SELECT id FROM activity ORDER BY id LIMIT 5000) \
     AND at < $1 AND id < (SELECT max(id) FROM activity)",
);

/// The activity rows past the newest `$1`, oldest first, a bounded number at a time. Ids grow with time, so the
/// cutoff is the newest id less the count: one lookup at the end of the primary key, not a walk past the rows kept.
/// On PostgreSQL ids come from a sequence, which skips numbers a rolled-back batch took, so a few fewer are kept.
pub(crate) const PRUNE_ACTIVITY_BY_COUNT: Sql = Sql::both(
    "DELETE FROM activity WHERE id IN (SELECT id FROM activity \
     WHERE id <= (SELECT max(id) FROM activity) - $1 ORDER BY id LIMIT 5000)",
);

/// Batches that completed before the cutoff, whose callbacks are made and whose jobs are all gone (retention deleted
/// them, or they were deleted): only their counts are left. Oldest first, a bounded number at a time. A batch with a
/// job left (a failed job not yet dealt with, say) stays however old, and each pass walks past it again: as many
/// index probes as there are such batches.
pub(crate) const PRUNE_BATCHES: Sql = Sql::both(
    "DELETE FROM batches WHERE id IN (SELECT b.id FROM batches b \
     WHERE b.completed_at IS NOT NULL AND b.completed_at < $1 AND NOT b.due \
     AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.batch_id = b.id) \
     ORDER BY b.completed_at LIMIT 5000)",
);

/// Statistics rows of periods that started before the cutoff, a bounded number at a time.
pub(crate) const PRUNE_STATS: [Sql; 3] = [
    Sql::both(
        "DELETE FROM stats_minute WHERE (minute, queue, name) IN \
         (SELECT minute, queue, name FROM stats_minute WHERE minute < $1 LIMIT 5000)",
    ),
    Sql::both(
        "DELETE FROM stats_histogram WHERE (hour, queue, name, metric, bucket) IN \
         (SELECT hour, queue, name, metric, bucket FROM stats_histogram WHERE hour < $1 LIMIT 5000)",
    ),
    Sql::both(
        "DELETE FROM worker_hour WHERE (hour, worker, queue) IN \
         (SELECT hour, worker, queue FROM worker_hour WHERE hour < $1 LIMIT 5000)",
    ),
];

/// When the next scheduled job is due, the next lease expires, and the next template slot comes: one statement,
/// since on PostgreSQL each is a round trip.
const NEXT_DUE: Sql = Sql {
    sqlite: "SELECT \
             (SELECT MIN(run_at) FROM jobs INDEXED BY jobs_scheduled WHERE state = 'scheduled'), \
             (SELECT MIN(lease_expires_at) FROM jobs INDEXED BY jobs_leases WHERE state = 'running'), \
             (SELECT MIN(next_slot_at) FROM recurring INDEXED BY recurring_due WHERE next_slot_at IS NOT NULL)",
    postgres: "SELECT \
               (SELECT MIN(run_at) FROM jobs WHERE state = 'scheduled'), \
               (SELECT MIN(lease_expires_at) FROM jobs WHERE state = 'running'), \
               (SELECT MIN(next_slot_at) FROM recurring WHERE next_slot_at IS NOT NULL)",
};

/// When the next scheduled job is due, the next lease expires, or the next template slot comes, whichever is first
/// (ms), if ever.
pub(crate) fn next_due(db: &Db<'_>) -> Result<Option<i64>> {
    let (run_at, expiry, slot): (Option<i64>, Option<i64>, Option<i64>) =
        db.query_one(NEXT_DUE, &Params::NONE, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    Ok([run_at, expiry, slot].into_iter().flatten().min())
}
