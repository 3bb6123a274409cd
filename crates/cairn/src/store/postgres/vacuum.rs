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
//! cancelled. Only the tables' owner may vacuum them: a node that is not finds out once, says so, and stops looking.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::{CancelToken, Client, NoTls};

use crate::error::{Error, Result};
use crate::store::location::redacted;
use crate::store::postgres::connect::connect;

/// The tables looked at: those every job writes and deletes rows in.
const TABLES: [&str; 2] = ["jobs", "job_attempts"];

/// How often the dead rows are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// How often the thread looks whether the queue closed, while it waits.
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

/// How often a stopping vacuum is cancelled again, until its thread ends: a cancel that reaches the session just
/// before its `VACUUM` does is lost.
const CANCEL_AGAIN: Duration = Duration::from_millis(100);

/// The vacuum thread, and how to stop it.
pub(crate) struct Vacuumer {
    thread: std::thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
    /// The session's cancel token, while it is open.
    cancel: Arc<Mutex<Option<CancelToken>>>,
}

/// Starts the thread that vacuums each of the queue's tables at `url` once `after` of its rows (at least one) were
/// updated or deleted since its last vacuum. It stops when `stop` is set (the queue closed or was dropped).
pub(crate) fn start(url: String, after: u64, stop: Arc<AtomicBool>) -> std::io::Result<Vacuumer> {
    let after = after.max(1);
    let cancel = Arc::new(Mutex::new(None));
    let thread = {
        let (stop, cancel) = (stop.clone(), cancel.clone());
        std::thread::Builder::new()
            .name("cairn-vacuum".into())
            .spawn(move || watch(&url, after, &stop, &cancel))?
    };
    Ok(Vacuumer {
        thread,
        stop,
        cancel,
    })
}

impl Vacuumer {
    /// Stops the thread, cancelling a vacuum under way, and waits for it to end.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        while !self.thread.is_finished() {
            let token = self
                .cancel
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if let Some(token) = token
                && let Err(e) = token.cancel_query(NoTls)
            {
                tracing::debug!(error = %e, "could not cancel the vacuum under way; waiting for it");
            }
            std::thread::sleep(CANCEL_AGAIN);
        }
        let _ = self.thread.join();
    }
}

fn watch(url: &str, after: u64, stop: &AtomicBool, cancel: &Mutex<Option<CancelToken>>) {
    let mut session: Option<Client> = None;
    let mut seen: Vec<(String, Seen)> = Vec::new();
    loop {
        let next = Instant::now() + CHECK_EVERY;
        while Instant::now() < next {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(STOP_CHECK);
        }
        if session.as_ref().is_none_or(Client::is_closed) {
            session = match open(url) {
                Ok(mut client) => {
                    match may_vacuum(&mut client) {
                        Ok(true) => {}
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
                    }
                    *cancel
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(client.cancel_token());
                    Some(client)
                }
                Err(e) => {
                    // The writer reports an unreachable database; this waits for the next look.
                    tracing::debug!(error = %e, url = redacted(url), "cannot open the vacuum session");
                    continue;
                }
            };
        }
        let client = session.as_mut().expect("opened above");
        if let Err(e) = vacuum_if_due(client, after, &mut seen, stop) {
            tracing::warn!(error = %e, "vacuuming the queue's tables failed; trying again later");
        }
    }
}

fn may_vacuum(client: &mut Client) -> Result<bool> {
    let row = client
        .query_one(MAY_VACUUM, &[])
        .map_err(|e| Error::storage("reading who owns the jobs tables", e))?;
    Ok(row.get::<_, Option<bool>>(0).unwrap_or(false))
}

fn open(url: &str) -> Result<Client> {
    let mut client = connect(url, "cairn vacuum")?;
    client
        .batch_execute(&format!(
            "SET statement_timeout = {}",
            VACUUM_TIMEOUT.as_millis()
        ))
        .map_err(|e| Error::storage("setting up the vacuum session", e))?;
    Ok(client)
}

/// Vacuums each table with `after` rows or more updated or deleted since its last vacuum.
fn vacuum_if_due(
    client: &mut Client,
    after: u64,
    seen: &mut Vec<(String, Seen)>,
    stop: &AtomicBool,
) -> Result<()> {
    let rows = client
        .query(CHANGES, &[])
        .map_err(|e| Error::storage("reading the tables' statistics", e))?;
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
        if !due {
            continue;
        }
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let started = Instant::now();
        let done = client.batch_execute(&format!("VACUUM (SKIP_LOCKED, TRUNCATE false) {table}"));
        match done {
            Ok(()) => tracing::debug!(
                table,
                took_ms = started.elapsed().as_secs_f64() * 1000.0,
                "vacuumed"
            ),
            Err(_) if stop.load(Ordering::SeqCst) => return Ok(()),
            Err(e) => return Err(Error::storage(format!("vacuuming {table}"), e)),
        }
    }
    Ok(())
}
