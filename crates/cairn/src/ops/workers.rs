//! The workers the queue has seen: who took jobs or heartbeated, when last, what each holds, and which of those
//! leases ran out (stalled). Workers not seen for [`QueueOptions::worker_max_age`](crate::QueueOptions) are
//! forgotten by the writer's timed work.

use crate::store::db::{Db, Params, Sql, params};
use jiff::Timestamp;

use crate::clock::{duration_millis, from_millis};
use crate::error::Result;
use crate::names::JobId;
use crate::names::WorkerId;
use crate::ops::events::{ActivityKind, WORKER_LOST_AFTER};
use crate::ops::{Operation, WriteCtx};

/// A worker as the queue saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// The worker's id.
    pub id: WorkerId,
    /// When it first took jobs or heartbeated.
    pub first_seen: Timestamp,
    /// When it last did (to a second).
    pub last_seen: Timestamp,
    /// The jobs it holds, oldest first.
    pub jobs: Vec<JobId>,
    /// Those of its jobs whose lease ran out and that the queue has not retried yet.
    pub stalled: Vec<JobId>,
    /// Whether it is still about.
    pub status: WorkerStatus,
}

/// Whether a worker is still about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerStatus {
    /// Seen within the last five minutes, or holding a lease that has not run out.
    Live,
    /// It said it stops (a worker shutting down, or a one-off `cairn dequeue`); its next dequeue starts it again.
    Stopped,
    /// Silent for five minutes and holding no live lease: lost.
    Gone,
}

impl WorkerStatus {
    /// The status's name, as the API shows it: `live`, `stopped` or `gone`.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerStatus::Live => "live",
            WorkerStatus::Stopped => "stopped",
            WorkerStatus::Gone => "gone",
        }
    }

    /// The status named `name`, if there is one.
    pub fn parse(name: &str) -> Option<WorkerStatus> {
        [
            WorkerStatus::Live,
            WorkerStatus::Stopped,
            WorkerStatus::Gone,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// Records a sign of life: writes `last_seen` and marks the worker active.
pub(crate) const SEEN: Sql = Sql::both(
    "INSERT INTO workers (id, first_seen, last_seen, status) VALUES ($1, $2, $2, 'active') \
     ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen, status = 'active'",
);

const LAST_SEEN: Sql = Sql::both("SELECT last_seen, status = 'active' FROM workers WHERE id = $1");

/// When the writer last wrote a worker's sign of life, and whether it was active then: kept in memory, so that a
/// busy worker's dequeues and heartbeats cost no lookup, and written at most once a second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LastSeen {
    at: i64,
    active: bool,
}

/// `worker` took jobs, asked for them, or heartbeated. The time since its last sign of life counts as presence
/// (for its utilization) unless it was long enough to count as lost; a worker new, stopped or lost starts again.
pub(crate) fn seen(ctx: &mut WriteCtx<'_>, worker: &str) -> Result<()> {
    let now = ctx.now_ms;
    let last = match ctx.settings.seen.get(worker) {
        Some(last) => Some(*last),
        None => ctx.db.query_row(LAST_SEEN, &params![worker], |r| {
            Ok(LastSeen {
                at: r.get(0)?,
                active: r.get(1)?,
            })
        })?,
    };
    let lost_after = duration_millis(WORKER_LOST_AFTER);
    match last {
        Some(last) if last.active && now - last.at < 1000 => return Ok(()),
        Some(last) if last.active && now - last.at <= lost_after => {
            ctx.events.present(worker, last.at, now);
        }
        Some(last) => {
            if last.active {
                // Silent long enough to count as lost, before housekeeping noticed: say so first.
                let detail = format!("last seen {}", from_millis(last.at));
                ctx.events.other(
                    now,
                    ActivityKind::WorkerLost,
                    None,
                    Some(worker),
                    Some(&detail),
                );
            }
            ctx.events
                .other(now, ActivityKind::WorkerStarted, None, Some(worker), None);
        }
        None => ctx
            .events
            .other(now, ActivityKind::WorkerStarted, None, Some(worker), None),
    }
    ctx.db.execute(SEEN, &params![worker, now])?;
    ctx.settings.seen.insert(
        worker.to_owned(),
        LastSeen {
            at: now,
            active: true,
        },
    );
    Ok(())
}

const STOPPED: Sql = Sql::both(
    "UPDATE workers SET last_seen = $1, status = 'stopped' WHERE id = $2 RETURNING last_seen",
);

/// A worker says it stops: it takes no more jobs (those it holds run out as usual). It starts again with its next
/// dequeue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerStopped {
    /// The worker.
    pub worker: String,
}

impl Operation for WorkerStopped {
    type Output = ();

    fn is_durable(&self) -> bool {
        false
    }

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let worker = WorkerId::parse(self.worker.as_str())?;
        seen(ctx, worker.as_str())?;
        ctx.db
            .query_row(STOPPED, &params![ctx.now_ms, worker.as_str()], |_| Ok(()))?;
        ctx.events.other(
            ctx.now_ms,
            ActivityKind::WorkerStopped,
            None,
            Some(worker.as_str()),
            None,
        );
        ctx.settings.seen.remove(worker.as_str());
        Ok(())
    }
}

/// A worker that holds a live lease is not lost, however long it has been silent (a long job without heartbeats).
pub(crate) const LOSE: Sql = Sql {
    sqlite: "UPDATE workers SET status = 'lost' WHERE id IN (SELECT w.id FROM workers AS w INDEXED BY \
             workers_last_seen WHERE w.last_seen < $1 AND w.status = 'active' AND NOT EXISTS (SELECT 1 FROM jobs \
             INDEXED BY jobs_by_worker WHERE state = 'running' AND worker = w.id AND lease_expires_at > $2) LIMIT 1000) \
             RETURNING id, last_seen",
    postgres: "UPDATE workers SET status = 'lost' WHERE id IN (SELECT w.id FROM workers AS w WHERE w.last_seen < $1 AND w.status = 'active' AND NOT EXISTS (SELECT 1 FROM jobs \
               WHERE state = 'running' AND worker = w.id AND lease_expires_at > $2) LIMIT 1000) \
               RETURNING id, last_seen",
};

/// Marks the active workers silent for [`WORKER_LOST_AFTER`] as lost, a bounded number at a time. Returns how
/// many.
pub(crate) fn lose_silent(ctx: &mut WriteCtx<'_>) -> Result<usize> {
    let cutoff = ctx.now_ms - duration_millis(WORKER_LOST_AFTER);
    let lost: Vec<(String, i64)> = ctx.db.query(LOSE, &params![cutoff, ctx.now_ms], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })?;
    for (worker, last_seen) in &lost {
        let detail = format!("last seen {}", from_millis(*last_seen));
        ctx.events.other(
            ctx.now_ms,
            ActivityKind::WorkerLost,
            None,
            Some(worker),
            Some(&detail),
        );
        ctx.settings.seen.remove(worker);
    }
    Ok(lost.len())
}

pub(crate) const FORGET: Sql = Sql {
    sqlite: "DELETE FROM workers WHERE id IN (SELECT id FROM workers INDEXED BY workers_last_seen \
             WHERE last_seen < $1 LIMIT 5000) RETURNING id",
    postgres: "DELETE FROM workers WHERE id IN (SELECT id FROM workers \
               WHERE last_seen < $1 LIMIT 5000) RETURNING id",
};

/// Forgets workers last seen before `cutoff_ms`, a bounded number at a time. Returns how many.
pub(crate) fn forget_before(ctx: &mut WriteCtx<'_>, cutoff_ms: i64) -> Result<usize> {
    let forgotten: Vec<String> = ctx.db.query(FORGET, &params![cutoff_ms], |r| r.get(0))?;
    for worker in &forgotten {
        ctx.settings.seen.remove(worker);
    }
    Ok(forgotten.len())
}

const WORKERS: Sql = Sql::both("SELECT id, first_seen, last_seen, status FROM workers ORDER BY id");
const HELD: Sql = Sql {
    sqlite: "SELECT id, lease_expires_at <= $1 FROM jobs INDEXED BY jobs_by_worker \
             WHERE state = 'running' AND worker = $2 ORDER BY id",
    postgres: "SELECT id, lease_expires_at <= $1 FROM jobs \
               WHERE state = 'running' AND worker = $2 ORDER BY id",
};

/// Every worker the queue remembers, by id, with what it holds at `now_ms`.
pub(crate) fn list(db: &Db<'_>, now_ms: i64) -> Result<Vec<WorkerInfo>> {
    let lost_before = now_ms - duration_millis(WORKER_LOST_AFTER);
    let mut workers: Vec<(WorkerInfo, i64, String)> = db.query(WORKERS, &Params::NONE, |r| {
        let last_seen: i64 = r.get(2)?;
        let worker = WorkerInfo {
            id: WorkerId::from_trusted(r.get(0)?),
            first_seen: from_millis(r.get(1)?),
            last_seen: from_millis(last_seen),
            jobs: Vec::new(),
            stalled: Vec::new(),
            status: WorkerStatus::Live,
        };
        Ok((worker, last_seen, r.get(3)?))
    })?;
    for (worker, last_seen, status) in &mut workers {
        let rows = db.query(HELD, &params![now_ms, worker.id.as_str()], |r| {
            Ok((JobId(r.get(0)?), r.get::<bool>(1)?))
        })?;
        for (job, stalled) in rows {
            worker.jobs.push(job);
            if stalled {
                worker.stalled.push(job);
            }
        }
        // As housekeeping will mark it: a worker silent too long that holds no live lease is lost, whether or not
        // housekeeping has come round to it yet.
        let holds_live_lease = worker.jobs.len() > worker.stalled.len();
        worker.status = match status.as_str() {
            "stopped" => WorkerStatus::Stopped,
            "active" if *last_seen >= lost_before || holds_live_lease => WorkerStatus::Live,
            _ => WorkerStatus::Gone,
        };
    }
    Ok(workers.into_iter().map(|(worker, _, _)| worker).collect())
}
