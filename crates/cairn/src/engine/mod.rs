//! The writer thread: the only connection that writes. It takes whatever commands are waiting and runs them in one
//! transaction (group commit: one fsync, made by the syncer, for the lot). Operations run without savepoints; if one
//! fails after writing, the batch is rolled back and run again with a savepoint around each, so one bad request
//! still fails alone. Replies go out once the transaction has committed (and, for durable operations, once it is
//! synced; claims and heartbeats never wait for the sync).
//!
//! It also owns the workers that wait for jobs ("parked" dequeues). When a batch makes jobs ready in a queue, the
//! writer claims them for the parked dequeues in that same transaction, so a waiting worker gets its job with the
//! commit that created it: no polling, no second round trip. Before each batch it does the timed work of
//! `maintenance`, and between batches it sleeps until the next command, the next due time (a scheduled job, an
//! expiring lease, retention) or the next dequeue deadline, whichever comes first.

use std::collections::VecDeque;
use std::sync::mpsc::Sender;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::clock::{Clock, duration_millis, from_millis, to_millis};
use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::ops::bulk::{self, Bulk};
use crate::ops::claim::Claim;
use crate::ops::events::{BatchTotals, EventLog};
use crate::ops::maintenance;
use crate::ops::queues::SettingsCache;
use crate::ops::release::Release;
use crate::ops::{
    Operation, ReadyQueues, TokenSource, WriteCtx, end_savepoint, in_savepoint, savepoint,
};
use crate::store::sqlite::syncer::Syncer;
use crate::store::writer_db::{LEADER_RETRY, WriterDb, take_lead};

mod command;
mod isolation;
mod parked;
mod timed;

use command::Claimed;
pub(crate) use command::{Command, ErasedOp, Pending, Waiter};
use isolation::{Failure, Isolation, check_transaction_alive};
use parked::{claim_all, serve_parked};
use timed::{TimedUpdates, TimedWork};

/// Everything the writer thread owns.
pub(crate) struct Writer {
    pub db: WriterDb,
    pub clock: Arc<dyn Clock>,
    pub rx: Receiver<Command>,
    pub max_batch: usize,
    pub parked: VecDeque<Waiter>,
    pub tokens: TokenSource,
    pub rotation: usize,
    /// The queues' settings, in memory (see [`SettingsCache`]); loaded again after a transaction rolls back.
    pub settings: SettingsCache,
    /// Makes durable batches durable before their replies go out; `None` with [`Durability::Normal`](crate::Durability::Normal).
    pub syncer: Option<Syncer>,
    /// Claims the syncer could not deliver, handed back to the writer.
    pub returned: Arc<Mutex<Vec<Lease>>>,
    /// A sender to the writer's own channel, so the syncer can wake it to give back undelivered claims.
    pub wake: Sender<Command>,
    /// The earliest scheduled run_at or lease expiry (ms), if any.
    pub next_due: Option<i64>,
    /// When retention pruning runs next (ms).
    pub next_prune: i64,
    /// When the last batch ran (ms, by the queue's clock).
    pub last_batch_at: i64,
    /// The counters and histograms kept in memory, added to after each commit.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Claims nobody received, to give back in the next batch.
    pub to_release: Vec<Lease>,
    /// The session of the writer's in which it took the lead of the timed work (see [`take_lead`]): always
    /// `Some(0)` on SQLite; on PostgreSQL, it leads while that session is the current one.
    pub leads: Option<u64>,
    /// Held while the writer runs: while it is locked, no other process opens the SQLite file as a queue.
    pub _lock: Option<std::fs::File>,
}

impl Writer {
    /// Runs until closed, or until every sender is gone.
    pub fn run(mut self) {
        loop {
            let Some(first) = self.next_command() else {
                break;
            };
            let mut batch = vec![first];
            while batch.len() < self.max_batch {
                match self.rx.try_recv() {
                    Ok(command) => batch.push(command),
                    Err(_) => break,
                }
            }
            if let Some(ack) = self.run_batch(batch) {
                self.stop();
                let _ = ack.send(());
                return;
            }
        }
        self.stop();
    }

    /// Waits for the next command, or makes a timer when something timed is due.
    fn next_command(&mut self) -> Option<Command> {
        let timeout = self.time_to_next_step();
        match timeout {
            None => self.rx.recv().ok(),
            Some(timeout) => match self.rx.recv_timeout(timeout) {
                Ok(command) => Some(command),
                Err(RecvTimeoutError::Timeout) => Some(Command::Timer),
                Err(RecvTimeoutError::Disconnected) => None,
            },
        }
    }

    /// How long the writer may sleep: until the first dequeue deadline or the next due time.
    fn time_to_next_step(&self) -> Option<Duration> {
        if !self.to_release.is_empty() {
            return Some(Duration::ZERO);
        }
        let now = Instant::now();
        let mut timeout = self
            .parked
            .iter()
            .filter_map(|w| w.deadline)
            .min()
            .map(|d| d.saturating_duration_since(now));
        if let Some(due) = [self.next_due, Some(self.next_prune)]
            .into_iter()
            .flatten()
            .min()
        {
            // The time of the last batch, not the clock's: a manual clock moved quietly since then must not wake
            // the writer (tests observe that moment); a real clock is asked how long to wait, below.
            let wait = if due <= self.last_batch_at {
                Some(Duration::ZERO)
            } else {
                self.clock.real_time_until(from_millis(due))
            };
            if let Some(wait) = wait {
                timeout = Some(timeout.map_or(wait, |t| t.min(wait)));
            }
        }
        timeout
    }

    /// Runs one batch in one transaction. Returns the close acknowledgement if the batch asked to stop.
    fn run_batch(&mut self, batch: Vec<Command>) -> Option<oneshot::Sender<()>> {
        let mut ops = Vec::new();
        let mut dequeues = Vec::new();
        let (mut tick, mut timer) = (false, false);
        let mut close = None;
        let mut elsewhere = Vec::new();
        for command in batch {
            match command {
                Command::Op(op) => ops.push(op),
                Command::Ops(many) => ops.extend(many),
                Command::Dequeue(waiter) => dequeues.push(waiter),
                Command::Tick => tick = true,
                Command::Timer => timer = true,
                Command::Ready(queues) => elsewhere.extend(queues),
                Command::ReloadSettings => {
                    // What changed may let waiting workers in (a queue resumed, a limit raised).
                    self.reload_settings();
                    tick = true;
                }
                Command::GiveBack(leases) => self.to_release.extend(leases),
                Command::Close(ack) => close = Some(ack),
            }
        }
        if let Some(failure) = self.syncer.as_ref().and_then(Syncer::failure) {
            // Nothing more can be promised durable: every request fails until the queue is reopened.
            for op in ops {
                op.reply(Some(&failure));
            }
            for waiter in dequeues {
                let _ = waiter.reply.send(Err(failure.clone()));
            }
            return close;
        }
        // Durable batches reply through the syncer, after the WAL is on disk; the others reply at once.
        let durable = self.syncer.is_some() && ops.iter().any(|op| op.is_durable());
        self.to_release.extend(
            self.returned
                .lock()
                .expect("returned lock is never poisoned")
                .drain(..),
        );

        let now_ms = to_millis(self.clock.now());
        self.last_batch_at = now_ms;
        // Operations run without savepoints: most fail (if at all) before writing anything. Only when one fails
        // after writing is the batch rolled back and run again with a savepoint around each operation.
        let mut outcome = self.transaction(
            now_ms,
            (tick, timer),
            &elsewhere,
            &mut ops,
            &dequeues,
            Isolation::Shared,
        );
        if let Err(Failure::Poisoned) = outcome {
            self.db.roll_back();
            self.reload_settings();
            outcome = self.transaction(
                now_ms,
                (tick, timer),
                &elsewhere,
                &mut ops,
                &dequeues,
                Isolation::PerOperation,
            );
        }
        if outcome.is_err() {
            self.db.roll_back();
            // Rolled back: what the batch did to the settings in memory did not happen.
            self.reload_settings();
        }
        let (plan, commit_error) = match outcome {
            Ok(plan) => (Some(plan), None),
            Err(Failure::Storage(e)) => (None, Some(e)),
            Err(Failure::Poisoned) => unreachable!("per-operation isolation never poisons a batch"),
        };
        if let Some(e) = &commit_error {
            tracing::error!(error = %e, "batch transaction failed; every request in it gets the error");
        }
        let commit_error_is_none = commit_error.is_none();
        let mut deliveries: Vec<(Waiter, Claimed)> = Vec::new();
        let mut next_due = None;
        match plan {
            None => {
                let e = commit_error
                    .clone()
                    .expect("no plan means the batch failed");
                deliveries.extend(dequeues.into_iter().map(|w| (w, Err(e.clone()))));
            }
            Some(plan) => {
                next_due = Some(plan.next_due);
                self.metrics.add(&plan.totals);
                self.apply_timed_updates(&plan.timed);
                // A shorter retention interval set at run time counts from now, not from the next pass.
                let interval = duration_millis(self.settings.config.retention.interval);
                self.next_prune = self.next_prune.min(now_ms.saturating_add(interval));
                // Parked dequeues served in this batch leave the parked list, highest index first.
                let mut served = plan.served;
                served.sort_by_key(|(index, _)| std::cmp::Reverse(*index));
                for (index, result) in served {
                    let waiter = self
                        .parked
                        .remove(index)
                        .expect("served indices are in the parked list");
                    deliveries.push((waiter, result));
                }
                for (waiter, claimed) in dequeues.into_iter().zip(plan.claims) {
                    match claimed {
                        Ok(jobs)
                            if jobs.is_empty()
                                && waiter.deadline.is_some_and(|d| d > Instant::now()) =>
                        {
                            self.parked.push_back(waiter)
                        }
                        result => deliveries.push((waiter, result)),
                    }
                }
            }
        }
        // Claims and heartbeats answer at commit: if a power loss rolled them back, the job is simply not leased
        // and the token its worker holds matches nothing. Only durable operations wait for the fsync, so a
        // dequeue batched with enqueues and finishes does not pay for their sync.
        let (durable_ops, quick_ops): (Vec<_>, Vec<_>) = match &self.syncer {
            Some(_) if durable && commit_error_is_none => {
                ops.into_iter().partition(|op| op.is_durable())
            }
            _ => (Vec::new(), ops),
        };
        let (returned, wake) = (self.returned.clone(), self.wake.clone());
        deliver(
            quick_ops,
            deliveries,
            commit_error.as_ref(),
            &returned,
            &wake,
        );
        if !durable_ops.is_empty() {
            let syncer = self
                .syncer
                .as_ref()
                .expect("durable replies only with a syncer");
            syncer.after_sync(Box::new(move |sync_error: Option<&Error>| {
                deliver(durable_ops, Vec::new(), sync_error, &returned, &wake);
            }));
        }
        self.expire_waiters();
        let next_due = match next_due {
            Some(next_due) => next_due,
            None => self.db.run(maintenance::next_due),
        };
        // A rate-limited queue that refused a claim has a token again then: waiting workers look again.
        let next_token = self.settings.buckets.next_token_at.take();
        // A node that does not lead leaves the timed work to the leader, and asks for the lead again in a while.
        let next_due = match next_due {
            Ok(_) if !self.leads() => Ok(Some(now_ms + duration_millis(LEADER_RETRY))),
            other => other,
        };
        match next_due {
            Ok(next) => self.next_due = [next, next_token].into_iter().flatten().min(),
            Err(e) => {
                tracing::error!(error = %e, "could not read the next due time; looking again in a second");
                self.next_due = Some(now_ms + 1000);
            }
        }
        close
    }

    /// Writes nothing to `self` but the connection: what it decided is returned, and applied once committed.
    fn transaction(
        &mut self,
        now_ms: i64,
        (tick, timer): (bool, bool),
        elsewhere: &[String],
        ops: &mut [Box<dyn ErasedOp>],
        dequeues: &[Waiter],
        isolation: Isolation,
    ) -> std::result::Result<BatchPlan, Failure> {
        let node = self.db.node().map(str::to_owned);
        let durable = ops.iter().any(|op| op.is_durable());
        let (db, session) = self.db.begin_batch(durable).map_err(Failure::Storage)?;
        let retention = self.settings.config.retention;
        // Retention and housekeeping (workers lost, old activity and statistics) run every interval.
        let prune = now_ms >= self.next_prune;
        // A worker waiting in a long poll is there, though it sends nothing: housekeeping counts it seen.
        let mut waiting_workers: Vec<String> = Vec::new();
        if prune {
            for waiter in &self.parked {
                let worker = waiter.claim.worker.as_str();
                if !waiting_workers.iter().any(|w| w == worker) {
                    waiting_workers.push(worker.to_owned());
                }
            }
        }
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
        let due = tick || timer || self.next_due.is_some_and(|due| due <= now_ms);
        let mut leads = self.leads == Some(session);
        if !leads && (due || prune) {
            match take_lead(&ctx.db) {
                Ok(true) => {
                    tracing::info!(node = node.as_deref(), "this node now does the timed work");
                    self.leads = Some(session);
                    leads = true;
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "could not ask for the lead of the timed work")
                }
            }
        }
        let timed_work = TimedWork {
            refill: due,
            due: due && leads,
            prune: prune && leads,
            retention,
            release: &self.to_release,
            waiting_workers: &waiting_workers,
        };
        let mut timed = if timed_work.is_empty() {
            TimedUpdates::default()
        } else {
            match in_savepoint(&mut ctx, |ctx| timed_work.run(ctx)) {
                Ok(updates) => updates,
                Err(e) => {
                    tracing::error!(error = %e, "timed maintenance failed; it is retried with the next batch");
                    TimedUpdates::default()
                }
            }
        };
        if prune && !leads {
            // The leader prunes. This node asks for the lead again in a while, not with every batch: a housekeeping
            // pass that stayed due would wake the writer at once, over and over.
            timed.next_prune = Some(now_ms + duration_millis(LEADER_RETRY));
        }

        // On PostgreSQL, the plain pushes and finishes first, several to a statement (`ops/bulk.rs`). A failed
        // statement there aborts the transaction: the batch runs again, one operation at a time.
        let mut answered = vec![false; ops.len()];
        if isolation == Isolation::Shared && ctx.db.is_postgres() {
            let candidates: Vec<(usize, Bulk<'_>)> = ops
                .iter_mut()
                .enumerate()
                .filter_map(|(index, op)| op.bulk().map(|bulk| (index, bulk)))
                .collect();
            if candidates.len() > 1 {
                match bulk::apply(&mut ctx, candidates) {
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
        }

        for (op, _) in ops
            .iter_mut()
            .zip(&answered)
            .filter(|(_, answered)| !**answered)
        {
            match isolation {
                Isolation::Shared => {
                    let before = ctx.db.mark();
                    let mark = ctx.events.mark();
                    if !op.apply(&mut ctx) {
                        ctx.events.undo_to(mark);
                        check_transaction_alive(&ctx.db)?;
                        if ctx.db.touched_since(before) {
                            return Err(Failure::Poisoned);
                        }
                    }
                }
                Isolation::PerOperation => {
                    if let Err(e) = savepoint(&ctx.db) {
                        op.reject(e);
                        continue;
                    }
                    let mark = ctx.events.mark();
                    let applied = op.apply(&mut ctx);
                    if !applied {
                        ctx.events.undo_to(mark);
                        ctx.settings.seen.clear();
                    }
                    if !applied {
                        check_transaction_alive(&ctx.db)?;
                    }
                    if let Err(e) = end_savepoint(&ctx.db, applied) {
                        op.reject(e);
                    }
                }
            }
        }

        let new_claims: Vec<&Claim> = dequeues.iter().map(|waiter| &waiter.claim).collect();
        let claims = claim_all(&mut ctx, &new_claims, isolation, false)?;

        // Queues that gained ready jobs here are told to the other nodes (on PostgreSQL); those another node told
        // about are not told back.
        let ready_here: Vec<String> = match node {
            Some(_) => ctx.ready.iter().map(str::to_owned).collect(),
            None => Vec::new(),
        };
        for queue in elsewhere {
            ctx.ready.mark(queue);
        }
        let mut served = Vec::new();
        if tick || !ctx.ready.is_empty() {
            served = serve_parked(&mut ctx, &self.parked, tick, isolation)?;
        }

        // Read before the commit, under the write lock: after it, each of these reads would be a transaction of
        // its own, with its own round of WAL lock calls. A node that does not lead has no use for it.
        let next_due = if leads {
            maintenance::next_due(&ctx.db)
        } else {
            Ok(None)
        };

        let totals = ctx
            .events
            .flush(&ctx.db, node.as_deref())
            .map_err(Failure::Storage)?;
        if let Some(node) = &node {
            let changed = std::mem::take(&mut ctx.settings.changed);
            WriterDb::notify(
                node,
                &ctx.db,
                ready_here.iter().map(String::as_str),
                changed,
            )
            .map_err(Failure::Storage)?;
        }
        ctx.settings.changed = false;
        let db = ctx.db;
        db.commit().map_err(Failure::Storage)?;
        Ok(BatchPlan {
            timed,
            claims,
            served,
            next_due,
            totals,
        })
    }

    /// Stops: answers parked dequeues and any commands still queued, then checkpoints the WAL.
    fn stop(&mut self) {
        for waiter in self.parked.drain(..) {
            let _ = waiter.reply.send(Ok(Vec::new()));
        }
        let closed = Error::closed();
        while let Ok(command) = self.rx.try_recv() {
            match command {
                Command::Op(op) => {
                    op.reply(Some(&closed));
                }
                Command::Ops(many) => {
                    for op in many {
                        op.reply(Some(&closed));
                    }
                }
                Command::Dequeue(waiter) => {
                    let _ = waiter.reply.send(Err(closed.clone()));
                }
                Command::Tick | Command::Timer | Command::Ready(_) | Command::ReloadSettings => {}
                Command::GiveBack(leases) => self.to_release.extend(leases),
                Command::Close(ack) => {
                    let _ = ack.send(());
                }
            }
        }
        // Last: every reply waiting for an fsync goes out before the writer reports that it stopped.
        if let Some(syncer) = self.syncer.as_mut() {
            syncer.stop();
        }
        // Those replies (and the last batch's) may have found their callers gone: give those jobs back now, or they
        // would stay leased to nobody until the next open recovers them as crashed.
        self.to_release.extend(
            self.returned
                .lock()
                .expect("returned lock is never poisoned")
                .drain(..),
        );
        if !self.to_release.is_empty() {
            self.release_at_close();
        }
        self.db.close();
    }
}

impl Writer {
    /// Whether this writer does the timed work now.
    fn leads(&self) -> bool {
        self.leads == Some(self.db.session())
    }

    /// Loads the queues' settings again from the database, after a rollback.
    fn reload_settings(&mut self) {
        let settings = &mut self.settings;
        if let Err(e) = self.db.run(|db| settings.reload(db)) {
            tracing::error!(error = %e, "could not read the queues' settings again");
        }
    }

    /// Gives back undelivered claims in one last transaction.
    fn release_at_close(&mut self) {
        let leases = std::mem::take(&mut self.to_release);
        let now_ms = to_millis(self.clock.now());
        let node = self.db.node().map(str::to_owned);
        let result = (|| -> Result<()> {
            let mut ready = ReadyQueues::default();
            let mut events = EventLog::default();
            let mut ctx = WriteCtx {
                db: self.db.begin()?,
                now_ms,
                events: &mut events,
                ready: &mut ready,
                tokens: &mut self.tokens,
                rotation: &mut self.rotation,
                settings: &mut self.settings,
            };
            for lease in &leases {
                let _ = in_savepoint(&mut ctx, |ctx| Release::new(lease).apply(ctx));
            }
            ctx.events.flush(&ctx.db, node.as_deref())?;
            ctx.db.commit()
        })();
        if let Err(e) = result {
            self.db.roll_back();
            tracing::warn!(error = %e, jobs = leases.len(), "could not give back undelivered jobs at close");
        }
    }
}

/// Sends the replies of `ops` and `deliveries` (with `error` instead of their results if the batch failed), and
/// has the writer give back the jobs of claims whose caller went away.
fn deliver(
    ops: Vec<Box<dyn ErasedOp>>,
    deliveries: Vec<(Waiter, Claimed)>,
    error: Option<&Error>,
    returned: &Arc<Mutex<Vec<Lease>>>,
    wake: &Sender<Command>,
) {
    let mut undelivered = Vec::new();
    for op in ops {
        undelivered.extend(op.reply(error));
    }
    for (waiter, result) in deliveries {
        let result = match error {
            Some(e) => Err(e.clone()),
            None => result,
        };
        if let Err(Ok(jobs)) = waiter.reply.send(result) {
            undelivered.extend(jobs.into_iter().map(|c| c.lease));
        }
    }
    if !undelivered.is_empty() {
        returned
            .lock()
            .expect("returned lock is never poisoned")
            .extend(undelivered);
        let _ = wake.send(Command::Tick);
    }
}

/// What a committed batch decided.
struct BatchPlan {
    timed: TimedUpdates,
    /// For each new dequeue, in order: the jobs it got (empty: nothing ready).
    claims: Vec<Claimed>,
    /// Parked dequeues served: index in the parked list, and what they get.
    served: Vec<(usize, Claimed)>,
    /// The next due time as this batch leaves it, read inside its transaction (see `transaction`).
    next_due: Result<Option<i64>>,
    /// What the batch did, for the metrics kept in memory.
    totals: BatchTotals,
}
