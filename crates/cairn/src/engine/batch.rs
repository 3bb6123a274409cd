//! One batch: the commands taken from the writer's channel, sorted, run in one transaction (see `transaction`),
//! and answered: requests at commit, durable operations after the syncer's fsync, and the jobs of claims whose
//! caller went away given back.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::clock::to_millis;
use crate::error::Error;
use crate::lease::Lease;
use crate::store::sqlite::syncer::Syncer;

use super::Writer;
use super::command::{Batch, Claimed, Command, ErasedOp, Waiter};

/// How long the writer leaves its timed work after a batch failed: the failure (a database out of reach, a full
/// disk) takes at least this long to pass, and trying again at once would only fill the log.
const PAUSE_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(1);

impl Writer {
    /// Runs one batch in one transaction. Returns the close acknowledgement if the batch asked to stop.
    pub(super) fn run_batch(&mut self, commands: Vec<Command>) -> Option<oneshot::Sender<()>> {
        let mut batch = self.sort_commands(commands);
        if let Some(failure) = self.syncer.as_ref().and_then(Syncer::failure) {
            // Nothing more can be promised durable: every request fails until the queue is reopened.
            return batch.refuse(&failure);
        }
        // Durable batches reply through the syncer, after the WAL is on disk; the others reply at once.
        let durable = self.syncer.is_some() && batch.ops.iter().any(|op| op.is_durable());
        self.take_returned();

        let now_ms = to_millis(self.clock.now());
        self.last_batch_at = now_ms;
        let outcome = self.commit_batch(now_ms, &mut batch);
        let Batch {
            ops,
            hurried,
            dequeues,
            close,
            ..
        } = batch;
        let (deliveries, next_due, commit_error, ended) = match outcome {
            Ok(mut plan) => {
                self.pause_until = None;
                self.metrics.add(&plan.totals);
                self.apply_timed_updates(&plan.timed, now_ms);
                if plan.told_due.is_some() {
                    self.told_due = plan.told_due;
                }
                self.count_ended(plan.totals.ended(), now_ms);
                let ended = Ended {
                    jobs: std::mem::take(&mut plan.totals.ended_jobs),
                    wrote_events: plan.totals.wrote_events,
                };
                let deliveries = self.hand_over(plan.served, dequeues, plan.claims);
                (deliveries, Some(plan.next_due), None, ended)
            }
            Err(e) => {
                match e.kind() {
                    crate::ErrorKind::Unavailable => {
                        tracing::warn!(error = %e, "batch transaction failed; every request in it gets the error")
                    }
                    _ => {
                        tracing::error!(error = %e, "batch transaction failed; every request in it gets the error")
                    }
                }
                self.pause_until = Some(std::time::Instant::now() + PAUSE_AFTER_FAILURE);
                let deliveries = dequeues.into_iter().map(|w| (w, Err(e.clone()))).collect();
                (deliveries, None, Some(e), Ended::default())
            }
        };
        self.reply(
            ops,
            deliveries,
            durable,
            hurried,
            commit_error.as_ref(),
            ended,
        );
        self.expire_waiters();
        self.schedule_next(next_due, now_ms);
        close
    }

    /// Sorts a batch's commands by kind. Settings to load again are loaded, and claims to give back noted, at once.
    fn sort_commands(&mut self, commands: Vec<Command>) -> Batch {
        let mut batch = Batch::default();
        for command in commands {
            match command {
                Command::Op(op) => {
                    batch.hurried |= op.is_durable();
                    batch.ops.push(op);
                }
                Command::Ops(many) => {
                    batch.hurried |= many.iter().any(|op| op.is_durable());
                    batch.ops.extend(many);
                }
                Command::UnhurriedOps(many, taken) => {
                    batch.ops.extend(many);
                    let _ = taken.send(());
                }
                Command::Dequeue(waiter) => batch.dequeues.push(waiter),
                Command::Tick => {
                    batch.tick = true;
                    // Another connection committed (the application's own transaction), or notifications from
                    // other nodes may have been lost: what they did is committed already. The waits read their
                    // jobs again, and the event stream reads the log on.
                    self.job_watch.wake_all();
                    self.tail.ring();
                }
                Command::Timer => batch.timer = true,
                Command::Ready(queues) => batch.elsewhere.extend(queues),
                Command::ReloadSettings => {
                    // What changed may let waiting workers in (a queue resumed, a limit raised).
                    self.reload_settings();
                    batch.tick = true;
                }
                Command::GiveBack(leases) => self.to_release.extend(leases),
                // Ended on another node, committed there: the waits here read the jobs again.
                Command::JobsEnded(jobs) => self.job_watch.wake(&jobs),
                // Written on another node, committed there: the leader wakes for it (another node has no use for it;
                // should it win the lead, it does the timed work at once and reads the next due time).
                Command::Due(at) => self.note_due(at),
                Command::Close(ack) => batch.close = Some(ack),
            }
        }
        batch
    }

    /// Sends the replies of a batch's operations and dequeues, with `commit_error` if it did not commit, and tells
    /// the waits for the jobs it `ended` and the event stream: with the durable replies, once the batch is on disk
    /// (`hurried` when a caller waits on one of them to go on).
    fn reply(
        &self,
        ops: Vec<Box<dyn ErasedOp>>,
        deliveries: Vec<(Waiter, Claimed)>,
        durable: bool,
        hurried: bool,
        commit_error: Option<&Error>,
        ended: Ended,
    ) {
        // Claims and heartbeats answer at commit: if a power loss rolled them back, the job is simply not leased
        // and the token its worker holds matches nothing. Only durable operations wait for the fsync, so a
        // dequeue batched with enqueues and finishes does not pay for their sync.
        let (durable_ops, quick_ops): (Vec<_>, Vec<_>) = match &self.syncer {
            Some(_) if durable && commit_error.is_none() => {
                ops.into_iter().partition(|op| op.is_durable())
            }
            _ => (Vec::new(), ops),
        };
        let (returned, wake) = (self.returned.clone(), self.wake.clone());
        deliver(quick_ops, deliveries, commit_error, &returned, &wake);
        let (job_watch, tail) = (self.job_watch.clone(), self.tail.clone());
        let tell = move || {
            job_watch.wake(&ended.jobs);
            if ended.wrote_events {
                tail.ring();
            }
        };
        if durable_ops.is_empty() {
            tell();
        } else {
            let syncer = self
                .syncer
                .as_ref()
                .expect("durable replies only with a syncer");
            let count = durable_ops.len();
            let replies = Box::new(move |sync_error: Option<&Error>| {
                deliver(durable_ops, Vec::new(), sync_error, &returned, &wake);
                tell();
            });
            syncer.after_sync(replies, count, hurried);
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

/// What a committed batch tells after its replies: the jobs it ended (for their waits), and whether it wrote
/// events (for the event stream).
#[derive(Default)]
struct Ended {
    jobs: Vec<i64>,
    wrote_events: bool,
}
