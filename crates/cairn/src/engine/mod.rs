//! The engine: the writer thread, the only connection that writes. It sits above the operations it runs (`ops/`),
//! which sit above the storage (`store/`); imports run that way only.
//!
//! The writer takes whatever commands are waiting and runs them in one transaction (group commit: one fsync, made
//! by the syncer, for the lot). Operations run without savepoints; if one fails after writing, the batch is rolled
//! back and run again with a savepoint around each, so one bad request still fails alone. Replies go out once the
//! transaction has committed (and, for durable operations, once it is synced; claims and heartbeats never wait for
//! the sync).
//!
//! It also owns the workers that wait for jobs ("parked" dequeues). When a batch makes jobs ready in a queue, the
//! writer claims them for the parked dequeues in that same transaction, so a waiting worker gets its job with the
//! commit that created it: no polling, no second round trip. Before each batch it does the timed work of
//! `maintenance`, and between batches it sleeps until the next command, the next due time (a scheduled job, an
//! expiring lease, retention) or the next dequeue deadline, whichever comes first.
//!
//! This file is the writer's loop: waiting, batching, stopping. The rest: `command` (what the writer is asked),
//! `batch` (one batch and its replies), `transaction` (the batch's transaction), `isolation` (operations kept apart
//! or not), `parked` (claims for dequeues, the parked list), `timed` (the timed work). What differs between the
//! databases is behind `store::writer_db`: SQLite's write lock and syncer, PostgreSQL's sessions, lead and
//! notifications.

use std::collections::VecDeque;
use std::sync::mpsc::Sender;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::clock::{Clock, from_millis, to_millis};
use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::ops::events::EventLog;
use crate::ops::queues::SettingsCache;
use crate::ops::release::Release;
use crate::ops::{Operation, ReadyQueues, TokenSource, WriteCtx, in_savepoint};
use crate::store::sqlite::syncer::Syncer;
use crate::store::writer_db::WriterDb;

mod batch;
mod command;
mod isolation;
mod job_watch;
mod parked;
mod timed;

pub(crate) use timed::{Drain, Lead};
mod transaction;

pub(crate) use command::{Command, ErasedOp, Pending, Waiter};
pub(crate) use job_watch::JobWatch;

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
    /// On a node that does not lead the timed work, the due time it last told the leader of (see `transaction`).
    pub told_due: Option<i64>,
    /// When retention pruning runs next (ms).
    pub next_prune: i64,
    /// Retention's drain of a backlog, a paced step at a time.
    pub drain: timed::Drain,
    /// Jobs this writer completed or cancelled since retention's last pass (see `Writer::count_ended`).
    pub ended_since_pass: u64,
    /// After the timed work failed (in its savepoint, the batch's requests unharmed): it is not tried again
    /// before then, rather than in every batch.
    pub timed_backoff: Option<Instant>,
    /// When the last batch ran (ms, by the queue's clock).
    pub last_batch_at: i64,
    /// After a batch failed (the database out of reach, say): the writer does no timed work of its own before
    /// then, rather than try again in a loop; requests still run as they come.
    pub pause_until: Option<Instant>,
    /// The counters and histograms kept in memory, added to after each commit.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Who waits for jobs to end: woken after each commit that ended jobs (once durable, for a durable batch).
    pub job_watch: Arc<JobWatch>,
    /// The event stream's tail, rung after each commit that wrote events (once durable).
    pub tail: Arc<crate::event_stream::Tail>,
    /// Claims nobody received, to give back in the next batch.
    pub to_release: Vec<Lease>,
    /// Whether this writer leads the timed work: always on SQLite; on PostgreSQL, for a term it renews.
    pub lead: timed::Lead,
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
            // A due time another node told of needs no transaction: it only moves the writer's next wake.
            let first = match first {
                Command::Due(at) => {
                    self.note_due(at);
                    continue;
                }
                first => first,
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

    /// How long the writer may sleep: until the first dequeue deadline or the next due time, and no less than
    /// the pause after a failed batch.
    fn time_to_next_step(&self) -> Option<Duration> {
        let now = Instant::now();
        let pause = self
            .pause_until
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now));
        self.time_to_next_step_from(now)
            .map(|timeout| timeout.max(pause))
    }

    fn time_to_next_step_from(&self, now: Instant) -> Option<Duration> {
        if !self.to_release.is_empty() {
            return Some(Duration::ZERO);
        }
        let mut timeout = self
            .parked
            .iter()
            .filter_map(|w| w.deadline)
            .min()
            .map(|d| d.saturating_duration_since(now));
        // The timed work: a drain's next step, paced by the real clock, and the next due time or pass by the
        // queue's clock; none before the timed work may be tried again, after it failed.
        let mut timed: Option<Duration> = self
            .drain
            .resume_at()
            .map(|at| at.saturating_duration_since(now));
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
                timed = Some(timed.map_or(wait, |t| t.min(wait)));
            }
        }
        if let (Some(wait), Some(backoff)) = (timed, self.timed_backoff) {
            timed = Some(wait.max(backoff.saturating_duration_since(now)));
        }
        // On PostgreSQL, the next ask for the lead of the timed work (or its renewal), by the real clock.
        if let Some(ask) = self.lead.next_ask() {
            let wait = ask.saturating_duration_since(now);
            timed = Some(timed.map_or(wait, |t| t.min(wait)));
        }
        if let Some(wait) = timed {
            timeout = Some(timeout.map_or(wait, |t| t.min(wait)));
        }
        timeout
    }

    /// Stops: answers parked dequeues and any commands still queued, then checkpoints the WAL.
    fn stop(&mut self) {
        for waiter in self.parked.drain(..) {
            let _ = waiter.reply.send(Ok(Vec::new()));
        }
        self.job_watch.close();
        self.tail.close();
        let closed = Error::closed();
        while let Ok(command) = self.rx.try_recv() {
            match command {
                Command::Op(op) => {
                    op.reply(Some(&closed));
                }
                Command::Ops(many) | Command::UnhurriedOps(many, _) => {
                    for op in many {
                        op.reply(Some(&closed));
                    }
                }
                Command::Dequeue(waiter) => {
                    let _ = waiter.reply.send(Err(closed.clone()));
                }
                Command::Tick
                | Command::Timer
                | Command::Ready(_)
                | Command::ReloadSettings
                | Command::JobsEnded(_)
                | Command::Due(_) => {}
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
        self.take_returned();
        if !self.to_release.is_empty() {
            self.release_at_close();
        }
        self.db.close();
    }
}

impl Writer {
    /// Takes the claims whose replies found their callers gone (noted by the replies, on this thread or the
    /// syncer's), to give them back.
    fn take_returned(&mut self) {
        self.to_release.extend(
            self.returned
                .lock()
                .expect("returned lock is never poisoned")
                .drain(..),
        );
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
            ctx.events.flush(
                &ctx.db,
                node.as_deref(),
                &ctx.settings.config.limits.name_families,
            )?;
            ctx.db.commit()
        })();
        if let Err(e) = result {
            self.db.roll_back();
            tracing::warn!(error = %e, jobs = leases.len(), "could not give back undelivered jobs at close");
        }
    }
}
