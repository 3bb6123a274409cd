//! Which node does the timed work (lease expiry, promotion, template slots, retention, housekeeping): the one that
//! holds a session advisory lock. The writer asks for it when its timed work is due; a node that does not lead asks
//! again every `LEADER_RETRY` (`store/writer_db.rs`).

use crate::error::Result;
use crate::store::db::{Db, Sql, params};

/// The session advisory lock the node doing the timed work holds (lease expiry, promotion, template slots,
/// retention, housekeeping): "cairn-lead" in ASCII. A session lock, so that it lives as long as the node's
/// connection: when the node dies, PostgreSQL ends its session and another node takes the lock.
const LEADER_LOCK: i64 = 0x6361_6972_6e6c_6561;

/// Asks for the lead of the timed work, in `db`'s transaction (a session lock outlives it): whether this node now
/// holds it.
pub(crate) fn take_lead(db: &Db<'_>) -> Result<bool> {
    db.query_one(
        Sql::postgres_only("SELECT pg_try_advisory_lock(CAST($1 AS BIGINT))"),
        &params![LEADER_LOCK],
        |r| r.get::<bool>(0),
    )
}
