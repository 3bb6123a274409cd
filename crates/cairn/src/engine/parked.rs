//! Dequeues in the writer: claims for a batch's new dequeues and for its parked ones (those that found nothing and
//! wait), in the transaction that makes jobs ready, and the parked list itself.

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use crate::ops::WriteCtx;
use crate::ops::claim::Claim;
use crate::ops::claim::bulk as bulk_claim;

use super::Writer;
use super::command::{Batch, Claimed, Waiter};
use super::isolation::{Failure, Isolation, claim_isolated};

/// Serves the parked dequeues that the queues made ready in this batch can serve, with those another node made
/// ready (`batch.elsewhere`); on a tick, every parked dequeue is tried.
pub(super) fn serve_ready(
    ctx: &mut WriteCtx<'_>,
    parked: &VecDeque<Waiter>,
    batch: &Batch,
    isolation: Isolation,
) -> std::result::Result<Vec<(usize, Claimed)>, Failure> {
    for queue in &batch.elsewhere {
        ctx.ready.mark(queue);
    }
    let mut served = Vec::new();
    if batch.tick || !ctx.ready.is_empty() {
        served = serve_parked(ctx, parked, batch.tick, isolation)?;
    }
    Ok(served)
}

/// Claims jobs for parked dequeues that the new ready jobs (or, on a tick, anything) could serve, oldest first.
/// Returns the index in `parked` of each waiter served, with what it gets.
fn serve_parked(
    ctx: &mut WriteCtx<'_>,
    parked: &VecDeque<Waiter>,
    all: bool,
    isolation: Isolation,
) -> std::result::Result<Vec<(usize, Claimed)>, Failure> {
    let (indices, claims): (Vec<usize>, Vec<&Claim>) = parked
        .iter()
        .enumerate()
        .filter(|(_, waiter)| {
            !waiter.reply.is_closed() && (all || waiter.claim.wants_any_of(ctx.ready))
        })
        .map(|(index, waiter)| (index, &waiter.claim))
        .unzip();
    let claimed = claim_all(ctx, &claims, isolation, true)?;
    Ok(indices
        .into_iter()
        .zip(claimed)
        .filter(|(_, result)| !matches!(result, Ok(jobs) if jobs.is_empty()))
        .collect())
}

/// Runs `claims` in order, each to its result. On PostgreSQL, in a shared batch, those that can go together do
/// (`ops/claim/bulk.rs`: a statement for many); a failure there poisons the batch, which then runs one operation
/// at a time. The rest run one at a time. With `skip_exhausted`, a filter that found nothing is not tried again
/// for later claims with the same filter: it would find nothing again, so they get no jobs (parked dequeues skip
/// this way; a new dequeue runs, so that its worker counts as seen).
pub(super) fn claim_all(
    ctx: &mut WriteCtx<'_>,
    claims: &[&Claim],
    isolation: Isolation,
    skip_exhausted: bool,
) -> std::result::Result<Vec<Claimed>, Failure> {
    // Claims go together where every statement is a round trip (`statements_are_round_trips`).
    let together = if isolation == Isolation::Shared
        && ctx.db.capabilities().statements_are_round_trips
        && !claims.is_empty()
    {
        bulk_claim::claim_together(ctx, claims).map_err(|e| {
            tracing::debug!(error = %e, "a batch's bulk claims failed; running it one operation at a time");
            Failure::Poisoned
        })?
    } else {
        claims.iter().map(|_| None).collect()
    };
    let mut exhausted: HashSet<String> = HashSet::new();
    let mut results = Vec::with_capacity(claims.len());
    for (claim, taken) in claims.iter().zip(together) {
        if let Some(jobs) = taken {
            results.push(Ok(jobs));
            continue;
        }
        let key = skip_exhausted.then(|| claim.filter_key());
        if key.as_ref().is_some_and(|key| exhausted.contains(key)) {
            results.push(Ok(Vec::new()));
            continue;
        }
        let result = claim_isolated(ctx, claim, isolation)?;
        if let (Some(key), Ok(jobs)) = (key, &result)
            && jobs.is_empty()
        {
            exhausted.insert(key);
        }
        results.push(result);
    }
    Ok(results)
}

impl Writer {
    /// After the commit: the parked dequeues served leave the parked list, and a new dequeue that got nothing
    /// parks while its deadline is ahead. Returns the replies to send, those of the parked dequeues first.
    pub(super) fn hand_over(
        &mut self,
        mut served: Vec<(usize, Claimed)>,
        dequeues: Vec<Waiter>,
        claims: Vec<Claimed>,
    ) -> Vec<(Waiter, Claimed)> {
        let mut deliveries = Vec::new();
        // Parked dequeues served in this batch leave the parked list, highest index first.
        served.sort_by_key(|(index, _)| std::cmp::Reverse(*index));
        for (index, result) in served {
            let waiter = self
                .parked
                .remove(index)
                .expect("served indices are in the parked list");
            deliveries.push((waiter, result));
        }
        for (waiter, claimed) in dequeues.into_iter().zip(claims) {
            match claimed {
                Ok(jobs)
                    if jobs.is_empty() && waiter.deadline.is_some_and(|d| d > Instant::now()) =>
                {
                    self.parked.push_back(waiter)
                }
                result => deliveries.push((waiter, result)),
            }
        }
        deliveries
    }

    /// Answers parked dequeues whose deadline has passed: no job.
    pub(super) fn expire_waiters(&mut self) {
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
}
