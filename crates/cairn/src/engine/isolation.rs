//! How the operations of a batch are kept apart: without savepoints, where a failure after writing poisons the
//! batch (`Isolation::Shared`), or with a savepoint around each (`Isolation::PerOperation`), and what a failure
//! means for the batch's transaction.

use crate::error::Error;
use crate::ops::claim::Claim;
use crate::ops::{WriteCtx, end_savepoint, in_savepoint, savepoint};
use crate::store::db::Db;

use super::command::{Claimed, ErasedOp};

/// Applies an operation under the batch's isolation: a failure after writing poisons a shared batch; with a
/// savepoint around each operation, a failed one is rolled back to its savepoint, and the records it made with it.
pub(super) fn apply_isolated(
    ctx: &mut WriteCtx<'_>,
    op: &mut dyn ErasedOp,
    isolation: Isolation,
) -> std::result::Result<(), Failure> {
    match isolation {
        Isolation::Shared => {
            let before = ctx.db.mark();
            let mark = ctx.events.mark();
            if !op.apply(ctx) {
                ctx.events.undo_to(mark);
                check_transaction_alive(&ctx.db)?;
                if ctx.db.touched_since(before) {
                    return Err(Failure::Poisoned);
                }
            }
        }
        Isolation::PerOperation => {
            if let Err(e) = savepoint(&ctx.db) {
                op.reject(e);
                return Ok(());
            }
            let mark = ctx.events.mark();
            let applied = op.apply(ctx);
            if !applied {
                ctx.events.undo_to(mark);
                ctx.settings.seen.clear();
                check_transaction_alive(&ctx.db)?;
            }
            if let Err(e) = end_savepoint(&ctx.db, applied) {
                op.reject(e);
            }
        }
    }
    Ok(())
}

/// Runs a claim under the batch's isolation: a failure after writing poisons a shared batch.
pub(super) fn claim_isolated(
    ctx: &mut WriteCtx<'_>,
    claim: &Claim,
    isolation: Isolation,
) -> std::result::Result<Claimed, Failure> {
    match isolation {
        Isolation::PerOperation => {
            let result = in_savepoint(ctx, |ctx| claim.run(ctx));
            if result.is_err() {
                check_transaction_alive(&ctx.db)?;
            }
            Ok(result)
        }
        Isolation::Shared => {
            let before = ctx.db.mark();
            let result = claim.run(ctx);
            if result.is_err() {
                check_transaction_alive(&ctx.db)?;
                if ctx.db.touched_since(before) {
                    return Err(Failure::Poisoned);
                }
            }
            Ok(result)
        }
    }
}

/// After a failed statement: on some errors (disk full, I/O, out of memory) SQLite rolls back the whole transaction
/// by itself. Going on would run the rest of the batch outside any transaction, so the batch fails as a whole.
pub(super) fn check_transaction_alive(db: &Db<'_>) -> std::result::Result<(), Failure> {
    if !db.in_transaction() {
        return Err(Failure::Storage(Error::new(
            crate::ErrorKind::Storage,
            "the database rolled back the batch's transaction after an error",
        )));
    }
    Ok(())
}

/// How operations in a batch are kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Isolation {
    /// No savepoints: the fast path.
    Shared,
    /// A savepoint around each operation: the path after a shared batch was poisoned.
    PerOperation,
}

/// Why a batch transaction did not commit.
pub(super) enum Failure {
    /// An operation failed after writing, in a batch without savepoints; run the batch again with them.
    Poisoned,
    /// The database failed.
    Storage(Error),
}
