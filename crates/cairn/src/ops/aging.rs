//! Priority aging: on a queue that has it, a ready job's priority grows by one for every `every` it has waited
//! (continuously, not in steps: half a point after half of `every`), so a steady stream of high-priority jobs
//! cannot starve the low ones forever. A job of priority 0 that has waited ten minutes on a queue aging one point a
//! minute goes before a fresh job of priority 9, and after a fresh one of priority 11.
//!
//! It costs a claim nothing: the claim order `priority + waited / every`, highest first, is the order of
//! `run_at - priority * every`, lowest first, which does not change as time passes, so it is the key of the
//! ready-jobs index (`claim_key`, migration 0010). Every job carries its queue's `every` for that key.

use std::time::Duration;

use crate::clock::duration_millis;
use crate::error::{Error, Result};
use crate::names::QueueName;
use crate::ops::{Operation, WriteCtx};
use crate::store::db::{Sql, params};

/// The slowest aging: one point a day. Bounded so that `priority * every` fits the index key for any priority.
pub const MAX_AGING_STEP: Duration = Duration::from_secs(24 * 3600);

/// The fastest aging: one point a millisecond.
pub const MIN_AGING_STEP: Duration = Duration::from_millis(1);

/// Turns priority aging on or off for a queue. It applies at once to the queue's jobs, ready ones included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgeQueue {
    /// The queue.
    pub queue: String,
    /// A ready job gains one priority point per `every` it waits; `None` for strict priority (the default).
    pub every: Option<Duration>,
}

pub(crate) const SET_AGING: Sql = Sql::both(
    "INSERT INTO queues (name, aging_ms) VALUES ($1, $2) \
     ON CONFLICT (name) DO UPDATE SET aging_ms = excluded.aging_ms",
);

/// Gives the queue's jobs its new setting. It reads every job (there is no index by queue alone), which is fine
/// for an operator's occasional change and is why the setting is not a per-claim option.
/// `$1` the aging step, `$2` the queue.
pub(crate) const AGE_JOBS: Sql =
    Sql::both("UPDATE jobs SET aging_ms = $1 WHERE queue = $2 AND aging_ms IS DISTINCT FROM $1");

impl Operation for AgeQueue {
    type Output = ();

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> Result<()> {
        let queue = QueueName::parse(self.queue.as_str())?;
        if let Some(every) = self.every
            && !(MIN_AGING_STEP..=MAX_AGING_STEP).contains(&every)
        {
            return Err(Error::invalid(
                "every",
                format!("must be between {MIN_AGING_STEP:?} and {MAX_AGING_STEP:?}, got {every:?}"),
            ));
        }
        if self.every.is_some() && ctx.settings.get(queue.as_str()).keyed {
            return Err(Error::invalid_state(format!(
                "queue {queue} has jobs with concurrency keys, which take turns by priority level; priority aging \
                 makes every job a level of its own, so the two do not go together"
            )));
        }
        let aging = self.every.map(duration_millis);
        ctx.db.execute(SET_AGING, &params![queue.as_str(), aging])?;
        ctx.db.execute(AGE_JOBS, &params![aging, queue.as_str()])?;
        ctx.settings.entry(queue.as_str()).aging_ms = aging;
        let detail = match self.every {
            Some(every) => format!("aging one point per {every:?}"),
            None => "no aging".to_owned(),
        };
        crate::ops::queue_changed(ctx, queue.as_str(), &detail);
        Ok(())
    }
}
