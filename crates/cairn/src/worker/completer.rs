//! Finishing a worker's jobs together. A job's task hands its finish to the completer, and the worker's loop waits
//! for the answer; the completer sends every finish waiting at that moment in one call (`finish_many`). Over HTTP
//! it makes one call at a time, so a worker whose jobs end close together reports them in one request rather than
//! one each, and adds no wait of its own: a finish that finds no call in flight goes once the jobs ending in the same
//! turn have joined it, and those that arrive meanwhile go with the next call. With a backend that holds a worker's
//! finishes for company at the fsync (the embedded queue), it makes up to [`CALLS_WHILE_HELD`] calls at once: the
//! finishes of jobs that end during the hold must reach the queue to share it. Even then a call goes only once the
//! queue's writer has taken up the last one: the finishes that end while the writer is busy go together in the
//! next call, rather than queue at the writer in many small ones, which cost a writer at its limit more than the
//! fsync they would share saves.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::lease::Lease;
use crate::ops::finish::Finish;
use crate::worker::backend::Backend;
use crate::worker::context::Ending;
use crate::worker::patient::{Patience, is_passing};

/// The most finishes one call carries.
const MAX_PER_CALL: usize = 100;

/// The most calls unanswered at once with a backend that holds finishes for company: as many as the finishes the
/// embedded queue's syncer holds an fsync for (`ENOUGH_OPS` in `store/sqlite/syncer.rs`), so that a hold never waits
/// on finishes the completer keeps back for want of a call (it keeps them back only while the writer is busy, and a
/// busy writer's next batch takes them all).
const CALLS_WHILE_HELD: usize = 16;

/// A finish waiting for the completer, with where its answer goes.
struct Pending {
    lease: Lease,
    ending: Ending,
    reply: oneshot::Sender<Result<()>>,
}

/// A handle to a worker's completer; its task ends once every handle is gone and the finishes sent are answered.
#[derive(Clone)]
pub(crate) struct Completer {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Completer {
    /// Starts the completer's task, which reports to `queue`.
    pub fn start(queue: Arc<dyn Backend>) -> Completer {
        let (tx, rx) = mpsc::unbounded_channel();
        let calls = if queue.holds_finishes_for_company() {
            CALLS_WHILE_HELD
        } else {
            1
        };
        tokio::spawn(complete(queue, rx, calls));
        Completer { tx }
    }

    /// Hands over the job's finish (with the result and data its handler set), to go in one call with whatever
    /// other finishes are waiting; the answer comes on the receiver.
    pub fn send(&self, lease: &Lease, ending: Ending) -> Result<oneshot::Receiver<Result<()>>> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            lease: lease.clone(),
            ending,
            reply,
        };
        self.tx.send(pending).map_err(|_| Error::closed())?;
        Ok(answer)
    }
}

/// The completer's task: takes the first finish waiting and every other one waiting with it, and reports them, with
/// at most `most_calls` calls unanswered, each sent once the backend has taken up the last (unless that one was
/// full: a full call needs no company).
async fn complete(
    queue: Arc<dyn Backend>,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    most_calls: usize,
) {
    let mut calls = tokio::task::JoinSet::new();
    // Ends once the backend's writer has taken up the last call's finishes; none after a full call.
    let mut last_taken: Option<oneshot::Receiver<()>> = None;
    loop {
        if calls.len() >= most_calls {
            calls.join_next().await;
            continue;
        }
        if let Some(taken) = last_taken.take() {
            // Answered or dropped: either way the call no longer waits for the writer.
            let _ = taken.await;
        }
        let first = tokio::select! {
            first = rx.recv() => match first {
                Some(first) => first,
                None => break,
            },
            Some(_) = calls.join_next(), if !calls.is_empty() => continue,
        };
        // Jobs that end together end in the same turn of the runtime, one task after another: let the others
        // hand in theirs before the call goes, rather than sending the first alone.
        tokio::task::yield_now().await;
        let mut batch = vec![first];
        while batch.len() < MAX_PER_CALL {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let (taken, taken_answer) = oneshot::channel();
        // A full call goes on without waiting: more finishes are waiting, and they fill calls of their own.
        last_taken = (batch.len() < MAX_PER_CALL).then_some(taken_answer);
        calls.spawn(report(queue.clone(), batch, taken));
    }
    while calls.join_next().await.is_some() {}
}

/// Reports one call's finishes and sends each its answer; `taken` is answered once the backend has taken them up.
async fn report(queue: Arc<dyn Backend>, mut batch: Vec<Pending>, taken: oneshot::Sender<()>) {
    let finishes: Vec<Finish> = batch
        .iter_mut()
        .map(|p| Finish {
            result: p.ending.result.take(),
            data: p.ending.data.take(),
            ..Finish::new(&p.lease)
        })
        .collect();
    match finish_patiently(queue.as_ref(), finishes, taken).await {
        Ok(answers) => {
            for (pending, answer) in batch.into_iter().zip(answers) {
                let _ = pending.reply.send(answer);
            }
        }
        Err(e) => {
            for pending in batch {
                let _ = pending.reply.send(Err(e.clone()));
            }
        }
    }
}

/// [`Backend::finish_many_unhurried`], made again for the finishes refused for a reason that passes with time (see
/// `patient`), whether the whole call was refused or only some of its finishes: the answers, in order.
async fn finish_patiently(
    queue: &dyn Backend,
    finishes: Vec<Finish>,
    taken: oneshot::Sender<()>,
) -> Result<Vec<Result<()>>> {
    let mut answers: Vec<Option<Result<()>>> = vec![None; finishes.len()];
    let mut left: Vec<usize> = (0..finishes.len()).collect();
    let mut patience = Patience::new();
    // Only the first try says when it was taken up; the completer waits for no later one.
    let mut taken = Some(taken);
    loop {
        let call = left.iter().map(|&i| finishes[i].clone()).collect();
        let taken = taken.take().unwrap_or_else(|| oneshot::channel().0);
        let results = match queue.finish_many_unhurried(call, taken).await {
            Ok(results) => results,
            Err(e) if patience.again("finishing jobs", &e).await => continue,
            Err(e) => return Err(e),
        };
        let mut again = Vec::new();
        let mut refused = None;
        for (&i, result) in left.iter().zip(results) {
            if let Err(e) = &result
                && is_passing(e)
            {
                again.push(i);
                refused = Some(e.clone());
            }
            answers[i] = Some(result);
        }
        match refused {
            Some(e) if patience.again("finishing jobs", &e).await => left = again,
            _ => break,
        }
    }
    Ok(answers
        .into_iter()
        .map(|a| a.expect("every finish answered"))
        .collect())
}
