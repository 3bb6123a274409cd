//! Queue control: [`PauseQueue`] (a paused queue hands out nothing; everything else works) and the per-queue
//! counts of [`QueueStats`].

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, named_params};

use crate::error::Result;
use crate::job::JobState;
use crate::names::QueueName;
use crate::ops::{Operation, WriteCtx, parse_stored_state};

/// Pauses or resumes a queue. A paused queue's jobs stay where they are: they are enqueued, scheduled, finished,
/// cancelled as usual, but no worker is handed one until the queue is resumed. Resuming hands them at once to
/// workers that wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseQueue {
    /// The queue.
    pub queue: String,
    /// True to pause, false to resume.
    pub paused: bool,
}

const SET_PAUSED: &str = "INSERT INTO queues (name, paused) VALUES (:name, :paused) \
     ON CONFLICT (name) DO UPDATE SET paused = excluded.paused";

impl Operation for PauseQueue {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let queue = QueueName::parse(self.queue.as_str())?;
        ctx.conn
            .prepare_cached(SET_PAUSED)?
            .execute(named_params! { ":name": queue.as_str(), ":paused": self.paused })?;
        if !self.paused {
            ctx.ready.mark(queue.as_str());
        }
        Ok(())
    }
}

const IS_PAUSED: &str = "SELECT paused FROM queues WHERE name = :name";

/// Whether a queue is paused: a primary-key lookup in a table of a few rows, made once per queue a claim looks at.
pub(crate) fn is_paused(conn: &Connection, queue: &str) -> Result<bool> {
    let paused: Option<bool> = conn
        .prepare_cached(IS_PAUSED)?
        .query_row(named_params! { ":name": queue }, |r| r.get(0))
        .optional()?;
    Ok(paused.unwrap_or(false))
}

/// One queue's jobs, counted by state, and whether it is paused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// The queue.
    pub queue: String,
    /// Whether it hands out nothing for now.
    pub paused: bool,
    /// Jobs waiting for their `run_at`.
    pub scheduled: u64,
    /// Jobs ready to be taken.
    pub queued: u64,
    /// Jobs waiting on other jobs.
    pub waiting: u64,
    /// Jobs leased to a worker whose lease has not run out.
    pub running: u64,
    /// Jobs whose lease ran out and that the queue has not retried yet (their worker is lost or hung).
    pub stalled: u64,
    /// Failed jobs.
    pub failed: u64,
    /// Completed jobs (until retention deletes them).
    pub completed: u64,
    /// Cancelled jobs (until retention deletes them).
    pub cancelled: u64,
}

const COUNT_BY_STATE: &str = "SELECT queue, state, lease_expires_at <= :now, count(*) FROM jobs \
     GROUP BY queue, state, lease_expires_at <= :now";

const PAUSED_QUEUES: &str = "SELECT name, paused FROM queues";

/// Every queue that has jobs or settings, by name, with its counts at `now_ms`. This reads every job: it is for
/// operators and dashboards, not for a hot path.
pub(crate) fn queue_stats(conn: &Connection, now_ms: i64) -> Result<Vec<QueueStats>> {
    let mut stats: BTreeMap<String, QueueStats> = BTreeMap::new();
    let mut stmt = conn.prepare_cached(COUNT_BY_STATE)?;
    let mut rows = stmt.query(named_params! { ":now": now_ms })?;
    while let Some(row) = rows.next()? {
        let queue: String = row.get(0)?;
        let state = parse_stored_state(&row.get::<_, String>(1)?)?;
        let expired: Option<bool> = row.get(2)?;
        let count = row.get::<_, i64>(3)?.max(0) as u64;
        let s = stats.entry(queue.clone()).or_insert_with(|| QueueStats {
            queue,
            ..QueueStats::default()
        });
        match state {
            JobState::Scheduled => s.scheduled += count,
            JobState::Queued => s.queued += count,
            JobState::Waiting => s.waiting += count,
            JobState::Running if expired == Some(true) => s.stalled += count,
            JobState::Running => s.running += count,
            JobState::Failed => s.failed += count,
            JobState::Completed => s.completed += count,
            JobState::Cancelled => s.cancelled += count,
        }
    }
    let mut stmt = conn.prepare_cached(PAUSED_QUEUES)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let queue: String = row.get(0)?;
        let paused: bool = row.get(1)?;
        stats
            .entry(queue.clone())
            .or_insert_with(|| QueueStats {
                queue,
                ..QueueStats::default()
            })
            .paused = paused;
    }
    Ok(stats.into_values().collect())
}
