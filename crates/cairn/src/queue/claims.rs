//! Taking jobs (a dequeue, a long poll whose caller may go away) and finishing many at once, with a take or
//! without: what the writer is sent, and how the answers come back.

use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::engine::{Command, ErasedOp, Pending, Waiter};
use crate::error::{Error, Result};
use crate::ops::claim::{Claim, ClaimedJob, Dequeue};
use crate::ops::finish::{Finish, FinishAndTake, MAX_FINISH_MANY};
use crate::queue::{Queue, writer_stopped};

impl Queue {
    /// What [`Jobs::dequeue`](crate::Jobs::dequeue) runs embedded.
    pub(crate) async fn take(&self, request: Dequeue) -> Result<Vec<ClaimedJob>> {
        let claim = request.validate()?;
        self.claim(claim, request.wait).await
    }

    /// Runs a validated dequeue.
    async fn claim(&self, claim: Claim, wait: Duration) -> Result<Vec<ClaimedJob>> {
        let deadline = if wait.is_zero() {
            None
        } else {
            Some(Instant::now() + wait)
        };
        let (reply, answer) = oneshot::channel();
        self.send(Command::Dequeue(Waiter {
            claim,
            deadline,
            reply,
        }))?;
        let mut pending = PendingDequeue {
            answer: Some(answer),
            queue: self,
        };
        let answer = pending.answer.as_mut().expect("set just above").await;
        pending.answer = None;
        answer.map_err(|_| writer_stopped())?
    }

    /// What [`Jobs::finish_many`](crate::Jobs::finish_many) runs embedded.
    pub(crate) async fn finish_all(&self, finishes: Vec<Finish>) -> Result<Vec<Result<()>>> {
        self.finish_many_sent(finishes, Command::Ops).await
    }

    /// [`Jobs::finish_many`](crate::Jobs::finish_many) for a [`Worker`](crate::Worker), whose slots are free before the answers come: the
    /// fsync may be held for a moment (at most a millisecond) so that more finishes share it. `taken` is answered
    /// as the writer takes the finishes into a batch.
    pub(crate) async fn finish_many_unhurried(
        &self,
        finishes: Vec<Finish>,
        taken: oneshot::Sender<()>,
    ) -> Result<Vec<Result<()>>> {
        self.finish_many_sent(finishes, |ops| Command::UnhurriedOps(ops, taken))
            .await
    }

    /// Whether [`Queue::finish_many_unhurried`] may hold finishes for company: on SQLite with
    /// [`Durability::Full`](crate::Durability::Full).
    pub(crate) fn holds_finishes_for_company(&self) -> bool {
        self.inner.syncs
    }

    async fn finish_many_sent(
        &self,
        finishes: Vec<Finish>,
        command: impl FnOnce(Vec<Box<dyn ErasedOp>>) -> Command,
    ) -> Result<Vec<Result<()>>> {
        check_finish_count(finishes.len())?;
        if finishes.is_empty() {
            return Ok(Vec::new());
        }
        let mut ops: Vec<Box<dyn ErasedOp>> = Vec::with_capacity(finishes.len());
        let mut answers = Vec::with_capacity(finishes.len());
        for finish in finishes {
            let (reply, answer) = oneshot::channel();
            ops.push(Pending::new(finish, reply));
            answers.push(answer);
        }
        self.send(command(ops))?;
        let mut results = Vec::with_capacity(answers.len());
        for answer in answers {
            results.push(answer.await.map_err(|_| writer_stopped())?);
        }
        Ok(results)
    }

    /// What [`Jobs::finish_and_take`](crate::Jobs::finish_and_take) runs embedded.
    pub(crate) async fn finish_all_and_take(
        &self,
        finishes: Vec<Finish>,
        take: Dequeue,
    ) -> Result<FinishAndTake> {
        check_finish_count(finishes.len())?;
        if !take.wait.is_zero() {
            return Err(Error::invalid(
                "wait",
                format!(
                    "must be 0 in a take that goes with finishes, got {:?}: a long poll would hold back their answers",
                    take.wait
                ),
            ));
        }
        let claim = take.validate()?;
        // Polled in this order, each sends its command before the other is polled: the finishes reach the writer
        // first.
        let (finished, taken) =
            tokio::join!(self.finish_all(finishes), self.claim(claim, Duration::ZERO));
        Ok(FinishAndTake { finished, taken })
    }
}

/// A dequeue's reply in flight. If the caller stops waiting (the future is dropped) after the writer has sent jobs
/// but before they were read, the drop gives them back, so they are not held by nobody until their lease expires.
struct PendingDequeue<'a> {
    answer: Option<oneshot::Receiver<Result<Vec<ClaimedJob>>>>,
    queue: &'a Queue,
}

impl Drop for PendingDequeue<'_> {
    fn drop(&mut self) {
        let Some(mut answer) = self.answer.take() else {
            return;
        };
        // After close, the writer's send fails (and it gives the jobs back itself); before it, the jobs are here.
        answer.close();
        if let Ok(Ok(jobs)) = answer.try_recv()
            && !jobs.is_empty()
        {
            let leases = jobs.into_iter().map(|c| c.lease).collect();
            let _ = self.queue.inner.commands.send(Command::GiveBack(leases));
        }
    }
}

/// Refuses more finishes in one call than [`MAX_FINISH_MANY`].
fn check_finish_count(count: usize) -> Result<()> {
    if count > MAX_FINISH_MANY {
        return Err(Error::invalid(
            "finishes",
            format!("must be at most {MAX_FINISH_MANY} jobs, got {count}"),
        ));
    }
    Ok(())
}
