//! The transaction of one batch, and the recipe around it. A batch runs first without savepoints; if an operation
//! fails after writing, the batch is rolled back and run again with a savepoint around each operation (see
//! `isolation`), so one bad request still fails alone. Inside, in order: the timed work that is due, the
//! operations, the new dequeues, the parked dequeues that the batch's ready jobs can serve, and one commit.

use crate::clock::{duration_millis, from_millis};
use crate::error::Result;
use crate::ops::batches;
use crate::ops::bulk::{self, Bulk};
use crate::ops::claim::Claim;
use crate::ops::events::{BatchTotals, EventLog};
use crate::ops::maintenance;
use crate::ops::{ReadyQueues, WriteCtx};
use crate::store::writer_db::{LEAD_RENEWAL, WriterDb};
use std::time::Instant;

use super::Writer;
use super::command::{Batch, Claimed, ErasedOp};
use super::isolation::{Failure, Isolation, apply_isolated};
use super::parked::{claim_all, serve_ready};
use super::timed::{TimedUpdates, TimedWork};

/// The timed work a batch does (see `TimedWork`), and whether this node leads it.
#[derive(Clone, Copy)]
pub(super) struct Timing {
    due: bool,
    prune: bool,
    pass: bool,
    leads: bool,
}

/// What a committed batch decided.
pub(super) struct BatchPlan {
    pub timed: TimedUpdates,
    /// For each new dequeue, in order: the jobs it got (empty: nothing ready).
    pub claims: Vec<Claimed>,
    /// Parked dequeues served: index in the parked list, and what they get.
    pub served: Vec<(usize, Claimed)>,
    /// The next due time as this batch leaves it, read inside its transaction (see `commit`).
    pub next_due: Result<Option<i64>>,
    /// The due time this node, which does not lead, told the leader of.
    pub told_due: Option<i64>,
    /// What the batch did, for the metrics kept in memory.
    pub totals: BatchTotals,
}

impl Writer {
    /// Runs a batch's transaction until it commits or fails for good. After a failure the transaction is rolled
    /// back and the settings in memory loaded again.
    pub(super) fn commit_batch(&mut self, now_ms: i64, batch: &mut Batch) -> Result<BatchPlan> {
        // Decided once: a batch run again (below) does the same timed work.
        let timing = self.timing(now_ms, batch);
        // Operations run without savepoints: most fail (if at all) before writing anything. Only when one fails
        // after writing is the batch rolled back and run again with a savepoint around each operation.
        let mut outcome = self.transaction(now_ms, batch, timing, Isolation::Shared);
        if let Err(Failure::Poisoned) = outcome {
            self.db.roll_back();
            self.db.look_for_due_batches();
            self.reload_settings();
            outcome = self.transaction(now_ms, batch, timing, Isolation::PerOperation);
        }
        if outcome.is_err() {
            self.db.roll_back();
            self.db.look_for_due_batches();
            // Rolled back: what the batch did to the settings in memory did not happen.
            self.reload_settings();
        }
        match outcome {
            Ok(plan) => Ok(plan),
            Err(Failure::Storage(e)) => Err(e),
            Err(Failure::Poisoned) => unreachable!("per-operation isolation never poisons a batch"),
        }
    }

    /// What timed work a batch does, and whether this node leads it. The lead is asked for (or renewed) first, when
    /// that is due, in a transaction of its own: the row it locks is held only for that moment.
    fn timing(&mut self, now_ms: i64, batch: &Batch) -> Timing {
        let now = Instant::now();
        // After the timed work failed, none of it runs before the backoff is over.
        let backoff = self.timed_backoff.is_some_and(|until| now < until);
        let held = self.lead.holds();
        let lead = self.lead.renew(&mut self.db);
        if lead.leads != held {
            // What it told the leader, or was told as one, is another lead's.
            self.told_due = None;
        }
        // The renewal's pass is for due times written elsewhere, which come by the real clock; a manual clock (the
        // tests') moves only when told, and a pass at each renewal would change what the tests look at.
        let real_clock = self.clock.real_time_until(from_millis(now_ms)).is_some();
        let due = !backoff
            && (batch.tick
                || batch.timer
                || self.next_due.is_some_and(|due| due <= now_ms)
                || (lead.renewed && real_clock)
                || lead.gained);
        // Prune: retention and housekeeping (workers lost, old activity and statistics) run every interval, and
        // while a backlog drains, a step whenever the last one's pause is over.
        let pass = !backoff && now_ms >= self.next_prune;
        let prune = pass || (!backoff && self.drain.is_due(now));
        Timing {
            due,
            prune,
            pass,
            leads: lead.leads,
        }
    }

    /// The transaction of one batch: timed work, the operations, the new dequeues, then the parked dequeues.
    /// What it decided about jobs and waiters is returned, and applied once committed; of `self` it changes only the
    /// connection and the settings in memory (which a rollback reloads).
    fn transaction(
        &mut self,
        now_ms: i64,
        batch: &mut Batch,
        timing: Timing,
        isolation: Isolation,
    ) -> std::result::Result<BatchPlan, Failure> {
        let node = self.db.node().map(str::to_owned);
        let durable = batch.ops.iter().any(|op| op.is_durable());
        let Timing {
            due,
            prune,
            pass,
            leads,
        } = timing;
        let db = self.db.begin_batch(durable).map_err(Failure::Storage)?;
        let retention = self.settings.config.retention;
        let mut ready = ReadyQueues::default();
        let mut events = EventLog::default();
        let mut ctx = WriteCtx {
            db,
            now_ms,
            ready: &mut ready,
            tokens: &mut self.tokens,
            rotation: &mut self.rotation,
            settings: &mut self.settings,
            events: &mut events,
        };
        let timed = TimedWork {
            due,
            prune,
            pass,
            leads,
            retention,
            progress: self.drain.progress(),
            step_jobs: self.drain.step_jobs(),
            release: &self.to_release,
            parked: &self.parked,
        }
        .run_in(&mut ctx);

        apply_ops(&mut ctx, &mut batch.ops, isolation)?;
        let new_claims: Vec<&Claim> = batch.dequeues.iter().map(|waiter| &waiter.claim).collect();
        let claims = claim_all(&mut ctx, &new_claims, isolation, false)?;
        // Batches that ended here get their callbacks in this commit, before the parked dequeues are served (they
        // may take them) and the other nodes are told of ready queues.
        batches::make_due_callbacks(&mut ctx, pass).map_err(Failure::Storage)?;

        // Queues that gained ready jobs here are told to the other nodes (on PostgreSQL); those another node told
        // about are not told back.
        let ready_here: Vec<String> = match node {
            Some(_) => ctx.ready.iter().map(str::to_owned).collect(),
            None => Vec::new(),
        };
        let served = serve_ready(&mut ctx, &self.parked, batch, isolation)?;
        let wrote = !batch.ops.is_empty() || !batch.dequeues.is_empty() || !served.is_empty();
        let due = NextDue::of(leads, wrote && node.is_some(), self.told_due);
        let (due, totals) = commit(ctx, node.as_deref(), &ready_here, due)?;
        Ok(BatchPlan {
            timed,
            claims,
            served,
            next_due: due.next,
            told_due: due.told,
            totals,
        })
    }
}

/// Applies a batch's operations under `isolation`, in order, but for those the bulk path answered first.
fn apply_ops(
    ctx: &mut WriteCtx<'_>,
    ops: &mut [Box<dyn ErasedOp>],
    isolation: Isolation,
) -> std::result::Result<(), Failure> {
    // Pushes and finishes go together where every statement is a round trip (`statements_are_round_trips`).
    let answered =
        if isolation == Isolation::Shared && ctx.db.capabilities().statements_are_round_trips {
            apply_bulk(ctx, ops)?
        } else {
            vec![false; ops.len()]
        };
    for (op, _) in ops
        .iter_mut()
        .zip(&answered)
        .filter(|(_, answered)| !**answered)
    {
        apply_isolated(ctx, op.as_mut(), isolation)?;
    }
    Ok(())
}

/// On PostgreSQL, the plain pushes and finishes first, several to a statement (`ops/bulk.rs`). A failed
/// statement there aborts the transaction: the batch runs again, one operation at a time. Returns, for each
/// operation, whether it was answered here.
fn apply_bulk(
    ctx: &mut WriteCtx<'_>,
    ops: &mut [Box<dyn ErasedOp>],
) -> std::result::Result<Vec<bool>, Failure> {
    let mut answered = vec![false; ops.len()];
    let candidates: Vec<(usize, Bulk<'_>)> = ops
        .iter_mut()
        .enumerate()
        .filter_map(|(index, op)| op.bulk().map(|bulk| (index, bulk)))
        .collect();
    if candidates.len() > 1 {
        match bulk::apply(ctx, candidates) {
            Ok(indices) => {
                for index in indices {
                    answered[index] = true;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "a batch's bulk statements failed; running it one operation at a time");
                return Err(Failure::Poisoned);
            }
        }
    }
    Ok(answered)
}

/// Who reads the next due time before a batch commits.
#[derive(Clone, Copy)]
enum NextDue {
    /// The leader of the timed work, to wake for it.
    Leader,
    /// A node that does not lead and wrote something: it tells the leader of a due time sooner than the last it told
    /// (`told`), or of a new one once that has passed.
    Follower { told: Option<i64> },
    /// Nobody: a node that does not lead and wrote nothing.
    Nobody,
}

impl NextDue {
    /// What a batch that may have written, on a node that may lead, reads.
    fn of(leads: bool, wrote: bool, told: Option<i64>) -> NextDue {
        match (leads, wrote) {
            (true, _) => NextDue::Leader,
            (false, true) => NextDue::Follower { told },
            (false, false) => NextDue::Nobody,
        }
    }
}

/// What `commit` read and told of the next due time.
struct DueRead {
    /// The next due time, for the leader to wake for.
    next: Result<Option<i64>>,
    /// The time a follower told the leader of, if it told one.
    told: Option<i64>,
}

/// Whether a follower that last told the leader of `told` should tell it of `next`, at `now_ms`: a new time sooner
/// than the last, or any new one once the last has passed (the leader has done that work); and only one that comes
/// before the leader's next renewal could, since at each it reads the next due time itself.
fn should_tell(told: Option<i64>, next: i64, now_ms: i64) -> bool {
    let soon = next < now_ms.saturating_add(duration_millis(LEAD_RENEWAL));
    soon && match told {
        None => true,
        Some(told) => next != told && (next < told || told <= now_ms),
    }
}

/// Ends a batch's transaction: reads the next due time (the leader, to wake for it; another node that wrote, to tell
/// the leader of it), writes the activity and statistics the batch recorded, tells the other nodes (on PostgreSQL,
/// where `node` is this one) the queues made ready here, whether settings changed and the due time, and commits.
/// Returns the due time read and told, and what the batch did.
fn commit(
    ctx: WriteCtx<'_>,
    node: Option<&str>,
    ready_here: &[String],
    due: NextDue,
) -> std::result::Result<(DueRead, BatchTotals), Failure> {
    // Read before the commit, under the write lock: after it, each of these reads would be a transaction of
    // its own, with its own round of WAL lock calls.
    let read = match due {
        NextDue::Leader => DueRead {
            next: maintenance::next_due(&ctx.db),
            told: None,
        },
        NextDue::Follower { told } => {
            let next = maintenance::next_due(&ctx.db).map_err(Failure::Storage)?;
            DueRead {
                next: Ok(None),
                told: next.filter(|&next| should_tell(told, next, ctx.now_ms)),
            }
        }
        NextDue::Nobody => DueRead {
            next: Ok(None),
            told: None,
        },
    };
    let totals = ctx
        .events
        .flush(&ctx.db, node, &ctx.settings.config.limits.name_families)
        .map_err(Failure::Storage)?;
    if let Some(node) = node {
        let changed = std::mem::take(&mut ctx.settings.changed);
        WriterDb::notify(
            node,
            &ctx.db,
            ready_here.iter().map(String::as_str),
            changed,
            read.told,
        )
        .map_err(Failure::Storage)?;
    }
    ctx.settings.changed = false;
    let db = ctx.db;
    db.commit().map_err(Failure::Storage)?;
    Ok((read, totals))
}

#[cfg(test)]
mod tests {
    use super::should_tell;

    #[test]
    fn a_follower_tells_the_leader_of_sooner_times_and_of_the_next_once_the_last_passed() {
        assert!(should_tell(None, 1_500, 1_000), "the first");
        assert!(should_tell(Some(1_500), 1_200, 1_000), "sooner");
        assert!(!should_tell(Some(1_500), 1_500, 1_000), "the same");
        assert!(
            !should_tell(Some(1_500), 1_700, 1_000),
            "later: the leader wakes sooner anyway"
        );
        assert!(should_tell(Some(1_500), 1_700, 1_500), "the last passed");
        assert!(
            !should_tell(Some(1_500), 1_500, 1_700),
            "passed, and not done yet: told already"
        );
        assert!(
            !should_tell(None, 2_000, 1_000),
            "a second or more ahead: the leader reads it at its next renewal"
        );
    }
}
