//! Opening sessions on PostgreSQL: the migrations' synchronous one, and the writer's, with the settings of
//! `settings.rs` on the host `hosts.rs` finds the primary on.

use std::sync::Arc;

use postgres::Client;

use crate::error::{Error, ErrorKind, Result};
use crate::store::postgres::hosts::Hosts;
use crate::store::postgres::session::Session;
use crate::store::postgres::settings::session_settings;

/// Opens a session on the synchronous driver, for the migrations, which need no bound of Cairn's own on each call (a
/// migration takes as long as it takes). It goes to the host the writer's session found the primary on just before
/// (see `hosts.rs`), or the first of the others that connects and takes writes. The driver bounds the socket's
/// connect, not the handshake: the host answered a moment ago.
pub(crate) fn connect(hosts: &Hosts, role: &str) -> Result<Client> {
    let mut failures: Vec<Error> = Vec::new();
    for host in hosts.order() {
        match connect_to(hosts, host, role) {
            Ok(client) => {
                hosts.found_primary(host);
                return Ok(client);
            }
            Err(e) => {
                hosts.suspect(host);
                failures.push(e);
            }
        }
    }
    // The error that passes with time, if any: another host may take writes in a moment.
    let unavailable = failures
        .iter()
        .position(|e| e.kind() == ErrorKind::Unavailable);
    match unavailable {
        Some(i) => Err(failures.swap_remove(i)),
        None => Err(failures
            .pop()
            .unwrap_or_else(|| Error::invalid("database", "names no host"))),
    }
}

/// A synchronous session on the primary of the database `url` names, connected as Cairn connects (TLS as the URL's
/// `sslmode`, `sslrootcert`, `sslcert` and `sslkey` ask, the same bounds): for the application's own transactions
/// ([`Queue::enqueue_in_postgres`](crate::Queue::enqueue_in_postgres)) and for tools, with a URL that Cairn accepts
/// and the driver alone would not.
///
/// # Errors
/// [`ErrorKind::InvalidInput`], field `database`, for a URL Cairn cannot use (naming the parameter);
/// [`ErrorKind::Unavailable`] when no host answers as the primary; [`ErrorKind::Storage`] for the server's refusal.
pub fn connect_postgres(url: &str) -> Result<Client> {
    connect(&Hosts::parse(url)?, "cairn")
}

fn connect_to(hosts: &Hosts, host: usize, role: &str) -> Result<Client> {
    let shown = || match hosts.len() {
        1 => format!("connecting to {}", hosts.shown()),
        _ => format!("connecting to {} at {}", hosts.shown(), hosts.name(host)),
    };
    let config = postgres::Config::from(hosts.config(host, role));
    let mut client = config
        .connect(hosts.tls())
        .map_err(|e| Error::storage(shown(), e))?;
    client
        .batch_execute(&session_settings())
        .map_err(|e| Error::storage("setting up a PostgreSQL session", e))?;
    let read_only: String = client
        .query_one("SHOW transaction_read_only", &[])
        .map_err(|e| Error::storage(shown(), e))?
        .get(0);
    if read_only == "on" {
        return Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "{}: read-only (a standby, or a primary set read-only), and Cairn needs the primary",
                shown()
            ),
        ));
    }
    Ok(client)
}

/// Opens the writer's session: a [`Session`] with the planner held to the plans the writer's statements are
/// written for, index lookups and ordered walks of an index joined by nested loops; and told notices, whatever the
/// database's default, since the batch trigger's notice is how the writer learns that a batch is due.
///
/// Why: the writer's statements find jobs by key (`UPDATE … FROM (VALUES …)` by id) or walk one partial index in
/// order and stop (a claim's `ORDER BY claim_key, run_at, id LIMIT n FOR UPDATE SKIP LOCKED`). PostgreSQL picks
/// other plans when its statistics are stale, and a job table's always are after a burst: for the first minute of a
/// new database, or when a backlog builds faster than autovacuum's `ANALYZE` follows, and a plan cached then is
/// kept until the next one. It then believes the table small or the ready jobs few, and scans the whole table for
/// a hash join, or gathers every ready job with a bitmap and sorts them, once per claim: 30,000 rows read to lease
/// 25 jobs, and 85,000 read and sorted to claim 50 (140 ms a claim), in `cairn bench`. Turned off, those methods
/// are still used where nothing else can run a statement (housekeeping's scans of the activity log); they are no
/// longer chosen over an index. The readers, which serve filtered listings, keep the planner's full choice.
pub(crate) fn connect_writer(hosts: &Arc<Hosts>) -> Result<Session> {
    Session::open(
        hosts,
        "cairn writer",
        "SET enable_seqscan TO off; SET enable_bitmapscan TO off; \
         SET enable_hashjoin TO off; SET enable_mergejoin TO off; SET client_min_messages TO notice",
    )
}
