//! The writer's PostgreSQL session: its client and prepared statements, the node's name, and connecting again when
//! the session breaks. The writer thread itself is `engine`; `store::writer_db` is its connection on either database.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::store::db::{Access, Db, PgTransaction, PreparedStatements, begin};
use crate::store::postgres::connect::connect_writer;
use crate::store::postgres::hosts::Hosts;
use crate::store::postgres::session::Session;

/// After an attempt to connect failed, batches fail at once for as long as it took, up to this long, rather than
/// each wait out a connection timeout of its own: while the database does not answer (a link that went silent),
/// clients hear so quickly; while it refuses at once (a restart), the next batch tries again at once.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The PostgreSQL side of a writer: its session and its prepared statements. (Whether it leads the timed work is
/// the engine's to keep: see `engine/timed.rs`.)
pub(crate) struct PgWriter {
    /// The session, or none while the database is out of reach.
    pub session: Option<Session>,
    pub prepared: RefCell<PreparedStatements>,
    /// This node's name in notifications and in `cairn_leader`, so that it can tell its own from the others'.
    pub node: String,
    /// Where to connect again when the session breaks (the primary may have moved to another host).
    pub hosts: Arc<Hosts>,
    /// Until when, after an attempt to connect again failed, batches fail without trying.
    pub connect_again_after: Option<Instant>,
}

impl PgWriter {
    /// Begins a transaction, on a new session if the current one broke. A session PostgreSQL closed while it sat
    /// idle (a restart) is found closed only when `BEGIN` fails on it; nothing was done yet, so the transaction
    /// begins again on a new session rather than fail a batch for it.
    pub fn begin(&mut self) -> Result<Db<'_>> {
        if self.session.as_ref().is_none_or(Session::is_broken) {
            self.connect_again()?;
        }
        let session = self.session.as_mut().expect("connected just above");
        if let Err(e) = begin(session, Access::Write) {
            if !session.is_broken() {
                return Err(e);
            }
            tracing::debug!(error = %e, "the writer's PostgreSQL session was closed while idle");
            self.connect_again()?;
            begin(
                self.session.as_mut().expect("connected just above"),
                Access::Write,
            )?;
        }
        let session = self.session.as_mut().expect("begun just above");
        Ok(Db::Postgres(PgTransaction::begun(session, &self.prepared)))
    }

    /// Opens a new session in place of one that broke (the server restarted or ended it, or the link went silent):
    /// the batch that found out failed; this one starts on the new session.
    fn connect_again(&mut self) -> Result<()> {
        // The broken session is closed first: that ends its transaction on the server, whose row locks would
        // otherwise stay held until PostgreSQL notices the connection is gone (or, if the link only stalled, until
        // bytes held up in it arrive and find the socket closed).
        if self.session.take().is_some() {
            self.prepared.get_mut().clear();
        }
        if self
            .connect_again_after
            .is_some_and(|after| Instant::now() < after)
        {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "the database is out of reach; the node connects again in a moment",
            ));
        }
        let started = Instant::now();
        match connect_writer(&self.hosts) {
            Ok(session) => {
                self.session = Some(session);
                self.connect_again_after = None;
                tracing::warn!(
                    node = self.node,
                    "the writer's PostgreSQL session broke; connected again"
                );
                Ok(())
            }
            Err(e) => {
                let now = Instant::now();
                self.connect_again_after = Some(now + (now - started).min(RECONNECT_PAUSE));
                Err(e)
            }
        }
    }
}
