//! The writer's PostgreSQL session: its client and prepared statements, the node's name, and connecting again when
//! the session breaks. The writer thread itself is `engine`; `store::writer_db` is its connection on either database.

use std::cell::RefCell;

use crate::error::{Error, Result};
use crate::store::db::{Db, PgTransaction, PreparedStatements};

/// The PostgreSQL side of a writer: its session and its prepared statements. (Whether it leads the timed work is
/// the engine's to keep, per session: see `engine/timed.rs`.)
pub(crate) struct PgWriter {
    pub client: postgres::Client,
    pub prepared: RefCell<PreparedStatements>,
    /// This node's name in notifications, so that it can tell its own from the others'.
    pub node: String,
    /// Where to connect again when the session breaks.
    pub url: String,
    /// How many times the session was opened again: what the session held (the lead, prepared statements) went
    /// with the old one.
    pub session: u64,
}

impl PgWriter {
    /// Begins a transaction, on a new session if the current one broke. Returns it and the session it runs in.
    pub fn begin(&mut self) -> Result<(Db<'_>, u64)> {
        if self.client.is_closed() {
            // The server restarted, or ended the session: the batch that found out failed; this one
            // starts on a new session.
            self.client = crate::store::postgres::connect::connect_writer(&self.url)?;
            self.prepared.get_mut().clear();
            self.session += 1;
            tracing::warn!(
                node = self.node,
                "the writer's PostgreSQL session broke; connected again"
            );
        }
        let tx = self
            .client
            .transaction()
            .map_err(|e| Error::storage("starting a write transaction", e))?;
        Ok((
            Db::Postgres(PgTransaction::new(tx, &self.prepared)),
            self.session,
        ))
    }
}
