//! The writer thread: the only connection that writes. It takes whatever commands are waiting, runs them in one
//! transaction (group commit: one fsync for the lot) with a savepoint each (one bad request rolls back alone), and
//! replies once the transaction has committed.
//!
//! It also owns the workers that wait for jobs ("parked" dequeues). When a batch makes jobs ready in a queue, the
//! writer claims them for the parked dequeues in that same transaction, so a waiting worker gets its job with the
//! commit that created it: no polling, no second round trip. Before each batch it does the timed work of
//! `maintenance`, and between batches it sleeps until the next command, the next due time (a scheduled job, an
//! expiring lease, retention) or the next dequeue deadline, whichever comes first.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::clock::{Clock, duration_millis, from_millis, to_millis};
use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::ops::claim::{Claim, ClaimedJob};
use crate::ops::release::Release;
use crate::ops::{Limits, Operation, ReadyQueues, TokenSource, WriteCtx};
use crate::options::{Durability, RecoveryPolicy, Retention};
use crate::store::sqlite::{connection, maintenance};

/// A request to the writer.
pub(crate) enum Command {
    /// Apply an operation and reply after commit.
    Op(Box<dyn ErasedOp>),
    /// Claim jobs, waiting until the deadline if none are ready.
    Dequeue(Waiter),
    /// Look again: the clock jumped, or another connection committed jobs.
    Tick,
    /// Finish the current batch, answer waiting dequeues with no job, and stop.
    Close(oneshot::Sender<()>),
}

/// A dequeue, possibly parked until a job is ready or its deadline passes.
pub(crate) struct Waiter {
    pub claim: Claim,
    /// `None`: do not wait.
    pub deadline: Option<Instant>,
    pub reply: oneshot::Sender<Result<Vec<ClaimedJob>>>,
}

/// An operation with its reply channel, its type erased so that one batch can hold many kinds.
pub(crate) trait ErasedOp: Send {
    fn is_durable(&self) -> bool;
    /// Applies; true when the operation succeeded (its savepoint is kept).
    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> bool;
    /// Replaces the outcome with an error from the savepoint around the operation.
    fn reject(&mut self, error: Error);
    /// Replies with the operation's result, or with `commit_error` if the transaction failed. Returns the leases
    /// the caller could not receive, to be given back.
    fn reply(self: Box<Self>, commit_error: Option<&Error>) -> Vec<Lease>;
}

/// An operation waiting in a batch.
pub(crate) struct Pending<O: Operation> {
    op: O,
    result: Option<Result<O::Output>>,
    reply: oneshot::Sender<Result<O::Output>>,
}

impl<O: Operation> Pending<O> {
    pub fn new(op: O, reply: oneshot::Sender<Result<O::Output>>) -> Box<Self> {
        Box::new(Pending {
            op,
            result: None,
            reply,
        })
    }
}

impl<O: Operation> ErasedOp for Pending<O> {
    fn is_durable(&self) -> bool {
        self.op.is_durable()
    }

    fn apply(&mut self, ctx: &mut WriteCtx<'_>) -> bool {
        let result = self.op.apply(ctx);
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn reject(&mut self, error: Error) {
        self.result = Some(Err(error));
    }

    fn reply(self: Box<Self>, commit_error: Option<&Error>) -> Vec<Lease> {
        let result = match commit_error {
            Some(e) => Err(e.clone()),
            None => self.result.unwrap_or_else(|| Err(Error::closed())),
        };
        match self.reply.send(result) {
            Err(Ok(output)) => O::undelivered_leases(&output),
            _ => Vec::new(),
        }
    }
}

/// Everything the writer thread owns.
pub(crate) struct Writer {
    pub conn: Connection,
    pub clock: Arc<dyn Clock>,
    pub rx: Receiver<Command>,
    pub limits: Limits,
    pub durability: Durability,
    pub retention: Retention,
    pub recovery: RecoveryPolicy,
    pub max_batch: usize,
    pub parked: VecDeque<Waiter>,
    pub tokens: TokenSource,
    pub rotation: usize,
    /// The `PRAGMA synchronous` level the connection is at.
    pub synchronous: i64,
    /// The earliest scheduled run_at or lease expiry (ms), if any.
    pub next_due: Option<i64>,
    /// When retention pruning runs next (ms).
    pub next_prune: i64,
    /// Claims nobody received, to give back in the next batch.
    pub to_release: Vec<Lease>,
    /// Whether jobs left running by a dead process still need recovering (first batch only).
    pub needs_recovery: bool,
    /// Held while the writer runs: while it is locked, no other process opens the database as a queue.
    pub _lock: std::fs::File,
}

/// What a batch ends with: the commit result, replies to send.
struct Delivery {
    waiter: Waiter,
    result: Result<Vec<ClaimedJob>>,
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

    /// Waits for the next command, or makes a tick when something timed is due.
    fn next_command(&mut self) -> Option<Command> {
        let timeout = self.time_to_next_step();
        match timeout {
            None => self.rx.recv().ok(),
            Some(timeout) => match self.rx.recv_timeout(timeout) {
                Ok(command) => Some(command),
                Err(RecvTimeoutError::Timeout) => Some(Command::Tick),
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
        let prune = self.retention_enabled().then_some(self.next_prune);
        if let Some(due) = [self.next_due, prune].into_iter().flatten().min() {
            let clock_now = to_millis(self.clock.now());
            let wait = if due <= clock_now {
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

    fn retention_enabled(&self) -> bool {
        self.retention.max_age.is_some() || self.retention.max_count.is_some()
    }

    /// Runs one batch in one transaction. Returns the close acknowledgement if the batch asked to stop.
    fn run_batch(&mut self, batch: Vec<Command>) -> Option<oneshot::Sender<()>> {
        let mut ops = Vec::new();
        let mut dequeues = Vec::new();
        let mut tick = false;
        let mut close = None;
        for command in batch {
            match command {
                Command::Op(op) => ops.push(op),
                Command::Dequeue(waiter) => dequeues.push(waiter),
                Command::Tick => tick = true,
                Command::Close(ack) => close = Some(ack),
            }
        }
        let durable = self.durability == Durability::Full && ops.iter().any(|op| op.is_durable());
        let level = if durable { 2 } else { 1 };
        if level != self.synchronous {
            match connection::set_synchronous(&self.conn, level) {
                Ok(()) => self.synchronous = level,
                Err(e) => {
                    tracing::error!(error = %e, "could not change synchronous; keeping the stricter setting")
                }
            }
        }

        let now_ms = to_millis(self.clock.now());
        let mut deliveries = Vec::new();
        let mut newly_parked = Vec::new();
        let outcome = self.transaction(
            now_ms,
            tick,
            &mut ops,
            dequeues,
            &mut deliveries,
            &mut newly_parked,
        );

        let commit_error = outcome.err();
        if let Some(e) = &commit_error {
            tracing::error!(error = %e, "batch transaction failed; every request in it gets the error");
        }
        for op in ops {
            let back = op.reply(commit_error.as_ref());
            self.to_release.extend(back);
        }
        for Delivery { waiter, result } in deliveries {
            let result = match &commit_error {
                Some(e) => Err(e.clone()),
                None => result,
            };
            if let Err(Ok(jobs)) = waiter.reply.send(result) {
                self.to_release.extend(jobs.into_iter().map(|c| c.lease));
            }
        }
        self.parked.extend(newly_parked);
        self.expire_waiters();
        match maintenance::next_due(&self.conn) {
            Ok(next) => self.next_due = next,
            Err(e) => {
                tracing::error!(error = %e, "could not read the next due time; looking again in a second");
                self.next_due = Some(now_ms + 1000);
            }
        }
        close
    }

    /// The transaction of one batch: timed work, the operations, the new dequeues, then the parked dequeues.
    fn transaction(
        &mut self,
        now_ms: i64,
        tick: bool,
        ops: &mut [Box<dyn ErasedOp>],
        dequeues: Vec<Waiter>,
        deliveries: &mut Vec<Delivery>,
        newly_parked: &mut Vec<Waiter>,
    ) -> Result<()> {
        if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
            // Nothing ran: every request in the batch gets the error (the caller replies to the operations).
            let error = Error::storage("starting a write transaction", e);
            deliveries.extend(dequeues.into_iter().map(|waiter| Delivery {
                waiter,
                result: Err(error.clone()),
            }));
            return Err(error);
        }
        let mut ready = ReadyQueues::default();
        let mut ctx = WriteCtx {
            conn: &self.conn,
            now_ms,
            limits: &self.limits,
            ready: &mut ready,
            tokens: &mut self.tokens,
            rotation: &mut self.rotation,
        };

        let released = std::mem::take(&mut self.to_release);
        let mut timed = || -> Result<()> {
            if self.needs_recovery {
                let recovered = maintenance::recover_orphans(&mut ctx, self.recovery)?;
                if recovered > 0 {
                    tracing::warn!(
                        recovered,
                        "recovered jobs left running by a process that exited"
                    );
                }
            }
            // The next-due time is exact for everything this writer wrote; a tick also covers other writers.
            if tick || self.next_due.is_some_and(|due| due <= now_ms) {
                maintenance::promote_due(&mut ctx)?;
                let expired = maintenance::expire_leases(&mut ctx)?;
                if expired > 0 {
                    tracing::info!(expired, "retried jobs whose lease expired");
                }
            }
            let retention_on =
                self.retention.max_age.is_some() || self.retention.max_count.is_some();
            if retention_on && now_ms >= self.next_prune {
                let pruned = maintenance::prune(&mut ctx, &self.retention)?;
                let more = pruned as i64 >= maintenance::STEP_ROWS;
                self.next_prune = if more {
                    now_ms
                } else {
                    now_ms + duration_millis(self.retention.interval)
                };
            }
            for lease in &released {
                // The caller went away before receiving the job: give it back without counting the attempt.
                in_savepoint(&mut ctx, |ctx| Release::new(lease).apply(ctx).map(|_| ())).ok();
            }
            Ok(())
        };
        let timed_result = in_savepoint_result(&self.conn, &mut timed);
        if let Err(e) = timed_result {
            tracing::error!(error = %e, "timed maintenance failed; it is retried with the next batch");
        } else {
            self.needs_recovery = false;
        }

        for op in ops.iter_mut() {
            if let Err(e) = savepoint(ctx.conn) {
                op.reject(e);
                continue;
            }
            let applied = op.apply(&mut ctx);
            if let Err(e) = end_savepoint(ctx.conn, applied) {
                op.reject(e);
            }
        }

        for waiter in dequeues {
            match in_savepoint(&mut ctx, |ctx| waiter.claim.run(ctx)) {
                Ok(jobs)
                    if jobs.is_empty() && waiter.deadline.is_some_and(|d| d > Instant::now()) =>
                {
                    newly_parked.push(waiter)
                }
                result => deliveries.push(Delivery { waiter, result }),
            }
        }

        if tick || !ctx.ready.is_empty() {
            serve_parked(&mut ctx, &mut self.parked, tick, deliveries);
        }

        if let Err(e) = self.conn.execute_batch("COMMIT") {
            let _ = self.conn.execute_batch("ROLLBACK");
            return Err(Error::storage("committing a batch", e));
        }
        Ok(())
    }

    /// Answers parked dequeues whose deadline has passed: no job.
    fn expire_waiters(&mut self) {
        let now = Instant::now();
        let mut kept = VecDeque::with_capacity(self.parked.len());
        for waiter in self.parked.drain(..) {
            if waiter.reply.is_closed() {
                continue;
            }
            if waiter.deadline.is_some_and(|d| d <= now) {
                let _ = waiter.reply.send(Ok(Vec::new()));
            } else {
                kept.push_back(waiter);
            }
        }
        self.parked = kept;
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
                Command::Dequeue(waiter) => {
                    let _ = waiter.reply.send(Err(closed.clone()));
                }
                Command::Tick => {}
                Command::Close(ack) => {
                    let _ = ack.send(());
                }
            }
        }
        if let Err(e) = self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
            tracing::debug!(error = %e, "could not checkpoint the WAL on close");
        }
    }
}

/// Claims jobs for parked dequeues that the new ready jobs (or, on a tick, anything) could serve, oldest first.
/// A filter that found nothing is not tried again for later waiters with the same filter in this batch.
fn serve_parked(
    ctx: &mut WriteCtx<'_>,
    parked: &mut VecDeque<Waiter>,
    all: bool,
    deliveries: &mut Vec<Delivery>,
) {
    let mut exhausted: HashSet<String> = HashSet::new();
    let mut kept = VecDeque::with_capacity(parked.len());
    for waiter in parked.drain(..) {
        if waiter.reply.is_closed() {
            continue;
        }
        if !(all || waiter.claim.wants_any_of(ctx.ready)) {
            kept.push_back(waiter);
            continue;
        }
        let key = waiter.claim.filter_key();
        if exhausted.contains(&key) {
            kept.push_back(waiter);
            continue;
        }
        match in_savepoint(ctx, |ctx| waiter.claim.run(ctx)) {
            Ok(jobs) if jobs.is_empty() => {
                exhausted.insert(key);
                kept.push_back(waiter);
            }
            result => deliveries.push(Delivery { waiter, result }),
        }
    }
    *parked = kept;
}

/// Runs `f` in a savepoint: kept if it succeeds, rolled back if it fails.
fn in_savepoint<T>(
    ctx: &mut WriteCtx<'_>,
    f: impl FnOnce(&mut WriteCtx<'_>) -> Result<T>,
) -> Result<T> {
    let conn = ctx.conn;
    savepoint(conn)?;
    let result = f(ctx);
    end_savepoint(conn, result.is_ok())?;
    result
}

fn in_savepoint_result(conn: &Connection, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
    savepoint(conn)?;
    let result = f();
    end_savepoint(conn, result.is_ok())?;
    result
}

fn savepoint(conn: &Connection) -> Result<()> {
    conn.prepare_cached("SAVEPOINT op")?.execute([])?;
    Ok(())
}

fn end_savepoint(conn: &Connection, keep: bool) -> Result<()> {
    if !keep {
        conn.prepare_cached("ROLLBACK TO op")?.execute([])?;
    }
    conn.prepare_cached("RELEASE op")?.execute([])?;
    Ok(())
}
