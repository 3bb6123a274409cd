//! A batch's dequeues, many to a statement, on PostgreSQL. There every statement is a round trip, and a batch of a
//! busy server holds dozens of dequeues: the new ones, and the parked ones that the batch's pushes can now serve.
//! Dequeues that look for the same thing (one queue, the same name patterns and priority) run together instead.
//! Each gets one slot per job it asks for, slots numbered in the order the dequeues arrived. One statement then
//! selects as many ready jobs as there are slots, in claim order, row-locked, skipping those other nodes are
//! taking; it numbers them, and leases the n-th job to the n-th slot. So the jobs taken are the ones a run of these
//! dequeues one after another would take, and the first to arrive gets the first.
//!
//! When a dequeue of the group has a weight budget (a `Worker`'s always does), the budget decides where its share
//! stops, which SQL cannot see: the group's candidates are selected (`FOR UPDATE SKIP LOCKED`) and shared out in
//! claim order, each dequeue stopping at the first job that does not fit, and the jobs chosen are leased in one more
//! statement.
//!
//! Only dequeues from one queue with no concurrency or rate limit go this way. A limited queue counts its running
//! jobs and tokens under its row's lock, one claim at a time. The others run one at a time, but each leases the jobs
//! it chose in one statement too ([`lease_chosen`]).
//!
//! The slots (or the chosen jobs) go to PostgreSQL as arrays, one per column, so that one statement of one text
//! takes any number of them.

use crate::error::Result;
use crate::ops::WriteCtx;
use crate::ops::claim::{Claim, ClaimedJob, lease_jobs_postgres};
use crate::ops::rows::{JOB_COLUMN_COUNT, job_from_row};
use crate::ops::workers;
use crate::store::db::{Params, ToValue, Value};

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
        if ctx.settings.get(first.queues[0].as_str()).paused {
            continue;
        }
        let budgeted = members.iter().any(|&i| claims[i].has_budget());
        let leased = if budgeted {
            claim_within_budgets(ctx, claims, &members)?
        } else {
            claim_slots(ctx, claims, &members)?
        };
        for (index, job) in leased {
            taken[index]
                .as_mut()
                .expect("every member has a list")
                .push(job);
        }
    }
    Ok(taken)
}

/// A group with no weight budget: one slot per job each member asks for, all filled in one statement. Returns each
/// job with its claim's index, in slot order.
fn claim_slots(
    ctx: &mut WriteCtx<'_>,
    claims: &[&Claim],
    members: &[usize],
) -> Result<Vec<(usize, ClaimedJob)>> {
    let slots: Vec<usize> = members
        .iter()
        .flat_map(|&index| std::iter::repeat_n(index, claims[index].limit as usize))
        .collect();
    lease_slots(ctx, claims, &slots)
}

/// A group where some member has a weight budget: its candidates are selected (and locked) at once, shared out in
/// claim order (each member stops at the first job that does not fit, as one claim alone would), and leased.
fn claim_within_budgets(
    ctx: &mut WriteCtx<'_>,
    claims: &[&Claim],
    members: &[usize],
) -> Result<Vec<(usize, ClaimedJob)>> {
    let first = claims[members[0]];
    let queue = &first.queues[0];
    let wanted: u32 = members.iter().map(|&i| claims[i].limit).sum();
    let select = first.select_ready(ctx, queue);
    let args = first.select_args(queue, wanted);
    let candidates: Vec<(i64, u32)> = ctx
        .db
        .query(select, &Params(args), |row| Ok((row.get(0)?, row.get(1)?)))?;
    let mut chosen = Vec::with_capacity(candidates.len());
    let mut next = candidates.iter().peekable();
    for &index in members {
        let claim = claims[index];
        let mut budget = claim.max_weight.unwrap_or(u32::MAX);
        let mut count = 0;
        while count < claim.limit {
            let Some(&&(id, weight)) = next.peek() else {
                break;
            };
            if weight > budget && count > 0 {
                // Stop rather than skip: the heavy job keeps its place, for the next claim.
                break;
            }
            budget = budget.saturating_sub(weight);
            chosen.push((index, id));
            count += 1;
            next.next();
        }
    }
    lease_rows(ctx, claims, &chosen)
}

/// Leases up to one job per slot from the queue the slots' claims share (`slots[i]` is the index of the claim slot
/// `i` belongs to), in one statement. Returns each job with its claim's index, in slot order.
fn lease_slots(
    ctx: &mut WriteCtx<'_>,
    claims: &[&Claim],
    slots: &[usize],
) -> Result<Vec<(usize, ClaimedJob)>> {
    let first = claims[slots[0]];
    let queue = &first.queues[0];
    let select = first.select_ready(ctx, queue).postgres;
    let mut args = first.select_args(queue, slots.len() as u32);
    let sql = lease_slots_sql(select, args.len() + 1);
    args.push(ctx.now_ms.to_value());
    let tokens: Vec<i64> = slots.iter().map(|_| ctx.tokens.next_token()).collect();
    let mut columns: [Vec<Value<'_>>; 4] = Default::default();
    for (n, (&index, &token)) in slots.iter().zip(&tokens).enumerate() {
        let claim = claims[index];
        columns[0].push((n as i64 + 1).to_value());
        columns[1].push(claim.worker.as_str().to_value());
        columns[2].push(token.to_value());
        columns[3].push(claim.lease_ms().to_value());
    }
    let leased = ctx.db.query_arrays(&sql, args, columns.into(), |row| {
        Ok((row.get::<i64>(JOB_COLUMN_COUNT)?, job_from_row(row)?))
    })?;
    numbered(ctx, claims, slots, &tokens, leased)
}

/// Leases jobs chosen for claims and locked by the select that chose them: `chosen` holds (claim index, job id),
/// in order, all in one statement. Returns each job with its claim's index, in the order given.
fn lease_rows(
    ctx: &mut WriteCtx<'_>,
    claims: &[&Claim],
    chosen: &[(usize, i64)],
) -> Result<Vec<(usize, ClaimedJob)>> {
    if chosen.is_empty() {
        return Ok(Vec::new());
    }
    let tokens: Vec<i64> = chosen.iter().map(|_| ctx.tokens.next_token()).collect();
    let mut columns: [Vec<Value<'_>>; 5] = Default::default();
    for (n, (&(index, id), &token)) in chosen.iter().zip(&tokens).enumerate() {
        let claim = claims[index];
        columns[0].push(id.to_value());
        columns[1].push((n as i64 + 1).to_value());
        columns[2].push(claim.worker.as_str().to_value());
        columns[3].push(token.to_value());
        columns[4].push(claim.lease_ms().to_value());
    }
    let leased = ctx.db.query_arrays(
        &lease_chosen_sql(),
        vec![ctx.now_ms.to_value()],
        columns.into(),
        |row| Ok((row.get::<i64>(JOB_COLUMN_COUNT)?, job_from_row(row)?)),
    )?;
    let owners: Vec<usize> = chosen.iter().map(|(index, _)| *index).collect();
    numbered(ctx, claims, &owners, &tokens, leased)
}

/// Jobs a statement leased, each with the number of its row: sorted by it, and handed to the claim of that row
/// (`owners[n - 1]`) with the row's token.
fn numbered(
    ctx: &mut WriteCtx<'_>,
    claims: &[&Claim],
    owners: &[usize],
    tokens: &[i64],
    mut leased: Vec<(i64, crate::job::Job)>,
) -> Result<Vec<(usize, ClaimedJob)>> {
    leased.sort_by_key(|(n, _)| *n);
    leased
        .into_iter()
        .map(|(n, job)| {
            let row = usize::try_from(n - 1).expect("rows are numbered from 1");
            let index = owners[row];
            Ok((index, claims[index].leased(ctx, job, tokens[row])?))
        })
        .collect()
}

/// Leases `ids`, jobs one claim picked and the select locked (a claim of several jobs, from several queues, or
/// from a limited queue), many to a statement. Returns them leased, in the order given.
pub(crate) fn lease_chosen(
    ctx: &mut WriteCtx<'_>,
    claim: &Claim,
    ids: &[i64],
) -> Result<Vec<ClaimedJob>> {
    let chosen: Vec<(usize, i64)> = ids.iter().map(|&id| (0, id)).collect();
    Ok(lease_rows(ctx, &[claim], &chosen)?
        .into_iter()
        .map(|(_, job)| job)
        .collect())
}

/// The statement of [`lease_slots`]: the jobs `select` (PostgreSQL's text, whose parameters end before `$first`)
/// picks, numbered in its order (a subquery's `ORDER BY` carries through the scan of it), each leased to the slot of
/// its number. `$first` is now; the slots are four arrays after it: number, worker, token, lease timeout. Returns
/// the leased jobs' columns, then their slot's number.
///
/// The update finds each job by its id alone. `select` locked it as ready, and the lock holds it so until the
/// transaction ends, so its state needs no second look. Asking for it would let the planner reach the job through
/// the ready-jobs index, walking it once per job.
pub(crate) fn lease_slots_sql(select: &str, first: usize) -> String {
    let [now, numbers, workers, tokens, leases] = [0, 1, 2, 3, 4].map(|i| first + i);
    let lease = lease_jobs_postgres(
        "slot.s_worker",
        "slot.s_token",
        &format!("${now}"),
        "slot.s_lease",
        &format!(
            "FROM picked JOIN unnest(${numbers}::bigint[], ${workers}::text[], ${tokens}::bigint[], \
             ${leases}::bigint[]) AS slot (s_n, s_worker, s_token, s_lease) \
             ON slot.s_n = picked.pick_n WHERE jobs.id = picked.pick_id"
        ),
    );
    format!(
        "WITH picked AS MATERIALIZED (SELECT candidate.id AS pick_id, row_number() OVER () AS pick_n \
         FROM ({select}) AS candidate) {lease}, slot.s_n"
    )
}

/// The statement of [`lease_rows`]: `$1` is now, and arrays `$2` to `$6` the rows (job id, number, worker, token,
/// lease timeout). Returns the leased jobs' columns, then their row's number. As in [`lease_slots_sql`], the jobs
/// are found by id alone: the select that chose them holds their locks.
pub(crate) fn lease_chosen_sql() -> String {
    let lease = lease_jobs_postgres(
        "slot.s_worker",
        "slot.s_token",
        "$1",
        "slot.s_lease",
        "FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[]) \
         AS slot (s_id, s_n, s_worker, s_token, s_lease) WHERE jobs.id = slot.s_id",
    );
    format!("{lease}, slot.s_n")
}
