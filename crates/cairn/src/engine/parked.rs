//! Dequeues in the writer: claims for a batch's new dequeues and for its parked ones (those that found nothing and
//! wait), in the transaction that makes jobs ready, and the parked list itself.

use std::collections::{HashSet, VecDeque};
use std::time::Instant;

use crate::ops::WriteCtx;
use crate::ops::bulk_claim;
use crate::ops::claim::Claim;

use super::Writer;
use super::command::{Claimed, Waiter};
use super::isolation::{Failure, Isolation, claim_isolated};

/// Claims jobs for parked dequeues that the new ready jobs (or, on a tick, anything) could serve, oldest first.
/// Returns the index in `parked` of each waiter served, with what it gets.
pub(super) fn serve_parked(
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
/// (`ops/bulk_claim.rs`: a statement for many); a failure there poisons the batch, which then runs one operation
/// at a time. The rest run one at a time. With `skip_exhausted`, a filter that found nothing is not tried again
/// for later claims with the same filter: it would find nothing again, so they get no jobs (parked dequeues skip
/// this way; a new dequeue runs, so that its worker counts as seen).
pub(super) fn claim_all(
    ctx: &mut WriteCtx<'_>,
    claims: &[&Claim],
    isolation: Isolation,
    skip_exhausted: bool,
) -> std::result::Result<Vec<Claimed>, Failure> {
    let together = if isolation == Isolation::Shared && ctx.db.is_postgres() && !claims.is_empty() {
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
