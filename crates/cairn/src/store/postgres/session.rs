//! A PostgreSQL session whose every call is bounded in time on this side of the link, on the writable primary: the
//! writer's, the readers', the listener's and the vacuum's.
//!
//! The settings of `connect.rs` make a link that went silent fail within seconds at the TCP level, and the server
//! bound its statements; neither helps when the peer keeps the connection open and stops answering (a hung
//! proxy or pooler, a server stopped with `SIGSTOP`). Here each call (connecting, beginning, a statement,
//! committing) has a deadline: past it, the session is marked broken and never used again, and the caller gets
//! [`ErrorKind::Unavailable`]. Runs on `tokio_postgres` with a runtime of the session's own, driven by the
//! calling thread, as the synchronous `postgres` crate does, which has no such bound.
//!
//! A session is opened on the first of the URL's hosts (`hosts.rs`) that answers within its own bound as a server
//! that takes writes, and is done once it finds the server is no longer that (a write refused as read-only, the
//! server shutting down) or the primary moved: opened again, it finds the primary wherever it is now.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::runtime::Runtime;
use tokio::sync::mpsc::UnboundedSender;
use tokio_postgres::error::SqlState;
use tokio_postgres::{AsyncMessage, Notification};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, ErrorKind, Result};
use crate::store::postgres::hosts::Hosts;
use crate::store::postgres::settings::{
    CALL_MARGIN, CONNECT_TIMEOUT, STATEMENT_TIMEOUT, session_settings,
};

/// The longest a call waits for the database, unless the session says otherwise: a little past the server's own
/// `statement_timeout`, so that a slow statement on a live server reports the server's error, and a silent peer this
/// one.
pub(crate) const CALL_TIMEOUT: Duration = STATEMENT_TIMEOUT.saturating_add(CALL_MARGIN);

/// The notice the schema's batch trigger raises when a batch's counts reach an end (migration 0014).
const BATCH_DUE_NOTICE: &str = "cairn: a batch is due";

/// A session: its client, the runtime that drives its connection, and whether it broke.
pub(crate) struct Session {
    runtime: Runtime,
    client: tokio_postgres::Client,
    /// Set when a call ran out of time (the protocol may be anywhere mid-message), or found that the server is no
    /// longer the writable primary: the session is done.
    broken: Cell<bool>,
    /// Set when a statement made a batch due (the trigger's notice): the writer makes its callbacks before the
    /// commit. A notice comes before the answer of the statement that raised it, so it is set when that call
    /// returns.
    batch_due: Arc<AtomicBool>,
    /// The hosts it was opened from, which it tells when it breaks.
    hosts: Arc<Hosts>,
    /// The host it is on, and the epoch of the hosts it was opened in.
    host: usize,
    epoch: u64,
    /// The longest a call waits.
    call_timeout: Duration,
    /// Whether a write refused as read-only means the server is no longer the primary (see [`Opening`]).
    writes: bool,
}

/// How a session is opened: its name in `pg_stat_activity`, settings after the usual ones, where the server's
/// notifications go (the listener's session; others have none), and the longest a call waits.
pub(crate) struct Opening<'a> {
    pub role: &'a str,
    pub extra: &'a str,
    pub notifications: Option<UnboundedSender<Notification>>,
    /// Past the server's `statement_timeout` for the session (by [`CALL_MARGIN`]).
    pub call_timeout: Duration,
    /// When set, no further host is tried: the queue is closing (the listener's and the vacuum's threads).
    pub stop: Option<&'a AtomicBool>,
    /// Whether the session writes: a write refused as read-only then means the server is no longer the primary.
    /// A session of read-only transactions (read-only SQL) may have a query of its own refused that way.
    pub writes: bool,
}

impl Session {
    /// Opens a session on the first of `hosts` (in their order) that answers as the writable primary, named
    /// `role` in `pg_stat_activity`, with `extra` settings after the usual ones. Each host's attempt (connecting,
    /// the settings, asking whether it is writable) is bounded by the connect timeout on its own.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when no host answers in time or as the primary (and every failure passes with
    /// time); [`ErrorKind::Storage`] otherwise (a password refused, say), naming each host and what it said.
    pub fn open(hosts: &Arc<Hosts>, role: &str, extra: &str) -> Result<Session> {
        Session::open_with(
            hosts,
            Opening {
                role,
                extra,
                notifications: None,
                call_timeout: CALL_TIMEOUT,
                stop: None,
                writes: true,
            },
        )
    }

    /// [`Session::open`] with every part of [`Opening`].
    pub fn open_with(hosts: &Arc<Hosts>, opening: Opening<'_>) -> Result<Session> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::storage("starting a PostgreSQL session's runtime", e))?;
        let batch_due = Arc::new(AtomicBool::new(false));
        let settings = format!("{}; {}", session_settings(), opening.extra);
        let settings = settings.trim_end_matches("; ");
        let mut failures = Vec::new();
        for host in hosts.order() {
            let config = hosts.config(host, opening.role);
            let bound = config
                .get_connect_timeout()
                .copied()
                .unwrap_or(CONNECT_TIMEOUT);
            let attempt = connect_to(
                config,
                hosts.tls(),
                settings,
                batch_due.clone(),
                opening.notifications.clone(),
            );
            // The timers are made inside `block_on`, in the runtime's context. The whole of it bounded, the server's
            // handshake and the settings with it, not only the socket's connect.
            match runtime.block_on(async { tokio::time::timeout(bound, attempt).await }) {
                Ok(Ok(client)) => {
                    let epoch = hosts.found_primary(host);
                    return Ok(Session {
                        runtime,
                        client,
                        broken: Cell::new(false),
                        batch_due,
                        hosts: hosts.clone(),
                        host,
                        epoch,
                        call_timeout: opening.call_timeout,
                        writes: opening.writes,
                    });
                }
                // The primary found read-only: it turned (a switchover), and the sessions on it go too.
                Ok(Err(HostFailure::ReadOnly)) => {
                    hosts.lost(host, hosts.epoch());
                    failures.push((host, HostFailure::ReadOnly));
                }
                Ok(Err(failure)) => {
                    hosts.suspect(host);
                    failures.push((host, failure));
                }
                Err(_) => {
                    hosts.suspect(host);
                    failures.push((host, HostFailure::Silent(bound)));
                }
            }
            if opening.stop.is_some_and(|stop| stop.load(Ordering::SeqCst)) {
                break;
            }
        }
        Err(no_primary(hosts, failures))
    }

    /// Whether the session can no longer be used: its connection closed, a call ran out of time or found the
    /// server no longer the primary, or the primary moved since it was opened.
    pub fn is_broken(&self) -> bool {
        self.broken.get() || self.client.is_closed() || self.hosts.epoch() != self.epoch
    }

    /// The session's parts for a transaction: the client, and the runtime and flag its calls need.
    pub fn parts(&self) -> (&tokio_postgres::Client, Bounded<'_>) {
        (&self.client, self.bounded())
    }

    /// Runs `call` within the session's bound, its error told by `failed`.
    pub fn call<T>(
        &self,
        call: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
        failed: impl FnOnce(tokio_postgres::Error) -> Error,
    ) -> Result<T> {
        self.bounded().call(call, failed)
    }

    /// Runs `call` within `timeout` rather than the session's bound (a vacuum), its error told by `failed`.
    pub fn call_within<T>(
        &self,
        timeout: Duration,
        call: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
        failed: impl FnOnce(tokio_postgres::Error) -> Error,
    ) -> Result<T> {
        self.bounded().call_within(timeout, call, failed)
    }

    /// Drives the session for up to `wait`, for a future that needs it driven: a notification to come (the
    /// listener's), or a stop.
    pub fn wait_for<T>(&self, wait: Duration, until: impl Future<Output = T>) -> Option<T> {
        self.runtime
            .block_on(async { tokio::time::timeout(wait, until).await })
            .ok()
    }

    /// The client, for futures to give [`Session::call`].
    pub fn client(&self) -> &tokio_postgres::Client {
        &self.client
    }

    fn bounded(&self) -> Bounded<'_> {
        Bounded {
            runtime: &self.runtime,
            broken: &self.broken,
            batch_due: &self.batch_due,
            hosts: &self.hosts,
            host: self.host,
            epoch: self.epoch,
            timeout: self.call_timeout,
            writes: self.writes,
        }
    }
}

/// Why a host was not taken.
enum HostFailure {
    /// It did not answer within the bound.
    Silent(Duration),
    /// It answered as a server that does not take writes: a standby, or a primary turned read-only.
    ReadOnly,
    /// The driver's error: refused, closed, a password refused.
    Driver(tokio_postgres::Error),
}

/// Connects to the one host of `config`, sets the session up, and checks that the server takes writes.
async fn connect_to(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    settings: &str,
    batch_due: Arc<AtomicBool>,
    notifications: Option<UnboundedSender<Notification>>,
) -> std::result::Result<tokio_postgres::Client, HostFailure> {
    let (client, connection) = config.connect(tls).await.map_err(HostFailure::Driver)?;
    // Driven whenever the calling thread waits on a call: a current-thread runtime runs its tasks then.
    tokio::spawn(drive(connection, batch_due, notifications));
    client
        .batch_execute(settings)
        .await
        .map_err(HostFailure::Driver)?;
    // What libpq's `target_session_attrs=read-write` asks: on a standby, and on a primary set read-only, "on".
    let answer = client
        .simple_query("SHOW transaction_read_only")
        .await
        .map_err(HostFailure::Driver)?;
    let read_only = answer.iter().any(|message| {
        matches!(message, tokio_postgres::SimpleQueryMessage::Row(row) if row.get(0) == Some("on"))
    });
    if read_only {
        return Err(HostFailure::ReadOnly);
    }
    Ok(client)
}

/// Reads what the server sends besides answers, until the connection ends: notices (the batch trigger's), and
/// notifications for the listener.
async fn drive<Tls: AsyncRead + AsyncWrite + Unpin>(
    mut connection: tokio_postgres::Connection<tokio_postgres::Socket, Tls>,
    batch_due: Arc<AtomicBool>,
    notifications: Option<UnboundedSender<Notification>>,
) {
    loop {
        match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            Some(Ok(AsyncMessage::Notice(notice))) => {
                if notice.message() == BATCH_DUE_NOTICE {
                    batch_due.store(true, Ordering::Relaxed);
                } else {
                    tracing::debug!(notice = notice.message(), "PostgreSQL said");
                }
            }
            Some(Ok(AsyncMessage::Notification(notification))) => {
                if let Some(to) = &notifications {
                    let _ = to.send(notification);
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::debug!(error = %e, "a PostgreSQL session ended");
                break;
            }
            None => break,
        }
    }
}

/// The error of a session that found no primary among `hosts`: each host and why, `Unavailable` when any reason
/// passes with time.
fn no_primary(hosts: &Hosts, failures: Vec<(usize, HostFailure)>) -> Error {
    let mut kind = None;
    let mut reasons = Vec::new();
    for (host, failure) in failures {
        let (this, reason) = match failure {
            HostFailure::Silent(bound) => (
                ErrorKind::Unavailable,
                format!("no answer within {bound:?}"),
            ),
            HostFailure::ReadOnly => (
                ErrorKind::Unavailable,
                "read-only (a standby, or a primary set read-only), and Cairn needs the primary"
                    .to_owned(),
            ),
            HostFailure::Driver(e) => {
                let e = Error::storage(String::new(), e);
                let reason = e.to_string().trim_start_matches(": ").to_owned();
                (e.kind(), reason)
            }
        };
        if this == ErrorKind::Unavailable || kind.is_none() {
            kind = Some(this);
        }
        reasons.push(match hosts.len() {
            1 => reason,
            _ => format!("{}: {reason}", hosts.name(host)),
        });
    }
    let mut message = format!("connecting to {}: {}", hosts.shown(), reasons.join("; "));
    if hosts.len() == 1 && message.contains("read-only") {
        message.push_str(
            "; to follow a failover, name every host of the cluster in the URL \
             (postgres://user@host-a:5432,host-b:5432/db)",
        );
    }
    Error::new(kind.unwrap_or(ErrorKind::Unavailable), message)
}

/// Whether a call's error says the server is not (or no longer) the writable primary: a write refused as
/// read-only (a standby, a primary turned read-only), or the server shutting down or starting. The session is
/// done: opened again, it finds the primary, wherever it is now.
fn is_not_primary(e: &tokio_postgres::Error, writes: bool) -> bool {
    e.code().is_some_and(|code| {
        (writes && *code == SqlState::READ_ONLY_SQL_TRANSACTION)
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
            ]
            .contains(code)
    })
}

/// What a call on a session needs besides its client: the runtime to wait on, and the flags to set when it ran out of
/// time or found the server no longer the primary.
#[derive(Clone, Copy)]
pub(crate) struct Bounded<'a> {
    runtime: &'a Runtime,
    broken: &'a Cell<bool>,
    batch_due: &'a AtomicBool,
    hosts: &'a Hosts,
    host: usize,
    /// The epoch of the hosts the session was opened in.
    epoch: u64,
    /// The session's bound on a call.
    timeout: Duration,
    /// See [`Opening::writes`].
    writes: bool,
}

impl Bounded<'_> {
    /// Whether a statement made a batch due since the last time this was asked (see [`Session`]).
    pub fn take_batch_due(&self) -> bool {
        self.batch_due.swap(false, Ordering::Relaxed)
    }

    /// Notes that a batch is due, for a statement that made it so without the trigger.
    pub fn note_batch_due(&self) {
        self.batch_due.store(true, Ordering::Relaxed);
    }

    /// Whether a call ran out of time on this session, or found the server no longer the primary.
    pub fn is_broken(&self) -> bool {
        self.broken.get()
    }

    /// Runs `call` to its end or for the session's bound, whichever comes first; then the session is broken.
    pub fn call<T>(
        &self,
        call: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
        failed: impl FnOnce(tokio_postgres::Error) -> Error,
    ) -> Result<T> {
        self.call_within(self.timeout, call, failed)
    }

    /// [`Bounded::call`] with a bound of its own.
    pub fn call_within<T>(
        &self,
        timeout: Duration,
        call: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
        failed: impl FnOnce(tokio_postgres::Error) -> Error,
    ) -> Result<T> {
        if self.broken.get() {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "the PostgreSQL session broke earlier in this transaction",
            ));
        }
        match self
            .runtime
            .block_on(async { tokio::time::timeout(timeout, call).await })
        {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                if is_not_primary(&e, self.writes) {
                    self.broken.set(true);
                    self.hosts.lost(self.host, self.epoch);
                }
                Err(failed(e))
            }
            Err(_) => {
                self.broken.set(true);
                self.hosts.lost(self.host, self.epoch);
                Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("the database did not answer within {timeout:?}"),
                ))
            }
        }
    }
}
