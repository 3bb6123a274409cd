//! The writer's timed work, done at the start of a batch when it is due: rate-limited queues looked at again,
//! promotion of due jobs, lease expiry, recurring runs, retention and housekeeping (the steps are
//! `ops/maintenance.rs`), and undelivered claims given back.

use crate::clock::duration_millis;
use crate::error::Result;
use crate::lease::Lease;
use crate::ops::maintenance;
use crate::ops::release::Release;
use crate::ops::{Operation, WriteCtx, in_savepoint};
use crate::options::Retention;

use super::Writer;

/// The timed work one batch should do.
pub(super) struct TimedWork<'a> {
    /// Whether the rate-limited queues may have tokens again.
    pub(super) refill: bool,
    /// Whether the timed work of the leader is due (always on SQLite).
    pub(super) due: bool,
    pub(super) prune: bool,
    pub(super) retention: Retention,
    pub(super) release: &'a [Lease],
    /// The workers of parked dequeues, seen at each housekeeping pass.
    pub(super) waiting_workers: &'a [String],
}

/// What the timed work did, applied to the writer once the batch commits.
#[derive(Default)]
pub(super) struct TimedUpdates {
    pub(super) next_prune: Option<i64>,
    /// Undelivered claims handed back (or found no longer held), to forget.
    pub(super) unreleased: Vec<Lease>,
}

impl TimedWork<'_> {
    /// Whether there is nothing to do.
    pub(super) fn is_empty(&self) -> bool {
        !(self.refill || self.due || self.prune) && self.release.is_empty()
    }

    pub(super) fn run(&self, ctx: &mut WriteCtx<'_>) -> Result<TimedUpdates> {
        let mut updates = TimedUpdates::default();
        // The next-due time is exact for everything this writer wrote; a tick also covers other writers.
        if self.refill {
            // Their buckets may have refilled (each node counts its own).
            for (queue, _) in ctx.settings.rate_limited() {
                ctx.ready.mark(&queue);
            }
        }
        if self.due {
            maintenance::promote_due(ctx)?;
            let expired = maintenance::expire_leases(ctx)?;
            if expired > 0 {
                tracing::info!(expired, "retried jobs whose lease expired");
            }
            // Last: a template's trouble must not hold up promotion and lease expiry above.
            let created = crate::ops::recurring::create_due_runs(ctx)?;
            if created > 0 {
                tracing::debug!(created, "created jobs for recurring templates");
            }
        }
        if self.prune {
            for worker in self.waiting_workers {
                crate::ops::workers::seen(ctx, worker)?;
            }
            let pruned = maintenance::prune(ctx, &self.retention)?;
            let more = pruned as i64 >= maintenance::STEP_ROWS;
            let interval = duration_millis(self.retention.interval);
            updates.next_prune = Some(if more {
                ctx.now_ms
            } else {
                ctx.now_ms + interval
            });
        }
        for lease in self.release {
            // The caller went away before receiving the job: give it back without counting the attempt. A lease
            // no longer held (expired, cancelled) needs nothing.
            let _ = in_savepoint(ctx, |ctx| Release::new(lease).apply(ctx));
            updates.unreleased.push(lease.clone());
        }
        Ok(updates)
    }
}

impl Writer {
    /// Records what the timed work did, once its transaction committed.
    pub(super) fn apply_timed_updates(&mut self, timed: &TimedUpdates) {
        if let Some(next) = timed.next_prune {
            self.next_prune = next;
        }
        for lease in &timed.unreleased {
            self.to_release.retain(|l| l != lease);
        }
    }
}
