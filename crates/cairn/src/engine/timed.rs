//! The writer's timed work, done at the start of a batch when it is due: rate-limited queues looked at again,
//! promotion of due jobs, lease expiry, recurring runs, retention and housekeeping (the steps are
//! `ops/maintenance.rs`), and undelivered claims given back. On PostgreSQL one node at a time leads that work, for
//! a term it renews (`store/postgres/leader.rs`); the others only look at their rate-limited queues. Also when the
//! writer wakes next for it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::clock::duration_millis;
use crate::error::Result;
use crate::lease::Lease;
use crate::ops::maintenance;
use crate::ops::release::Release;
use crate::ops::{Operation, WriteCtx, in_savepoint};
use crate::options::Retention;
use crate::store::writer_db::{LEAD_RENEWAL, LEADER_TERM, WriterDb};

use super::Writer;
use super::command::Waiter;

/// The timed work one batch should do.
pub(super) struct TimedWork<'a> {
    /// Whether the timed work is due (a tick, a timer, or the next due time passed): the rate-limited queues may
    /// have tokens again, and the leader's work is due.
    pub due: bool,
    /// Whether retention and housekeeping are due.
    pub prune: bool,
    /// Whether this node leads the timed work (always on SQLite).
    pub leads: bool,
    pub retention: Retention,
    /// The count's cutoff, while a drain of finished jobs past it goes on (see `maintenance::prune`).
    pub count_cutoff: Option<maintenance::CountCutoff>,
    pub release: &'a [Lease],
    /// The parked dequeues, whose workers are seen at each housekeeping pass.
    pub parked: &'a VecDeque<Waiter>,
}

/// What the timed work did, applied to the writer once the batch commits.
#[derive(Default)]
pub(super) struct TimedUpdates {
    next_prune: Option<i64>,
    /// The count's cutoff for the next step, when a pass ran (`Some(None)`: the drain is over).
    count_cutoff: Option<Option<maintenance::CountCutoff>>,
    /// Undelivered claims handed back (or found no longer held), to forget.
    unreleased: Vec<Lease>,
}

impl TimedWork<'_> {
    /// Whether there is nothing to do.
    fn is_empty(&self) -> bool {
        !(self.due || (self.prune && self.leads)) && self.release.is_empty()
    }

    /// Runs the work in the batch's transaction, in a savepoint of its own: if it fails, the failure is logged and
    /// the work tried again with the next batch, whose requests do not fail for it.
    pub(super) fn run_in(&self, ctx: &mut WriteCtx<'_>) -> TimedUpdates {
        let mut timed = if self.is_empty() {
            TimedUpdates::default()
        } else {
            match in_savepoint(ctx, |ctx| self.run(ctx)) {
                Ok(updates) => updates,
                Err(e) => {
                    tracing::error!(error = %e, "timed maintenance failed; it is retried with the next batch");
                    TimedUpdates::default()
                }
            }
        };
        if self.prune && !self.leads {
            // The leader prunes. This node asks for the lead again in a while, not with every batch: a housekeeping
            // pass that stayed due would wake the writer at once, over and over.
            timed.next_prune = Some(ctx.now_ms + duration_millis(LEAD_RENEWAL));
        }
        timed
    }

    fn run(&self, ctx: &mut WriteCtx<'_>) -> Result<TimedUpdates> {
        let mut updates = TimedUpdates::default();
        // The next-due time is exact for everything this writer wrote; a tick also covers other writers.
        if self.due {
            // Their buckets may have refilled (each node counts its own).
            for (queue, _) in ctx.settings.rate_limited() {
                ctx.ready.mark(&queue);
            }
        }
        if self.due && self.leads {
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
        if self.prune && self.leads {
            for worker in &waiting_workers(self.parked) {
                crate::ops::workers::seen(ctx, worker)?;
            }
            let pruned = maintenance::prune(ctx, &self.retention, self.count_cutoff)?;
            updates.count_cutoff = Some(pruned.count_cutoff);
            if pruned.rows > 0 {
                tracing::debug!(
                    rows = pruned.rows,
                    more = pruned.more,
                    "retention deleted old rows"
                );
            }
            let more = pruned.more;
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

/// The workers of the parked dequeues, each once: a worker waiting in a long poll is there, though it sends
/// nothing, so housekeeping counts it seen.
fn waiting_workers(parked: &VecDeque<Waiter>) -> Vec<String> {
    let mut waiting_workers: Vec<String> = Vec::new();
    for waiter in parked {
        let worker = waiter.claim.worker.as_str();
        if !waiting_workers.iter().any(|w| w == worker) {
            waiting_workers.push(worker.to_owned());
        }
    }
    waiting_workers
}

/// How long before the end of its term, by its own count, a leader that could not renew stops: room for the
/// database's clock and this one's to disagree a little.
const TERM_MARGIN: Duration = Duration::from_secs(1);

/// Whether this writer leads the timed work.
pub(crate) enum Lead {
    /// On SQLite: the one process that has the file always does.
    Always,
    /// On PostgreSQL: until the end of the term it last won, counted from before it asked (`None`: it holds none).
    Until(Option<Instant>),
}

impl Lead {
    /// Whether this writer leads now.
    pub(super) fn holds(&self) -> bool {
        match self {
            Lead::Always => true,
            Lead::Until(until) => until.is_some_and(|until| Instant::now() < until),
        }
    }

    /// Whether it is time to ask for the lead, or to renew it: once per [`LEAD_RENEWAL`].
    fn should_ask(&self) -> bool {
        match self {
            Lead::Always => false,
            Lead::Until(None) => true,
            Lead::Until(Some(until)) => {
                until.saturating_duration_since(Instant::now()) + LEAD_RENEWAL
                    <= LEADER_TERM - TERM_MARGIN
            }
        }
    }

    /// Whether the writer should wake at least every [`LEAD_RENEWAL`] to ask: on PostgreSQL.
    pub(super) fn is_elected(&self) -> bool {
        matches!(self, Lead::Until(_))
    }

    /// Asks the database for the lead, or renews it, if it is time: whether this writer leads now. A node that
    /// cannot reach the database keeps what it holds until its own count of the term runs out, and no further.
    pub(super) fn renew(&mut self, db: &mut WriterDb) -> bool {
        if !self.should_ask() {
            return self.holds();
        }
        let asked_at = Instant::now();
        let held = self.holds();
        match db.elect() {
            Ok(won) => {
                *self = Lead::Until(won.then(|| asked_at + LEADER_TERM - TERM_MARGIN));
                match (held, won) {
                    (false, true) => {
                        tracing::info!(node = db.node(), "this node now does the timed work")
                    }
                    (true, false) => {
                        tracing::warn!(node = db.node(), "another node took over the timed work")
                    }
                    _ => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not ask for the lead of the timed work");
                if held && !self.holds() {
                    tracing::warn!(
                        node = db.node(),
                        "this node stopped the timed work: its term ran out"
                    );
                }
            }
        }
        self.holds()
    }
}

impl Writer {
    /// Records what the timed work did, once its transaction committed.
    pub(super) fn apply_timed_updates(&mut self, timed: &TimedUpdates, now_ms: i64) {
        if let Some(next) = timed.next_prune {
            self.next_prune = next;
        }
        if let Some(cutoff) = timed.count_cutoff {
            self.count_cutoff = cutoff;
        }
        for lease in &timed.unreleased {
            self.to_release.retain(|l| l != lease);
        }
        // A shorter retention interval set at run time counts from now, not from the next pass.
        let interval = duration_millis(self.settings.config.retention.interval);
        self.next_prune = self.next_prune.min(now_ms.saturating_add(interval));
    }

    /// Sets when the writer wakes next for timed work: the next due time the batch read in its transaction (read
    /// now if it did not commit) or a rate-limited queue's next token, whichever comes first.
    pub(super) fn schedule_next(&mut self, next_due: Option<Result<Option<i64>>>, now_ms: i64) {
        let next_due = match next_due {
            Some(next_due) => next_due,
            None => self.db.run(maintenance::next_due),
        };
        // A rate-limited queue that refused a claim has a token again then: waiting workers look again.
        let next_token = self.settings.buckets.next_token_at.take();
        // A node that does not lead leaves the timed work to the leader, and asks for the lead again in a while; a
        // leader elected for a term wakes to renew it.
        let renewal = now_ms + duration_millis(LEAD_RENEWAL);
        let next_due = match next_due {
            Ok(_) if !self.lead.holds() => Ok(Some(renewal)),
            Ok(next) if self.lead.is_elected() => {
                Ok(Some(next.map_or(renewal, |n| n.min(renewal))))
            }
            other => other,
        };
        match next_due {
            Ok(next) => self.next_due = [next, next_token].into_iter().flatten().min(),
            Err(e) => {
                tracing::error!(error = %e, "could not read the next due time; looking again in a second");
                self.next_due = Some(now_ms + 1000);
            }
        }
    }
}
