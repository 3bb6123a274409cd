//! PostgreSQL sessions for reads, opened on demand and kept up to a limit. Each read is one read-only transaction
//! at `REPEATABLE READ`, so all it reads comes from one snapshot, as on SQLite.

use std::cell::RefCell;
use std::sync::Arc;

use crate::error::Result;
use crate::store::db::{Access, Db, PgTransaction, PreparedStatements};
use crate::store::pool::{Pool, Pooled};
use crate::store::postgres::hosts::Hosts;
use crate::store::postgres::session::{Opening, Session as PgSession};
use crate::store::postgres::settings::{CALL_MARGIN, READ_TIMEOUT};

/// A session and the statements prepared on it.
struct Session {
    session: PgSession,
    prepared: RefCell<PreparedStatements>,
}

/// The reader pool.
pub(crate) struct PgReaders {
    hosts: Arc<Hosts>,
    pool: Pool<Session>,
}

impl PgReaders {
    /// Readers on `hosts`' primary: `keep` sessions kept open, at most `max_open` open at once.
    pub fn new(hosts: Arc<Hosts>, keep: usize, max_open: usize) -> Self {
        PgReaders {
            hosts,
            pool: Pool::new(keep, max_open),
        }
    }

    /// Runs `f` in a read-only transaction (on the calling thread, which may block). A pooled session that
    /// PostgreSQL closed since its last use (a restart, a link that went silent) fails the first statement sent on
    /// it; the read then runs once more on a new session, since a read changes nothing and can always run again.
    pub fn read_blocking<T>(&self, mut f: impl FnMut(&Db<'_>) -> Result<T>) -> Result<T> {
        let mut session = self.session()?;
        match self.read_on(&mut session, &mut f) {
            Err(e) if session.session.is_broken() => {
                tracing::debug!(error = %e, "a pooled read session was closed; reading on a new one");
                let mut fresh = session.replace(|| self.session_new())?;
                let result = self.read_on(&mut fresh, &mut f);
                self.keep(fresh);
                result
            }
            result => {
                self.keep(session);
                result
            }
        }
    }

    /// A session from the pool, or a new one. Pooled sessions on a server that is no longer the primary (another
    /// session found it moved) are closed unused: a read there would see the old primary's data.
    fn session(&self) -> Result<Pooled<'_, Session>> {
        loop {
            let session = self.pool.take(|| self.session_new())?;
            if !session.session.is_broken() {
                return Ok(session);
            }
            session.discard();
        }
    }

    fn session_new(&self) -> Result<Session> {
        let opening = Opening {
            role: "cairn reader",
            extra: &format!("SET statement_timeout = {}", READ_TIMEOUT.as_millis()),
            notifications: None,
            call_timeout: READ_TIMEOUT + CALL_MARGIN,
            stop: None,
            writes: false,
        };
        Ok(Session {
            session: PgSession::open_with(&self.hosts, opening)?,
            prepared: RefCell::new(PreparedStatements::new()),
        })
    }

    /// One read-only transaction on `session`.
    fn read_on<T>(
        &self,
        session: &mut Session,
        f: &mut impl FnMut(&Db<'_>) -> Result<T>,
    ) -> Result<T> {
        let tx = PgTransaction::begin(&mut session.session, &session.prepared, Access::Read)?;
        let db = Db::Postgres(tx);
        let value = f(&db)?;
        db.commit()?;
        Ok(value)
    }

    /// Puts `session` back in the pool, unless its connection broke; one that only saw a failed statement is
    /// fine (its transaction was rolled back when dropped).
    fn keep(&self, session: Pooled<'_, Session>) {
        if session.session.is_broken() {
            session.discard();
        } else {
            session.give_back();
        }
    }
}

impl Drop for PgReaders {
    /// Closing a session blocks on its connection, which cannot happen on a thread that drives async tasks (the
    /// last handle to a queue may be dropped there): the sessions are closed on a thread of their own.
    fn drop(&mut self) {
        let idle = self.pool.drain();
        if !idle.is_empty() {
            let _ = std::thread::Builder::new()
                .name("cairn-readers-close".into())
                .spawn(move || drop(idle));
        }
    }
}
