//! What the writer is asked: the commands on its channel, a dequeue that may park (`Waiter`), an operation with its
//! reply, its type erased so that one batch can hold many kinds (`ErasedOp`, `Pending`), and a batch's commands
//! sorted by kind (`Batch`).

use std::any::Any;
use std::time::Instant;

use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::ops::bulk::Bulk;
use crate::ops::claim::{Claim, ClaimedJob};
use crate::ops::finish::Finish;
use crate::ops::push::Push;
use crate::ops::{Operation, WriteCtx};
#[cfg(feature = "postgres")]
use crate::store::postgres::listener::Notice;

/// A request to the writer.
pub(crate) enum Command {
    /// Apply an operation and reply after commit.
    Op(Box<dyn ErasedOp>),
    /// Apply these operations in one batch (a worker's report of several jobs), each replying on its own.
    Ops(Vec<Box<dyn ErasedOp>>),
    /// As [`Command::Ops`], for operations whose caller does not wait on their answers to go on (a worker's
    /// finishes: its slots are free already), so the syncer may hold their fsync for a moment to share it. The
    /// sender is answered as the writer takes them into a batch: the caller may send its next ones then, to go in a
    /// later batch with whatever comes meanwhile, while these are written and wait for the disk.
    UnhurriedOps(Vec<Box<dyn ErasedOp>>, oneshot::Sender<()>),
    /// Claim jobs, waiting until the deadline if none are ready.
    Dequeue(Waiter),
    /// Look again at everything: the clock jumped, another connection committed jobs, or notifications from other
    /// nodes may have been missed. Every parked dequeue is tried.
    Tick,
    /// A time the writer set itself came (a due time, a lease expiry, a rate limit's next token, or a follower's
    /// next bid for the lead): the timed work runs, and only the dequeues of queues that gained jobs are tried, so
    /// that a follower's bid is not a poll of the queues.
    Timer,
    /// Another node made jobs ready in these queues (PostgreSQL): serve the dequeues waiting on them.
    Ready(Vec<String>),
    /// Another node changed a queue's settings or an option (PostgreSQL): load them again, and try every parked
    /// dequeue.
    ReloadSettings,
    /// Another node ended these jobs, which some wait on this node waits for (PostgreSQL): wake those waits.
    JobsEnded(Vec<i64>),
    /// Another node wrote something due at this time (PostgreSQL, milliseconds): the leader of the timed work wakes
    /// for it.
    Due(i64),
    /// Give these claims back: their dequeue's caller stopped waiting after they were sent.
    GiveBack(Vec<Lease>),
    /// Finish the current batch, answer waiting dequeues with no job, and stop.
    Close(oneshot::Sender<()>),
}

#[cfg(feature = "postgres")]
impl From<Notice> for Command {
    /// What the listener heard from the other nodes (PostgreSQL), as the writer's command.
    fn from(notice: Notice) -> Command {
        match notice {
            Notice::Ready(queues) => Command::Ready(queues),
            Notice::SettingsChanged => Command::ReloadSettings,
            Notice::MayHaveMissed => Command::Tick,
            Notice::JobsEnded(jobs) => Command::JobsEnded(jobs),
            Notice::Due(at) => Command::Due(at),
        }
    }
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
    /// The operation, if it is one that `ops/bulk.rs` may answer together with others of its kind.
    fn bulk(&mut self) -> Option<Bulk<'_>>;
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

    fn bulk(&mut self) -> Option<Bulk<'_>> {
        let op: &dyn Any = &self.op;
        let result: &mut dyn Any = &mut self.result;
        if let Some(push) = op.downcast_ref::<Push>() {
            return Some(Bulk::Push(push, result.downcast_mut()?));
        }
        if let Some(finish) = op.downcast_ref::<Finish>() {
            return Some(Bulk::Finish(finish, result.downcast_mut()?));
        }
        None
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

/// A batch's commands, sorted by kind.
#[derive(Default)]
pub(super) struct Batch {
    /// The operations, in the order they came.
    pub ops: Vec<Box<dyn ErasedOp>>,
    /// Whether a durable operation's caller waits on its answer to go on (any but [`Command::UnhurriedOps`]).
    pub hurried: bool,
    /// The new dequeues, in the order they came.
    pub dequeues: Vec<Waiter>,
    /// Whether every parked dequeue is tried ([`Command::Tick`], or settings loaded again).
    pub tick: bool,
    /// Whether a time the writer set itself came ([`Command::Timer`]).
    pub timer: bool,
    /// The queues another node made jobs ready in (PostgreSQL).
    pub elsewhere: Vec<String>,
    /// The acknowledgement to send once the writer has stopped, if the batch asked it to.
    pub close: Option<oneshot::Sender<()>>,
}

impl Batch {
    /// Fails every request in the batch with `error`. Returns the close acknowledgement, if any.
    pub(super) fn refuse(self, error: &Error) -> Option<oneshot::Sender<()>> {
        for op in self.ops {
            op.reply(Some(error));
        }
        for waiter in self.dequeues {
            let _ = waiter.reply.send(Err(error.clone()));
        }
        self.close
    }
}

/// What a dequeue gets: jobs (possibly none), or an error.
pub(super) type Claimed = Result<Vec<ClaimedJob>>;
