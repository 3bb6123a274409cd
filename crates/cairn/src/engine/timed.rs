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
    /// Whether retention and housekeeping are due: a pass (once per interval) or a drain's next step.
    pub prune: bool,
    /// Whether it is the interval's pass, which looks at every kind of row (see `maintenance::prune`).
    pub pass: bool,
    /// Whether this node leads the timed work (always on SQLite).
    pub leads: bool,
    pub retention: Retention,
    /// Where a drain of finished jobs has got to, and how many jobs its next step deletes.
    pub progress: maintenance::PruneProgress,
    pub step_jobs: i64,
    pub release: &'a [Lease],
    /// The parked dequeues, whose workers are seen at each housekeeping pass.
    pub parked: &'a VecDeque<Waiter>,
}

/// What the timed work did, applied to the writer once the batch commits.
#[derive(Default)]
pub(super) struct TimedUpdates {
    next_prune: Option<i64>,
    /// What a step of retention did, when one ran.
    step: Option<Step>,
    /// Whether this node stopped leading the timed work, so that a drain it had under way ends here.
    lost_lead: bool,
    /// Whether retention's pass ran (or another node's lead made it not this node's to run).
    passed: bool,
    /// Whether the timed work ran, and whether it failed.
    ran: bool,
    failed: bool,
    /// Undelivered claims handed back (or found no longer held), to forget.
    unreleased: Vec<Lease>,
}

impl TimedWork<'_> {
    /// Whether there is nothing to do.
    fn is_empty(&self) -> bool {
        !(self.due || (self.prune && self.leads)) && self.release.is_empty()
    }

    /// Runs the work in the batch's transaction, in a savepoint of its own: if it fails, the failure is logged and
    /// the work tried again after [`TIMED_BACKOFF`]; the batch's requests do not fail for it.
    pub(super) fn run_in(&self, ctx: &mut WriteCtx<'_>) -> TimedUpdates {
        let mut timed = if self.is_empty() {
            TimedUpdates::default()
        } else {
            match in_savepoint(ctx, |ctx| self.run(ctx)) {
                Ok(updates) => TimedUpdates {
                    ran: true,
                    ..updates
                },
                Err(e) => {
                    tracing::error!(error = %e, "timed maintenance failed; it is tried again in a second");
                    TimedUpdates {
                        failed: true,
                        ..TimedUpdates::default()
                    }
                }
            }
        };
        if self.prune && !self.leads {
            // The leader prunes. This node asks for the lead again in a while, not with every batch: a housekeeping
            // pass that stayed due would wake the writer at once, over and over.
            timed.next_prune = Some(ctx.now_ms + duration_millis(LEAD_RENEWAL));
            timed.lost_lead = true;
            timed.passed = self.pass;
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
            if self.pass {
                for worker in &waiting_workers(self.parked) {
                    crate::ops::workers::seen(ctx, worker)?;
                }
            }
            let started = Instant::now();
            let pruned = maintenance::prune(
                ctx,
                &self.retention,
                self.pass,
                self.progress,
                self.step_jobs,
            )?;
            let took = started.elapsed();
            if pruned.rows > 0 {
                tracing::debug!(
                    rows = pruned.rows,
                    jobs = pruned.jobs,
                    more = pruned.more,
                    took_ms = took.as_secs_f64() * 1000.0,
                    "retention deleted old rows"
                );
            }
            // The next pass comes after the interval; while there is more to delete, steps come sooner (`Drain`).
            if self.pass {
                updates.next_prune = Some(ctx.now_ms + duration_millis(self.retention.interval));
                updates.passed = true;
            }
            updates.step = Some(Step {
                progress: pruned.progress,
                more: pruned.more,
                took,
                deleting: pruned.deleting,
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

/// After the timed work failed, how long before it is tried again: not in every batch, which would hold each one
/// up for as long as the failure takes (a statement timeout is seconds).
const TIMED_BACKOFF: Duration = Duration::from_secs(1);

/// The most one step of retention should take: it runs inside a batch of the writer's, and every enqueue, claim
/// and finish of that batch waits for it. The writer sizes its steps to it.
const STEP_BUDGET: Duration = Duration::from_millis(5);

/// While a backlog drains, the writer serves requests for this many times as long as a step took before it takes
/// the next: retention has at most a quarter of the writer's time, and the queue's work the rest.
const DRAIN_PAUSE_FACTOR: u32 = 3;

/// The bounds of that pause: at least a millisecond, so that a batch of requests fits between steps; at most a
/// second, so that a slow step does not hold the drain up for long.
const MIN_DRAIN_PAUSE: Duration = Duration::from_millis(1);
const MAX_DRAIN_PAUSE: Duration = Duration::from_secs(1);

/// What one step of retention did.
pub(super) struct Step {
    progress: maintenance::PruneProgress,
    more: bool,
    /// The whole step, which the pause after it is measured by.
    took: Duration,
    /// Its deletes of finished jobs, which the next step's size is measured by (a pass also finds the count's
    /// cutoff, a walk as long as the count, whatever the step's size).
    deleting: Duration,
}

/// Retention's drain of a backlog (more finished jobs, activity or statistics past retention than one step
/// deletes): where it has got to, how big its next step is, and when that step may run. Steps are paced by the
/// real clock, whatever the queue's clock says.
#[derive(Debug)]
pub(crate) struct Drain {
    progress: maintenance::PruneProgress,
    /// Finished jobs the next step deletes at most, sized to [`STEP_BUDGET`]; kept from one drain to the next.
    step_jobs: i64,
    /// When the next step may run, while a drain goes on.
    resume_at: Option<Instant>,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            progress: maintenance::PruneProgress::default(),
            step_jobs: maintenance::MAX_PRUNE_STEP_JOBS / 2,
            resume_at: None,
        }
    }
}

impl Drain {
    /// Whether a drain's next step may run now.
    pub(super) fn is_due(&self, now: Instant) -> bool {
        self.resume_at.is_some_and(|at| at <= now)
    }

    /// When the next step may run, while a drain goes on.
    pub(super) fn resume_at(&self) -> Option<Instant> {
        self.resume_at
    }

    pub(super) fn progress(&self) -> maintenance::PruneProgress {
        self.progress
    }

    pub(super) fn step_jobs(&self) -> i64 {
        self.step_jobs
    }

    /// Records a step: the next is smaller if its deletes went over the budget, bigger if they took less than
    /// half, and it waits [`DRAIN_PAUSE_FACTOR`] times as long as this whole step took.
    fn after(&mut self, step: &Step) {
        if step.deleting > STEP_BUDGET {
            self.step_jobs = (self.step_jobs / 2).max(maintenance::MIN_PRUNE_STEP_JOBS);
        } else if step.deleting < STEP_BUDGET / 2 {
            self.step_jobs = (self.step_jobs * 3 / 2).min(maintenance::MAX_PRUNE_STEP_JOBS);
        }
        self.progress = step.progress;
        self.resume_at = step.more.then(|| {
            Instant::now()
                + (step.took * DRAIN_PAUSE_FACTOR).clamp(MIN_DRAIN_PAUSE, MAX_DRAIN_PAUSE)
        });
    }

    /// Ends a drain under way (this node no longer leads the timed work).
    fn stop(&mut self) {
        self.progress = maintenance::PruneProgress::default();
        self.resume_at = None;
    }
}

/// How long before the end of its term, by its own count, a leader that could not renew stops: room for the
/// database's clock and this one's to disagree a little.
const TERM_MARGIN: Duration = Duration::from_secs(1);

/// Whether this writer leads the timed work.
pub(crate) enum Lead {
    /// On SQLite: the one process that has the file always does.
    Always,
    /// On PostgreSQL: the node asks for the lead, or renews it, once per [`LEAD_RENEWAL`] by the real clock,
    /// however busy it is, and leads until the end of the term it last won.
    Elected {
        /// The end of the term it last won, counted from before it asked (`None`: it holds none).
        until: Option<Instant>,
        /// When it last asked, whatever the answer (`None`: never yet).
        asked: Option<Instant>,
    },
}

impl Lead {
    /// A PostgreSQL node's lead, before it first asks.
    pub(crate) fn elected() -> Lead {
        Lead::Elected {
            until: None,
            asked: None,
        }
    }

    /// Whether this writer leads now.
    pub(super) fn holds(&self) -> bool {
        match self {
            Lead::Always => true,
            Lead::Elected { until, .. } => until.is_some_and(|until| Instant::now() < until),
        }
    }

    /// When it is time to ask for the lead, or to renew it: [`LEAD_RENEWAL`] after the last ask, answered or not.
    /// The writer wakes for it, and a batch that runs at or after it asks first. Counted from the last ask, not
    /// from each batch: a busy node's batches would postpone it with every one, its term would lapse, and due
    /// times would pass unseen for as long as the traffic lasted.
    pub(super) fn next_ask(&self) -> Option<Instant> {
        match self {
            Lead::Always => None,
            Lead::Elected { asked: None, .. } => Some(Instant::now()),
            Lead::Elected {
                asked: Some(asked), ..
            } => Some(*asked + LEAD_RENEWAL),
        }
    }

    /// Whether it is time to ask for the lead, or to renew it.
    fn should_ask(&self, now: Instant) -> bool {
        match self {
            Lead::Always => false,
            Lead::Elected { asked: None, .. } => true,
            Lead::Elected {
                asked: Some(asked), ..
            } => *asked + LEAD_RENEWAL <= now,
        }
    }

    /// Asks the database for the lead, or renews it, if it is time (a node that cannot reach the database asks
    /// again a [`LEAD_RENEWAL`] later, not at every batch); returns the lead as the batch about to run has it.
    /// A node that cannot reach the database keeps what it holds until its own count of the term runs out, and no
    /// further.
    pub(super) fn renew(&mut self, db: &mut WriterDb) -> BatchLead {
        let now = Instant::now();
        let held = self.holds();
        if !self.should_ask(now) {
            return BatchLead {
                leads: held,
                renewed: false,
                gained: false,
            };
        }
        let Lead::Elected { until, asked } = self else {
            unreachable!("a lead that is always held never asks")
        };
        *asked = Some(now);
        match db.elect() {
            Ok(won) => {
                *until = won.then(|| now + LEADER_TERM - TERM_MARGIN);
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
                tracing::warn!(error = %e, "could not ask for the lead of the timed work; asking again in a second");
                if held && !self.holds() {
                    tracing::warn!(
                        node = db.node(),
                        "this node stopped the timed work: its term ran out"
                    );
                }
            }
        }
        let leads = self.holds();
        BatchLead {
            leads,
            renewed: leads,
            gained: leads && !held,
        }
    }
}

/// The lead of the timed work as one batch has it.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchLead {
    /// Whether this node leads for the batch.
    pub leads: bool,
    /// Whether it renewed its term just now: the leader then does the timed work, whatever it knows of the next
    /// due time, once per [`LEAD_RENEWAL`], which bounds how late a due time it was not told of can be.
    pub renewed: bool,
    /// Whether it won the lead just now: it knows no due time yet, so it does the timed work at once.
    pub gained: bool,
}

/// Retention's pass comes early once this share of `max_count` jobs has ended since the last one...
const EARLY_PASS_SHARE: u64 = 4;
/// ...and at least this many: a small count is kept well enough by the interval.
const EARLY_PASS_MIN: u64 = 1000;

impl Writer {
    /// Counts the jobs a batch ended; once a quarter of the retention count have ended since the last pass, the
    /// next pass is due at once rather than at the end of the interval. Otherwise, at thousands of jobs a second,
    /// hundreds of thousands more finished jobs than the count would pile up between passes (600,000 over the
    /// default minute at 10,000 jobs/s), and the tables with them; throughput on PostgreSQL fell by a third.
    pub(super) fn count_ended(&mut self, ended: u64, now_ms: i64) {
        self.ended_since_pass += ended;
        if let Some(keep) = self.settings.config.retention.max_count
            && self.ended_since_pass >= (keep / EARLY_PASS_SHARE).max(EARLY_PASS_MIN)
        {
            self.next_prune = self.next_prune.min(now_ms);
        }
    }

    /// Another node wrote something due at `at` (PostgreSQL): the leader wakes for it. Another node has no use for
    /// it; should it win the lead, it does the timed work at once and reads the next due time.
    pub(super) fn note_due(&mut self, at: i64) {
        if self.lead.holds() {
            self.next_due = Some(self.next_due.map_or(at, |next| next.min(at)));
        }
    }

    /// Records what the timed work did, once its transaction committed.
    pub(super) fn apply_timed_updates(&mut self, timed: &TimedUpdates, now_ms: i64) {
        if let Some(next) = timed.next_prune {
            self.next_prune = next;
        }
        if let Some(step) = &timed.step {
            self.drain.after(step);
        }
        if timed.passed {
            self.ended_since_pass = 0;
        }
        if timed.failed {
            self.timed_backoff = Some(Instant::now() + TIMED_BACKOFF);
        } else if timed.ran {
            self.timed_backoff = None;
        }
        if timed.lost_lead {
            self.drain.stop();
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
        // A node that does not lead leaves the timed work to the leader (it wakes to ask for the lead, when that
        // is due, by `Lead::next_ask`).
        let next_due = match next_due {
            Ok(_) if !self.lead.holds() => Ok(None),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn step(took_ms: u64, more: bool) -> Step {
        Step {
            progress: maintenance::PruneProgress::default(),
            more,
            took: Duration::from_millis(took_ms),
            deleting: Duration::from_millis(took_ms),
        }
    }

    #[test]
    fn a_drain_sizes_its_steps_to_the_budget_and_leaves_the_writer_three_times_as_long() {
        let mut drain = Drain::default();
        assert_eq!(drain.resume_at(), None, "no drain before a step");
        let start = drain.step_jobs();

        let before = Instant::now();
        drain.after(&step(20, true));
        assert_eq!(drain.step_jobs(), start / 2, "over the budget: halved");
        let pause = drain.resume_at().unwrap() - before;
        assert!(
            pause >= Duration::from_millis(60) && pause < Duration::from_millis(600),
            "{pause:?}"
        );
        assert!(!drain.is_due(before), "the writer serves requests first");
        assert!(drain.is_due(before + Duration::from_secs(1)));

        drain.after(&step(1, true));
        assert_eq!(drain.step_jobs(), start / 2 * 3 / 2, "well under: grown");
        for _ in 0..20 {
            drain.after(&step(1, true));
        }
        assert_eq!(drain.step_jobs(), maintenance::MAX_PRUNE_STEP_JOBS);
        for _ in 0..20 {
            drain.after(&step(50, true));
        }
        assert_eq!(drain.step_jobs(), maintenance::MIN_PRUNE_STEP_JOBS);
        let before = Instant::now();
        drain.after(&step(5_000, true));
        assert!(
            drain.resume_at().unwrap() - before <= MAX_DRAIN_PAUSE + Duration::from_millis(100),
            "a slow step holds the drain up a second at most"
        );

        drain.after(&step(1, false));
        assert_eq!(drain.resume_at(), None, "nothing left: the drain is over");
    }

    #[test]
    fn a_step_is_sized_by_its_deletes_and_paced_by_its_whole_length() {
        let mut drain = Drain::default();
        let start = drain.step_jobs();
        let before = Instant::now();
        // A pass: a long walk to find the count's cutoff, quick deletes.
        drain.after(&Step {
            progress: maintenance::PruneProgress::default(),
            more: true,
            took: Duration::from_millis(40),
            deleting: Duration::from_millis(1),
        });
        assert!(
            drain.step_jobs() > start,
            "the deletes were well under budget"
        );
        assert!(drain.resume_at().unwrap() - before >= Duration::from_millis(120));
    }

    #[test]
    fn a_node_that_loses_the_lead_ends_its_drain() {
        let mut drain = Drain::default();
        drain.after(&step(1, true));
        assert!(drain.resume_at().is_some());
        drain.stop();
        assert_eq!(drain.resume_at(), None);
    }
}
