//! Failure groups: the failed jobs, grouped by the group their failure gave (`retries-exhausted`, or the group a
//! worker named), and [`Unfail`], which puts the oldest of a group back in a queue in one statement.

use crate::store::db::{Db, Params, Sql, params};
use jiff::Timestamp;

use crate::clock::from_millis;
use crate::error::{Error, Result};
use crate::names::QueueName;
use crate::ops::{Operation, WriteCtx, live};

/// One failure group: how many failed jobs it holds, and when they failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureGroup {
    /// The group.
    pub group: String,
    /// How many jobs are failed in it.
    pub count: u64,
    /// When the first of them failed.
    pub first_failed_at: Timestamp,
    /// When the last of them failed.
    pub last_failed_at: Timestamp,
}

const FAILURE_GROUPS: Sql = Sql {
    sqlite: "SELECT failure_group, count(*), min(finished_at), max(finished_at) \
             FROM jobs INDEXED BY jobs_failure_groups WHERE state = 'failed' GROUP BY failure_group ORDER BY failure_group",
    postgres: "SELECT failure_group, count(*), min(finished_at), max(finished_at) \
               FROM jobs WHERE state = 'failed' GROUP BY failure_group ORDER BY failure_group",
};

/// Every failure group with failed jobs in it, by name.
pub(crate) fn failure_groups(db: &Db<'_>) -> Result<Vec<FailureGroup>> {
    db.query(FAILURE_GROUPS, &Params::NONE, |row| {
        Ok(FailureGroup {
            group: row.get::<Option<String>>(0)?.unwrap_or_default(),
            count: row.get::<i64>(1)?.max(0) as u64,
            first_failed_at: from_millis(row.get::<Option<i64>>(2)?.unwrap_or(0)),
            last_failed_at: from_millis(row.get::<Option<i64>>(3)?.unwrap_or(0)),
        })
    })
}

/// The most jobs one unfail moves.
pub const MAX_UNFAIL: u32 = 1_000_000;

/// Puts the oldest `limit` failed jobs of a group back in a queue (their own, or `queue`), ready now, with fresh
/// attempts; their history is kept. A job whose unique key another live job holds now stays failed. One statement,
/// however many jobs: qless's `unfail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfail {
    /// The failure group.
    pub group: String,
    /// The queue to move them to; their own when `None`.
    pub queue: Option<String>,
    /// How many at most, 1 to [`MAX_UNFAIL`].
    pub limit: u32,
}

pub(crate) const UNFAIL: Sql = Sql {
    sqlite: concat!(
        "UPDATE jobs SET state = 'queued', queue = COALESCE($1, queue), run_at = $2, \
         aging_ms = CASE WHEN CAST($1 AS TEXT) IS NULL THEN aging_ms ELSE $3 END, \
         slot_at = $2, attempt = 0, finished_at = NULL, error = NULL, failure_group = NULL, worker = NULL \
         WHERE id IN (SELECT f.id FROM jobs AS f INDEXED BY jobs_failure_groups \
            WHERE f.state = 'failed' AND f.failure_group = $4 \
            AND (f.unique_key IS NULL OR NOT EXISTS (SELECT 1 FROM jobs AS l INDEXED BY jobs_unique_live \
                 WHERE l.unique_key = f.unique_key AND ",
        live!("l"),
        ")) ORDER BY f.id LIMIT 0 + $5) RETURNING queue, concurrency_key IS NOT NULL"
    ),
    postgres: concat!(
        "UPDATE jobs SET state = 'queued', queue = COALESCE($1, queue), run_at = $2, \
         aging_ms = CASE WHEN CAST($1 AS TEXT) IS NULL THEN aging_ms ELSE $3 END, \
         slot_at = $2, attempt = 0, finished_at = NULL, error = NULL, failure_group = NULL, worker = NULL \
         WHERE id IN (SELECT f.id FROM jobs AS f \
            WHERE f.state = 'failed' AND f.failure_group = $4 \
            AND (f.unique_key IS NULL OR NOT EXISTS (SELECT 1 FROM jobs AS l \
                 WHERE l.unique_key = f.unique_key AND ",
        live!("l"),
        ")) ORDER BY f.id LIMIT 0 + $5) RETURNING queue, concurrency_key IS NOT NULL"
    ),
};

impl Operation for Unfail {
    type Output = u64;

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<u64> {
        if self.group.is_empty() {
            return Err(Error::invalid("group", "must not be empty"));
        }
        if !(1..=MAX_UNFAIL).contains(&self.limit) {
            return Err(Error::invalid(
                "limit",
                format!("must be between 1 and {MAX_UNFAIL}, got {}", self.limit),
            ));
        }
        let queue = self
            .queue
            .as_deref()
            .map(QueueName::parse)
            .transpose()?
            .map(|q| q.as_str().to_owned());
        let aging = queue.as_deref().and_then(|q| ctx.settings.get(q).aging_ms);
        let moved_to = ctx.db.query(
            UNFAIL,
            &params![queue.as_deref(), ctx.now_ms, aging, &self.group, self.limit],
            |row| Ok((row.get::<String>(0)?, row.get::<bool>(1)?)),
        )?;
        let moved = moved_to.len() as u64;
        let mut last_queue = "";
        for (queue, keyed) in &moved_to {
            if *keyed {
                crate::ops::queues::mark_keyed(ctx, queue)?;
            }
            if queue != last_queue {
                ctx.ready.mark(queue);
                last_queue = queue;
            }
        }
        // One row for the whole group: a row per job would make a bulk operation of 100,000 jobs slow.
        if moved > 0 {
            let detail = format!("{moved} failed jobs of group {:?}", self.group);
            ctx.events.other(
                ctx.now_ms,
                crate::ops::events::ActivityKind::Unfailed,
                queue.as_deref(),
                None,
                Some(&detail),
            );
        }
        Ok(moved)
    }
}
