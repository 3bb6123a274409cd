//! The workers the queue has seen: who took jobs or heartbeated, when last, what each holds, and which of those
//! leases ran out (stalled). Workers not seen for [`QueueOptions::worker_max_age`](crate::QueueOptions) are
//! forgotten by the writer's timed work.

use jiff::Timestamp;
use rusqlite::{Connection, named_params};

use crate::clock::from_millis;
use crate::error::Result;
use crate::job::JobId;
use crate::names::WorkerId;
use crate::ops::WriteCtx;

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
}

/// Records a sign of life, writing only when the last one is a second old or more.
const SEEN: &str = "INSERT INTO workers (id, first_seen, last_seen) VALUES (:id, :now, :now) \
     ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen WHERE last_seen <= excluded.last_seen - 1000";

/// `worker` took jobs or asked for them.
pub(crate) fn seen(ctx: &WriteCtx<'_>, worker: &str) -> Result<()> {
    ctx.conn
        .prepare_cached(SEEN)?
        .execute(named_params! { ":id": worker, ":now": ctx.now_ms })?;
    Ok(())
}

const SEEN_BY_JOB: &str = "UPDATE workers SET last_seen = :now \
     WHERE id = (SELECT worker FROM jobs WHERE id = :job) AND last_seen <= :now - 1000";

/// The worker holding `job` heartbeated.
pub(crate) fn seen_holding(ctx: &WriteCtx<'_>, job: JobId) -> Result<()> {
    ctx.conn
        .prepare_cached(SEEN_BY_JOB)?
        .execute(named_params! { ":job": job.0, ":now": ctx.now_ms })?;
    Ok(())
}

const FORGET: &str = "DELETE FROM workers WHERE id IN (SELECT id FROM workers INDEXED BY workers_last_seen \
     WHERE last_seen < :cutoff LIMIT 5000)";

/// Forgets workers last seen before `cutoff_ms`, a bounded number at a time. Returns how many.
pub(crate) fn forget_before(ctx: &WriteCtx<'_>, cutoff_ms: i64) -> Result<usize> {
    Ok(ctx
        .conn
        .prepare_cached(FORGET)?
        .execute(named_params! { ":cutoff": cutoff_ms })?)
}

const WORKERS: &str = "SELECT id, first_seen, last_seen FROM workers ORDER BY id";
const HELD: &str = "SELECT id, lease_expires_at <= :now FROM jobs INDEXED BY jobs_by_worker \
     WHERE state = 'running' AND worker = :worker ORDER BY id";

/// Every worker the queue remembers, by id, with what it holds at `now_ms`.
pub(crate) fn list(conn: &Connection, now_ms: i64) -> Result<Vec<WorkerInfo>> {
    let mut workers: Vec<WorkerInfo> = conn
        .prepare_cached(WORKERS)?
        .query_map([], |r| {
            Ok(WorkerInfo {
                id: WorkerId::from_trusted(r.get(0)?),
                first_seen: from_millis(r.get(1)?),
                last_seen: from_millis(r.get(2)?),
                jobs: Vec::new(),
                stalled: Vec::new(),
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut held = conn.prepare_cached(HELD)?;
    for worker in &mut workers {
        let rows = held.query_map(
            named_params! { ":now": now_ms, ":worker": worker.id.as_str() },
            |r| Ok((JobId(r.get(0)?), r.get::<_, bool>(1)?)),
        )?;
        for row in rows {
            let (job, stalled) = row?;
            worker.jobs.push(job);
            if stalled {
                worker.stalled.push(job);
            }
        }
    }
    Ok(workers)
}
