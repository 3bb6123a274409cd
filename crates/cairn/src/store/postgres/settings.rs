//! The settings every Cairn session on PostgreSQL gets, and its time bounds: read from the URL a queue is opened
//! with, on both sides of the link.
//!
//! Every session is bounded in time at both ends, so that a node whose link to the database goes silent (a dead
//! switch, a paused VM: no RST, nothing closes) finds out within seconds rather than after TCP's two hours, and
//! answers its clients that it cannot serve them now ([`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable)):
//! - here, TCP keepalives and a user timeout on the socket: bytes sent and not acknowledged for
//!   [`USER_TIMEOUT`], or an idle link that stops answering probes, end the session with an error;
//! - on the server, the same for its side of the socket, so that PostgreSQL ends a cut-off node's session (and
//!   releases its locks) on its own, and `statement_timeout`, so that a statement stuck behind a lock or a slow
//!   disk fails instead of holding the node's writer;
//! - and, for the writer's and readers' sessions, a deadline on each call (`session.rs`), for a peer that keeps
//!   the connection open and stops answering.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::store::location::redacted;

/// How long a connection attempt may take before it fails.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long data sent on a session may go unacknowledged before the session is ended, at both ends (Linux's
/// `TCP_USER_TIMEOUT`; it also bounds keepalive probes that go unanswered).
const USER_TIMEOUT: Duration = Duration::from_secs(5);

/// An idle session is probed after this long without traffic, then every [`KEEPALIVE_INTERVAL`], and ended after
/// [`KEEPALIVE_RETRIES`] probes go unanswered: about 6 s for a link that went silent while nothing was sent.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(3);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
const KEEPALIVE_RETRIES: u32 = 3;

/// The longest any of Cairn's own statements may run (read-only SQL has its own, shorter bound). Migrations lift
/// it for their transaction: rewriting a large table legitimately takes longer.
pub(crate) const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a read may run (a listing, a search, statistics), on the readers' sessions: reads may walk far more
/// rows than any of the writer's statements, and a slow listing of a large table is no reason to answer 503 after
/// the writer's bound. Read-only SQL has its own.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How much longer than the server's statement bound a session waits for an answer: a slow statement on a live
/// server then reports the server's error, and a silent peer this side's.
pub(crate) const CALL_MARGIN: Duration = Duration::from_secs(1);

/// How long the server keeps a session that sits in an open transaction sending nothing: Cairn's sessions send a
/// transaction's statements back to back, so only a node that hangs or lost its link does that, and its row locks
/// would hold up the others.
const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings of a session to `url`, named `role` in `pg_stat_activity` (`cairn writer`, `cairn reader`,
/// `cairn listener`), with the bounds of the module's comment where the URL sets none (`?connect_timeout=…`,
/// `keepalives_idle=…`: an operator may know the network better). `url` is without its TLS parameters, which
/// `tls.rs` reads.
pub(crate) fn session_config(url: &str, role: &str) -> Result<tokio_postgres::Config> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
        Error::invalid(
            "database",
            format!("is not a valid PostgreSQL URL ({e}): {}", redacted(url)),
        )
    })?;
    if config.get_application_name().is_none() {
        config.application_name(role);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(USER_TIMEOUT);
    }
    // Two hours is the driver's default, which no one sets on purpose.
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    Ok(config)
}

/// What every session sets first: UTC, so that nothing depends on the server's zone (Cairn keeps its own times as
/// milliseconds anyway), and the bounds of the module's comment on the server's side. The TCP settings do nothing
/// on a Unix socket, where there is no link to lose.
///
/// And no JIT compilation. PostgreSQL compiles a statement whose estimated cost passes `jit_above_cost`, and
/// optimizes and inlines it past `jit_optimize_above_cost`, at every execution, cached plan or not. Cairn's
/// statements touch a few rows by index and run in a millisecond, but estimates are no guide to that: a plan
/// with a method the writer turns off (below) is costed at billions, and so was a retention step that ran in
/// 6 ms and spent 200 ms more being compiled, in every batch of the writer while a backlog drained (completions
/// fell from 9,000/s to 77/s in `cairn bench --scenario sustained`).
pub(crate) fn session_settings() -> String {
    let ms = |d: Duration| d.as_millis();
    format!(
        "SET TIME ZONE 'UTC'; \
         SET jit = off; \
         SET statement_timeout = {}; \
         SET idle_in_transaction_session_timeout = {}; \
         SET tcp_user_timeout = {}; \
         SET tcp_keepalives_idle = {}; \
         SET tcp_keepalives_interval = {}; \
         SET tcp_keepalives_count = {}",
        ms(STATEMENT_TIMEOUT),
        ms(IDLE_IN_TRANSACTION_TIMEOUT),
        ms(USER_TIMEOUT),
        KEEPALIVE_IDLE.as_secs(),
        KEEPALIVE_INTERVAL.as_secs(),
        KEEPALIVE_RETRIES,
    )
}
