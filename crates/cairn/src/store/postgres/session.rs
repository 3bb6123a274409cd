//! A PostgreSQL session whose every call is bounded in time on this side of the link: the writer's and the
//! readers'.
//!
//! The settings of `connect.rs` make a link that went silent fail within seconds at the TCP level, and the server
//! bound its statements; neither helps when the peer keeps the connection open and stops answering (a hung
//! proxy or pooler, a server stopped with `SIGSTOP`). Here each call (connecting, beginning, a statement,
//! committing) has a deadline: past it, the session is marked broken and never used again, and the caller gets
//! [`ErrorKind::Unavailable`]. Runs on `tokio_postgres` with a runtime of the session's own, driven by the
//! calling thread, as the synchronous `postgres` crate does, which has no such bound.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::AsyncMessage;

use crate::error::{Error, ErrorKind, Result};
use crate::store::location::redacted;
use crate::store::postgres::connect::{
    CONNECT_TIMEOUT, STATEMENT_TIMEOUT, session_config, session_settings,
};

/// The longest a call waits for the database: a little past the server's own `statement_timeout`, so that a slow
/// statement on a live server reports the server's error, and a silent peer this one.
pub(crate) const CALL_TIMEOUT: Duration = STATEMENT_TIMEOUT.saturating_add(Duration::from_secs(1));

/// The notice the schema's batch trigger raises when a batch's counts reach an end (migration 0014).
const BATCH_DUE_NOTICE: &str = "cairn: a batch is due";

/// A session: its client, the runtime that drives its connection, and whether it broke.
pub(crate) struct Session {
    runtime: Runtime,
    client: tokio_postgres::Client,
    /// Set when a call ran out of time: the protocol may be anywhere mid-message, so the session is done.
    broken: Cell<bool>,
    /// Set when a statement made a batch due (the trigger's notice): the writer makes its callbacks before the
    /// commit. A notice comes before the answer of the statement that raised it, so it is set when that call
    /// returns.
    batch_due: Arc<AtomicBool>,
}

impl Session {
    /// Opens a session to `url`, named `role` in `pg_stat_activity`, with `extra` settings after the usual ones.
    pub fn open(url: &str, role: &str, extra: &str) -> Result<Session> {
        let config = session_config(url, role)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::storage("starting a PostgreSQL session's runtime", e))?;
        let batch_due = Arc::new(AtomicBool::new(false));
        let due = batch_due.clone();
        let connecting = async {
            let (client, mut connection) = config.connect(tokio_postgres::NoTls).await?;
            // Driven whenever the calling thread waits on a call: a current-thread runtime runs its tasks then.
            tokio::spawn(async move {
                loop {
                    match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                        Some(Ok(AsyncMessage::Notice(notice))) => {
                            if notice.message() == BATCH_DUE_NOTICE {
                                due.store(true, Ordering::Relaxed);
                            } else {
                                tracing::debug!(notice = notice.message(), "PostgreSQL said");
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
            });
            Ok::<_, tokio_postgres::Error>(client)
        };
        // The timers are made inside `block_on`, in the runtime's context. The whole of it bounded, the server's handshake with it, not only the socket's connect.
        let client = match runtime
            .block_on(async { tokio::time::timeout(CONNECT_TIMEOUT, connecting).await })
        {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                return Err(Error::storage(
                    format!("connecting to {}", redacted(url)),
                    e,
                ));
            }
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "connecting to {}: no answer within {CONNECT_TIMEOUT:?}",
                        redacted(url)
                    ),
                ));
            }
        };
        let session = Session {
            runtime,
            client,
            broken: Cell::new(false),
            batch_due,
        };
        let settings = format!("{}; {extra}", session_settings());
        let settings = settings.trim_end_matches("; ");
        session.call(session.client.batch_execute(settings), |e| {
            Error::storage("setting up a PostgreSQL session", e)
        })?;
        Ok(session)
    }

    /// Whether the session can no longer be used: its connection closed, or a call ran out of time.
    pub fn is_broken(&self) -> bool {
        self.broken.get() || self.client.is_closed()
    }

    /// The session's parts for a transaction: the client, and the runtime and flag its calls need.
    pub fn parts(&self) -> (&tokio_postgres::Client, Bounded<'_>) {
        (
            &self.client,
            Bounded {
                runtime: &self.runtime,
                broken: &self.broken,
                batch_due: &self.batch_due,
            },
        )
    }

    /// Runs `call` within [`CALL_TIMEOUT`], its error told by `failed`.
    fn call<T>(
        &self,
        call: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
        failed: impl FnOnce(tokio_postgres::Error) -> Error,
    ) -> Result<T> {
        Bounded {
            runtime: &self.runtime,
            broken: &self.broken,
            batch_due: &self.batch_due,
        }
        .call(call, failed)
    }
}

/// What a call on a session needs besides its client: the runtime to wait on, and the flag to set when it ran out
/// of time.
#[derive(Clone, Copy)]
pub(crate) struct Bounded<'a> {
    runtime: &'a Runtime,
    broken: &'a Cell<bool>,
    batch_due: &'a AtomicBool,
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

    /// Whether a call ran out of time on this session.
    pub fn is_broken(&self) -> bool {
        self.broken.get()
    }

    /// Runs `call` to its end or for [`CALL_TIMEOUT`], whichever comes first; then the session is broken.
    pub fn call<T>(
        &self,
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
            .block_on(async { tokio::time::timeout(CALL_TIMEOUT, call).await })
        {
            Ok(result) => result.map_err(failed),
            Err(_) => {
                self.broken.set(true);
                Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("the database did not answer within {CALL_TIMEOUT:?}"),
                ))
            }
        }
    }
}
