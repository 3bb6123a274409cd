//! What a node's commit tells the other nodes: the queues it made ready, that it changed settings, and the next due
//! time it wrote. PostgreSQL delivers the notifications when (and only if) the transaction commits; each node's
//! `listener` hears them.

use crate::error::Result;
use crate::store::db::{Db, Sql, params};

/// The channel on which a commit that made jobs ready tells the other nodes which queues: the payload is the
/// node's name, then one queue per line.
pub(crate) const READY_CHANNEL: &str = "cairn_ready";

/// The channel on which a commit that changed a queue's settings or an option tells the other nodes to load
/// theirs again; the payload is the node's name.
pub(crate) const SETTINGS_CHANNEL: &str = "cairn_settings";

/// The channel on which a commit that ended jobs some node waits for ([`crate::Jobs::wait`]) says which: one
/// notification per job, its id the payload. The statement that writes a transaction's activity sends them (`postgres/activity.rs`).
pub(crate) const JOB_ENDED_CHANNEL: &str = "cairn_job_ended";

/// The channel on which a node that does not lead the timed work tells the leader of a due time it wrote (a delayed
/// job, a retry, a lease, a template's slot) sooner than the last it told: the payload is the node's name, then the
/// time in milliseconds. Without it the leader would find the time at its next batch, or at the latest at the renewal
/// of its term, up to a second late.
pub(crate) const DUE_CHANNEL: &str = "cairn_due";

/// PostgreSQL's limit on a notification's payload is 8000 bytes; a larger set of queues goes in several.
const MAX_PAYLOAD: usize = 7000;

/// In a batch about to commit: tells the other nodes which queues gained ready jobs, and whether settings changed.
pub(crate) fn notify<'q>(
    node: &str,
    db: &Db<'_>,
    ready: impl Iterator<Item = &'q str>,
    settings_changed: bool,
) -> Result<()> {
    // Settings first: PostgreSQL delivers a transaction's notifications in order, so another node loads the
    // settings (a queue resumed, a limit raised) before it serves the queues this commit made ready.
    if settings_changed {
        db.query(
            Sql::postgres_only("SELECT pg_notify($1, $2)"),
            &params![SETTINGS_CHANNEL, node],
            |_| Ok(()),
        )?;
    }
    let mut payload = node.to_owned();
    let flush = |payload: &mut String| -> Result<()> {
        if payload.len() > node.len() {
            db.query(
                Sql::postgres_only("SELECT pg_notify($1, $2)"),
                &params![READY_CHANNEL, payload.as_str()],
                |_| Ok(()),
            )?;
        }
        payload.truncate(node.len());
        Ok(())
    };
    for queue in ready {
        if payload.len() + 1 + queue.len() > MAX_PAYLOAD {
            flush(&mut payload)?;
        }
        payload.push('\n');
        payload.push_str(queue);
    }
    flush(&mut payload)?;
    Ok(())
}

/// In a batch about to commit on a node that does not lead the timed work: tells the leader that something is due at
/// `at_ms`.
pub(crate) fn notify_due(node: &str, db: &Db<'_>, at_ms: i64) -> Result<()> {
    db.query(
        Sql::postgres_only("SELECT pg_notify($1, $2)"),
        &params![DUE_CHANNEL, format!("{node}\n{at_ms}")],
        |_| Ok(()),
    )?;
    Ok(())
}
