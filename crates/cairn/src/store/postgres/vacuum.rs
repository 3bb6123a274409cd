//! Vacuum of the tables a busy queue churns: a session of its own that looks at `jobs` and `job_attempts` every few
//! seconds, and runs `VACUUM` on a table once [`QueueOptions::vacuum_after`](crate::QueueOptions::vacuum_after) of
//! its rows were updated or deleted since it was last vacuumed (by this node, another, or autovacuum).
//!
//! Rows updated or deleted, not PostgreSQL's count of dead rows: reading a page prunes the dead rows in it and takes
//! them off that count, but their entries stay in the indexes, where the claims walk past them, until a vacuum.
//!
//! Why not leave it to autovacuum: every job leaves dead rows behind (its claim and its finish each write a new
//! version of its row, and retention deletes it), and the claim walks the ready-jobs index past the entries of every
//! job claimed since the last vacuum. Autovacuum looks at a database once per `autovacuum_naptime` (a minute by
//! default, a server-wide setting an application may not change), and a queue at 10,000 jobs/s leaves a million
//! dead rows in that time: completions fell by half between vacuums, and came back after each (`cairn bench
//! --scenario sustained`). Vacuumed every 10 s instead, they held flat at a quarter more on average.
//!
//! `VACUUM (SKIP_LOCKED, TRUNCATE false)` never waits for another vacuum of the same table (autovacuum's, or another
//! node's: every node runs this), and does not take the exclusive lock that giving the table's empty tail back to
//! the file system would (a queue's table fills again soon anyway). A vacuum under way when the queue closes is
//! given up. Only the tables' owner may vacuum them: a node that is not finds out once, says so, and stops looking.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::store::postgres::hosts::Hosts;
use crate::store::postgres::session::{CALL_TIMEOUT, Opening, Session};
use crate::store::postgres::settings::CALL_MARGIN;

/// The tables looked at: those every job writes and deletes rows in.
const TABLES: [&str; 2] = ["jobs", "job_attempts"];

/// How often the dead rows are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// How often the thread looks whether the queue closed, while it waits (and while a vacuum runs).
const STOP_CHECK: Duration = Duration::from_millis(250);

/// The longest one vacuum may run: far longer than a queue's tables need, short enough that a vacuum stuck
/// behind something ends and is tried again.
const VACUUM_TIMEOUT: Duration = Duration::from_secs(600);

/// Of the tables looked at, by the statistics PostgreSQL keeps: rows updated or deleted since the statistics were
/// reset, and vacuums run.
const CHANGES: &str = "SELECT relname::text, n_tup_upd + n_tup_del, vacuum_count + autovacuum_count \
                       FROM pg_stat_user_tables \
                       WHERE relid = ANY (ARRAY['jobs'::regclass, 'job_attempts'::regclass])";

/// What was seen of a table at the last look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// Its rows updated or deleted, at its last vacuum (or at the first look).
    changes_at_vacuum: i64,
    /// The vacuums run on it so far.
    vacuums: i64,
}

/// Whether this session may vacuum both tables: it owns them (or is a member of the role that does, or a
/// superuser).
const MAY_VACUUM: &str = "SELECT bool_and(pg_has_role(relowner, 'USAGE')) FROM pg_class \
                          WHERE oid = ANY (ARRAY['jobs'::regclass, 'job_attempts'::regclass])";

/// The vacuum thread, and how to stop it.
pub(crate) struct Vacuumer {
    thread: std::thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

/// Starts the thread that vacuums each of the queue's tables on `hosts`' primary once `after` of its rows (at least
/// one) were updated or deleted since its last vacuum. It stops when `stop` is set (the queue closed or was dropped).
pub(crate) fn start(
    hosts: Arc<Hosts>,
    after: u64,
    stop: Arc<AtomicBool>,
) -> std::io::Result<Vacuumer> {
    let after = after.max(1);
    let thread = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("cairn-vacuum".into())
            .spawn(move || watch(&hosts, after, &stop))?
    };
    Ok(Vacuumer { thread, stop })
}

impl Vacuumer {
    /// Stops the thread, giving up a vacuum under way (its session closes; the server ends the vacuum when it next
    /// looks at the connection, or finishes it), and waits for it to end: at most a [`STOP_CHECK`] or so.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

fn watch(hosts: &Arc<Hosts>, after: u64, stop: &AtomicBool) {
    let mut session: Option<Session> = None;
    let mut seen: Vec<(String, Seen)> = Vec::new();
    loop {
        let next = Instant::now() + CHECK_EVERY;
        while Instant::now() < next {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(STOP_CHECK);
        }
        // A session whose server is no longer the primary (another session found it moved) is opened again. The new
        // primary's statistics are its own: what was seen is forgotten.
        if session.as_ref().is_none_or(Session::is_broken) {
            seen.clear();
            session = match open(hosts, stop) {
                Ok(opened) => match may_vacuum(&opened) {
                    Ok(true) => Some(opened),
                    Ok(false) => {
                        tracing::warn!(
                            "this node's database user does not own the jobs tables, so it leaves vacuuming them \
                             to autovacuum (or to a node that does)"
                        );
                        return;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot tell whether this node may vacuum");
                        continue;
                    }
                },
                Err(e) => {
                    // The writer reports an unreachable database; this waits for the next look.
                    tracing::debug!(error = %e, url = hosts.shown(), "cannot open the vacuum session");
                    continue;
                }
            };
        }
        let session = session.as_ref().expect("opened above");
        if let Err(e) = vacuum_if_due(session, after, &mut seen, stop) {
            tracing::warn!(error = %e, "vacuuming the queue's tables failed; trying again later");
        }
    }
}

fn may_vacuum(session: &Session) -> Result<bool> {
    let row = session.call(session.client().query_one(MAY_VACUUM, &[]), |e| {
        Error::storage("reading who owns the jobs tables", e)
    })?;
    Ok(row.get::<_, Option<bool>>(0).unwrap_or(false))
}

fn open(hosts: &Arc<Hosts>, stop: &AtomicBool) -> Result<Session> {
    Session::open_with(
        hosts,
        Opening {
            role: "cairn vacuum",
            extra: &format!("SET statement_timeout = {}", VACUUM_TIMEOUT.as_millis()),
            notifications: None,
            call_timeout: CALL_TIMEOUT,
            stop: Some(stop),
            writes: true,
        },
    )
}

/// Vacuums each table with `after` rows or more updated or deleted since its last vacuum.
fn vacuum_if_due(
    session: &Session,
    after: u64,
    seen: &mut Vec<(String, Seen)>,
    stop: &AtomicBool,
) -> Result<()> {
    let rows = session.call(session.client().query(CHANGES, &[]), |e| {
        Error::storage("reading the tables' statistics", e)
    })?;
    for row in rows {
        let (table, changes, vacuums): (String, i64, i64) = (row.get(0), row.get(1), row.get(2));
        if !TABLES.contains(&table.as_str()) {
            continue;
        }
        let now = Seen {
            changes_at_vacuum: changes,
            vacuums,
        };
        let due = match seen.iter_mut().find(|(t, _)| *t == table) {
            None => {
                seen.push((table.clone(), now));
                false
            }
            // Vacuumed meanwhile (by autovacuum, or another node): count from now.
            Some((_, last)) if last.vacuums != vacuums => {
                *last = now;
                false
            }
            Some((_, last)) => {
                u64::try_from(changes - last.changes_at_vacuum).unwrap_or(0) >= after
            }
        };
        if !due || stop.load(Ordering::SeqCst) {
            continue;
        }
        let started = Instant::now();
        let vacuum = format!("VACUUM (SKIP_LOCKED, TRUNCATE false) {table}");
        let client = session.client();
        // Run while the queue is open: a stop gives it up at once.
        let until_stopped = async {
            let vacuuming = client.batch_execute(&vacuum);
            tokio::pin!(vacuuming);
            loop {
                tokio::select! {
                    done = &mut vacuuming => return Some(done),
                    () = tokio::time::sleep(STOP_CHECK) => {
                        if stop.load(Ordering::SeqCst) {
                            return None;
                        }
                    }
                }
            }
        };
        // Past the server's own bound, so that a vacuum too long ends with the server's error, and the session goes on.
        let done = session.call_within(
            VACUUM_TIMEOUT + CALL_MARGIN,
            async { Ok(until_stopped.await) },
            |e| Error::storage(format!("vacuuming {table}"), e),
        )?;
        match done {
            Some(Ok(())) => tracing::debug!(
                table,
                took_ms = started.elapsed().as_secs_f64() * 1000.0,
                "vacuumed"
            ),
            None => return Ok(()),
            Some(Err(e)) => return Err(Error::storage(format!("vacuuming {table}"), e)),
        }
    }
    Ok(())
}
