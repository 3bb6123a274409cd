//! A batch's dequeues, many to a statement, on PostgreSQL. There every statement is a round trip, and a batch of a
//! busy server holds dozens of dequeues: the new ones, and the parked ones that the batch's pushes can now serve.
//! Dequeues that look for the same thing (one queue, the same name patterns and priority) run together instead.
//! Each gets one slot per job it asks for, slots numbered in the order the dequeues arrived. One statement then
//! selects as many ready jobs as there are slots, in claim order, row-locked, skipping those other nodes are
//! taking; it numbers them, and leases the n-th job to the n-th slot. So the jobs taken are the ones a run of these
//! dequeues one after another would take, and the first to arrive gets the first.
//!
//! Only dequeues from one queue with no concurrency or rate limit go this way, and whose weight budget cannot stop
//! them early. A limited queue counts its running jobs and tokens under its row's lock, one claim at a time. The
//! others run one at a time, but each leases the jobs it chose in one statement too ([`lease_chosen`]).

use crate::error::Result;
use crate::names::QueueName;
use crate::ops::WriteCtx;
use crate::ops::claim::{Claim, ClaimedJob, lease_job_with};
use crate::ops::workers;
use crate::store::db::{Params, ToValue};
use crate::store::sqlite::rows::{JOB_COLUMN_COUNT, job_from_row};

/// Slots per statement: as many of the largest size as fit, then smaller ones, so that a few statement shapes
/// (each prepared once) serve any number.
const SLOT_COUNTS: [usize; 7] = [64, 32, 16, 8, 4, 2, 1];

/// Runs those of `claims` that may run together ([`Claim::runs_in_bulk`]), grouped by what they look for. Returns,
/// for each claim, the jobs it took (possibly none), or `None` for a claim left to run on its own.
pub(crate) fn claim_together(
    ctx: &mut WriteCtx<'_>,
    claims: &[&Claim],
) -> Result<Vec<Option<Vec<ClaimedJob>>>> {
    let mut taken: Vec<Option<Vec<ClaimedJob>>> = claims.iter().map(|_| None).collect();
    // Groups in the order of their first claim, each with its claims' indices in order.
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (index, claim) in claims.iter().enumerate() {
        if !claim.runs_in_bulk(ctx) {
            continue;
        }
        let key = claim.filter_key();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(index),
            None => groups.push((key, vec![index])),
        }
    }
    for (_, members) in groups {
        for &index in &members {
            workers::seen(ctx, claims[index].worker.as_str())?;
            taken[index] = Some(Vec::new());
        }
        let first = claims[members[0]];
        let queue = &first.queues[0];
        if ctx.settings.get(queue.as_str()).paused {
            continue;
        }
        let slots: Vec<usize> = members
            .iter()
            .flat_map(|&index| std::iter::repeat_n(index, claims[index].limit as usize))
            .collect();
        let mut offset = 0;
        while offset < slots.len() {
            let count = SLOT_COUNTS
                .into_iter()
                .find(|&n| n <= slots.len() - offset)
                .expect("1 is a slot count");
            let chunk: Vec<&Claim> = slots[offset..offset + count]
                .iter()
                .map(|&index| claims[index])
                .collect();
            let leased = lease_slots(ctx, first, queue, &chunk)?;
            let filled = leased.len();
            for (slot, job) in leased {
                taken[slots[offset + slot]]
                    .as_mut()
                    .expect("every member has a list")
                    .push(job);
            }
            if filled < count {
                // The queue has no more ready jobs for these: the later slots would find none either.
                break;
            }
            offset += count;
        }
    }
    Ok(taken)
}

/// Leases up to one job per slot (`slots[i]` is the claim slot `i` belongs to) from `queue`, with the select of
/// `first` (all the slots' claims look for the same thing). Returns each job with its slot, in slot order.
fn lease_slots(
    ctx: &mut WriteCtx<'_>,
    first: &Claim,
    queue: &QueueName,
    slots: &[&Claim],
) -> Result<Vec<(usize, ClaimedJob)>> {
    let select = first.select_ready(ctx, queue);
    let mut args = first.select_args(queue, slots.len() as u32);
    let now = format!("?{}", args.len() + 1);
    args.push(ctx.now_ms.to_value());
    let mut tokens = Vec::with_capacity(slots.len());
    let mut rows = Vec::with_capacity(slots.len());
    for (n, claim) in slots.iter().enumerate() {
        let token = ctx.tokens.next_token();
        tokens.push(token);
        let p = args.len() + 1;
        rows.push(format!(
            "(CAST(?{p} AS BIGINT), CAST(?{} AS TEXT), CAST(?{} AS BIGINT), CAST(?{} AS BIGINT))",
            p + 1,
            p + 2,
            p + 3
        ));
        args.extend([
            (n as i64 + 1).to_value(),
            claim.worker.as_str().to_value(),
            token.to_value(),
            claim.lease_ms().to_value(),
        ]);
    }
    let sql = lease_slots_sql(select, &now, &rows.join(","));
    let mut leased = ctx.db.query(&sql, &Params::Numbered(args), |row| {
        Ok((row.get::<i64>(JOB_COLUMN_COUNT)?, job_from_row(row)?))
    })?;
    leased.sort_by_key(|(n, _)| *n);
    let mut jobs = Vec::with_capacity(leased.len());
    for (n, job) in leased {
        let slot = usize::try_from(n - 1).expect("slots are numbered from 1");
        jobs.push((slot, slots[slot].leased(ctx, job, tokens[slot])));
    }
    Ok(jobs)
}

/// The statement of [`lease_slots`]: the jobs `select` picks, numbered in its order (a subquery's `ORDER BY`
/// carries through the scan of it), each leased to the slot of its number in `values`, which are rows of
/// (number, worker, token, lease timeout). Returns the leased jobs' columns, then their slot's number.
///
/// The update finds each job by its id alone. `select` locked it as ready, and the lock holds it so until the
/// transaction ends, so its state needs no second look. Asking for it would let the planner reach the job through
/// the ready-jobs index, walking it once per job.
pub(crate) fn lease_slots_sql(select: &str, now: &str, values: &str) -> String {
    let lease = lease_job_with(
        ["slot.s_worker", "slot.s_token", now, "slot.s_lease"],
        &format!(
            "FROM picked JOIN (VALUES {values}) AS slot (s_n, s_worker, s_token, s_lease) \
             ON slot.s_n = picked.pick_n WHERE jobs.id = picked.pick_id"
        ),
    );
    format!(
        "WITH picked AS MATERIALIZED (SELECT candidate.id AS pick_id, row_number() OVER () AS pick_n \
         FROM ({select}) AS candidate) {lease}, slot.s_n"
    )
}

/// Leases `ids`, jobs one claim picked and the select locked (a claim of several jobs, from several queues or
/// within a weight budget), many to a statement. Returns them leased, in the order given.
pub(crate) fn lease_chosen(
    ctx: &mut WriteCtx<'_>,
    claim: &Claim,
    ids: &[i64],
) -> Result<Vec<ClaimedJob>> {
    let mut claimed = Vec::with_capacity(ids.len());
    let mut offset = 0;
    while offset < ids.len() {
        let count = SLOT_COUNTS
            .into_iter()
            .find(|&n| n <= ids.len() - offset)
            .expect("1 is a slot count");
        let chunk = &ids[offset..offset + count];
        let mut args = vec![
            claim.worker.as_str().to_value(),
            ctx.now_ms.to_value(),
            claim.lease_ms().to_value(),
        ];
        let mut tokens = Vec::with_capacity(count);
        let mut rows = Vec::with_capacity(count);
        for (n, id) in chunk.iter().enumerate() {
            let token = ctx.tokens.next_token();
            tokens.push(token);
            let p = args.len() + 1;
            rows.push(format!(
                "(CAST(?{p} AS BIGINT), CAST(?{} AS BIGINT), CAST(?{} AS BIGINT))",
                p + 1,
                p + 2
            ));
            args.extend([id.to_value(), (n as i64 + 1).to_value(), token.to_value()]);
        }
        let sql = lease_chosen_sql(&rows.join(","));
        let mut leased = ctx.db.query(&sql, &Params::Numbered(args), |row| {
            Ok((row.get::<i64>(JOB_COLUMN_COUNT)?, job_from_row(row)?))
        })?;
        leased.sort_by_key(|(n, _)| *n);
        for (n, job) in leased {
            let slot = usize::try_from(n - 1).expect("rows are numbered from 1");
            claimed.push(claim.leased(ctx, job, tokens[slot]));
        }
        offset += count;
    }
    Ok(claimed)
}

/// The statement of [`lease_chosen`]: `values` are rows of (job id, number, token); `?1` is the worker, `?2` now,
/// `?3` the claim's lease timeout. Returns the leased jobs' columns, then their row's number. As in
/// [`lease_slots_sql`], the jobs are found by id alone: the select that picked them holds their locks.
pub(crate) fn lease_chosen_sql(values: &str) -> String {
    let lease = lease_job_with(
        ["?1", "slot.s_token", "?2", "?3"],
        &format!("FROM (VALUES {values}) AS slot (s_id, s_n, s_token) WHERE jobs.id = slot.s_id"),
    );
    format!("{lease}, slot.s_n")
}
