//! A batch's single pushes and finishes, several at a time, on PostgreSQL: there every statement is a round trip,
//! so the writer inserts a batch's plain pushes with one many-row `INSERT` and completes its plain finishes with one
//! `UPDATE … FROM (…)` that also inserts their attempts, instead of a statement or two for each.
//!
//! Only what has nothing else to do goes this way: a push with no unique key, parent, dependencies or tags, a finish
//! with no next step of a job with no parent, children, dependents or schedule. Everything else, and anything these
//! statements did not match (a lease no longer held), is applied one operation at a time as usual, after these.
//! Requests in one batch were in flight together, so applying these first is one of the orders they could have
//! run in. A failed statement aborts the transaction; the writer then runs the batch again without this path.

use crate::error::Result;
use crate::ops::WriteCtx;
use crate::ops::finish::{Finish, PlainFinish, complete_plain_many};
use crate::ops::push::{Enqueued, Push, ValidPush, insert_plain_many, validate};

/// An operation this path may answer, with where its result goes.
pub(crate) enum Bulk<'a> {
    Push(&'a Push, &'a mut Option<Result<Enqueued>>),
    Finish(&'a Finish, &'a mut Option<Result<()>>),
}

/// Answers what it can of `ops` (each with its index in the batch); returns the indices it answered.
pub(crate) fn apply(ctx: &mut WriteCtx<'_>, ops: Vec<(usize, Bulk<'_>)>) -> Result<Vec<usize>> {
    let mut answered = Vec::new();
    let mut pushes: Vec<(usize, ValidPush, &mut Option<Result<Enqueued>>)> = Vec::new();
    let mut finishes: Vec<PlainFinish<'_>> = Vec::new();
    let mut finished: Vec<(usize, &mut Option<Result<()>>)> = Vec::new();
    for (index, op) in ops {
        match op {
            Bulk::Push(push, result) => match validate(push, ctx) {
                // Refused before anything is written, as it would be on its own.
                Err(e) => {
                    *result = Some(Err(e));
                    answered.push(index);
                }
                Ok(valid) if valid.is_plain() => pushes.push((index, valid, result)),
                Ok(_) => {}
            },
            Bulk::Finish(finish, result) => match finish.plain(ctx) {
                Some(Err(e)) => {
                    *result = Some(Err(e));
                    answered.push(index);
                }
                Some(Ok(plain)) => {
                    finishes.push(plain);
                    finished.push((index, result));
                }
                None => {}
            },
        }
    }
    if !pushes.is_empty() {
        let valid: Vec<&ValidPush> = pushes.iter().map(|(_, v, _)| v).collect();
        let enqueued = insert_plain_many(&valid, ctx)?;
        for ((index, _, result), enqueued) in pushes.into_iter().zip(enqueued) {
            *result = Some(Ok(enqueued));
            answered.push(index);
        }
    }
    if !finishes.is_empty() {
        let done = complete_plain_many(&finishes, ctx)?;
        for ((index, result), done) in finished.into_iter().zip(done) {
            if done {
                *result = Some(Ok(()));
                answered.push(index);
            }
        }
    }
    Ok(answered)
}
