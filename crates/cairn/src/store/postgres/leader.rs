//! Which node does the timed work (promotion, lease expiry, recurring slots, retention, housekeeping): the one whose
//! term in `cairn_leader` has not run out. A term lasts [`LEADER_TERM`] by the database's clock; the holder renews it
//! every [`LEAD_RENEWAL`](crate::store::writer_db::LEAD_RENEWAL) while it can reach the database, and any node takes the row once the term has passed. The
//! holder counts its term from before it asked, by its own monotonic clock, and stops a margin before the end
//! (`engine/timed.rs`), so a holder cut off from the database stops before another can start. A holder whose session
//! is gone (the node was killed, and PostgreSQL ended its session) is replaced at the next node's ask.
//!
//! Leadership saves work; it does not guard correctness: every timed statement stays right when two nodes run it
//! at once (conditions on the rows it changes, `SKIP LOCKED`), as they may for a moment around a handover.

use crate::error::Result;
use crate::store::db::{Db, Sql, params};
use crate::store::writer_db::LEADER_TERM;

/// The row's key: the only role so far.
const ROLE: &str = "timed-work";

/// Takes the row if it is free, its term has passed or the session that renewed it last is gone (its node was
/// killed: no need to wait out the term), or renews it if `$2` holds it; returns a row only then.
const ELECT: Sql = Sql::postgres_only(
    "INSERT INTO cairn_leader (role, node, pid, elected_at, expires_at) \
     VALUES ($1, $2, pg_backend_pid(), now(), now() + CAST($3 AS BIGINT) * INTERVAL '1 millisecond') \
     ON CONFLICT (role) DO UPDATE SET node = EXCLUDED.node, pid = EXCLUDED.pid, expires_at = EXCLUDED.expires_at, \
     elected_at = CASE WHEN cairn_leader.node = EXCLUDED.node THEN cairn_leader.elected_at ELSE now() END \
     WHERE cairn_leader.node = EXCLUDED.node OR cairn_leader.expires_at < now() \
     OR NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = cairn_leader.pid) \
     RETURNING node",
);

/// Gives the row up, so that another node takes over at once rather than at the end of the term.
const RESIGN: Sql = Sql::postgres_only("DELETE FROM cairn_leader WHERE role = $1 AND node = $2");

/// Asks for (or renews) the lead for node `node`, in `db`'s transaction: whether it holds it for a new term.
pub(crate) fn elect(db: &Db<'_>, node: &str) -> Result<bool> {
    let term_ms = LEADER_TERM.as_millis() as i64;
    let rows = db.query(ELECT, &params![ROLE, node, term_ms], |r| r.get::<String>(0))?;
    Ok(!rows.is_empty())
}

/// Gives up the lead, if `node` holds it.
pub(crate) fn resign(db: &Db<'_>, node: &str) -> Result<()> {
    db.execute(RESIGN, &params![ROLE, node])?;
    Ok(())
}
