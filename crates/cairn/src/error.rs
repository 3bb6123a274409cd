//! The engine's error type. Every fallible public function returns [`Error`]; callers branch on [`Error::kind`].
//!
//! Driver errors (SQLite) are kept as the `source()` of a [`ErrorKind::Storage`] error and never appear in a signature.

use std::borrow::Cow;
use std::fmt;

/// What went wrong, for callers that branch on it (an HTTP layer maps each kind to one status code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Input broke a rule; [`Error::field`] names the field.
    InvalidInput,
    /// No job has that id.
    NotFound,
    /// The caller's lease is no longer valid: it expired, or the job was cancelled, deleted, or leased again.
    LeaseLost,
    /// The job is in a state that does not allow the operation (for example, cancelling a completed job).
    InvalidState,
    /// Another live Cairn process holds the database.
    Locked,
    /// The queue was closed.
    Closed,
    /// The database failed (I/O, corruption, a broken rule in the stored data).
    Storage,
    /// The database has no room left (a full disk, PostgreSQL's `disk_full`). Nothing was written; the same
    /// request succeeds once space is freed.
    StorageFull,
    /// A Cairn server refused the request's credentials, or their role does not allow it (from the HTTP client).
    Unauthorized,
    /// Try again shortly: the database could not be reached within a bound (a PostgreSQL restart, a link that
    /// went silent, a statement that ran out of time), PostgreSQL aborted the transaction for a conflict with
    /// another node's (a deadlock), or, from the HTTP client, a Cairn server could not be reached
    /// or did not answer as one. A request that failed this way may or may not have been applied if it failed
    /// while committing; pushes with a unique key are safe to send again.
    Unavailable,
}

impl ErrorKind {
    /// A short stable name, such as `lease_lost`, for logs and wire formats.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::LeaseLost => "lease_lost",
            ErrorKind::InvalidState => "invalid_state",
            ErrorKind::Locked => "locked",
            ErrorKind::Closed => "closed",
            ErrorKind::Storage => "storage",
            ErrorKind::StorageFull => "storage_full",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Unavailable => "unavailable",
        }
    }
}

/// An error from the engine.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    field: Option<Cow<'static, str>>,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            field: None,
            message: message.into(),
            source: None,
        }
    }

    /// Bad input: `field` names what was wrong, `rule` says what was expected.
    pub(crate) fn invalid(field: &'static str, rule: impl fmt::Display) -> Self {
        Error {
            kind: ErrorKind::InvalidInput,
            field: Some(Cow::Borrowed(field)),
            message: format!("{field}: {rule}"),
            source: None,
        }
    }

    /// Bad input reported by the database (`cairn_push`), whose field is only known at run time: `message` is
    /// `field: rule`.
    #[cfg(feature = "postgres")]
    pub(crate) fn invalid_reported(field: String, message: String) -> Self {
        Error {
            kind: ErrorKind::InvalidInput,
            field: Some(Cow::Owned(field)),
            message,
            source: None,
        }
    }

    pub(crate) fn not_found(what: impl fmt::Display) -> Self {
        Error::new(ErrorKind::NotFound, format!("{what} not found"))
    }

    pub(crate) fn lease_lost(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::LeaseLost, message)
    }

    pub(crate) fn invalid_state(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidState, message)
    }

    pub(crate) fn closed() -> Self {
        Error::new(ErrorKind::Closed, "the queue is closed")
    }

    /// A database error while `context`: [`ErrorKind::Storage`], or [`ErrorKind::Unavailable`] and
    /// [`ErrorKind::StorageFull`] for the failures that pass with time (see [`storage_kind`]).
    pub(crate) fn storage(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error {
            kind: storage_kind(&source),
            field: None,
            message: context.into(),
            source: Some(Box::new(source)),
        }
    }

    /// Places the error at a position in a batch: field `jobs[3].name`, message `jobs[3].name: must not be empty`
    /// (the same paths the server's body decoder gives).
    pub(crate) fn in_batch(self, index: usize) -> Self {
        self.within(&format!("jobs[{index}]"))
    }

    /// Places the error inside `path`: field `name` becomes `path.name`, and the message says so; an error
    /// without a field is prefixed with `path: `.
    pub fn within(mut self, path: &str) -> Self {
        match self.field.take() {
            Some(field) => {
                let full = format!("{path}.{field}");
                let rule = self
                    .message
                    .strip_prefix(field.as_ref())
                    .unwrap_or(&self.message);
                self.message = match rule.strip_prefix(": ") {
                    Some(rule) => format!("{full}: {rule}"),
                    None => format!("{path}: {}", self.message),
                };
                self.field = Some(Cow::Owned(full));
            }
            None => self.message = format!("{path}: {}", self.message),
        }
        self
    }

    /// The same input error reported under another field name: `repeat: …` becomes `schedule: …`.
    pub fn renamed(mut self, field: &'static str) -> Self {
        if let Some(rest) = self
            .field
            .replace(Cow::Borrowed(field))
            .and_then(|old| self.message.strip_prefix(old.as_ref()))
        {
            self.message = format!("{field}{rest}");
        }
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// For [`ErrorKind::InvalidInput`], the field that broke a rule.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// An error rebuilt from its parts, as a client does with an error a Cairn server sent back.
    pub fn from_parts(kind: ErrorKind, field: Option<String>, message: impl Into<String>) -> Self {
        Error {
            kind,
            field: field.map(Cow::Owned),
            message: message.into(),
            source: None,
        }
    }

    /// An error of `kind` caused by `source` (a transport error in a client, say).
    pub fn with_source(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error {
            kind,
            field: None,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The message without the source chain.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether no job has the given id.
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }

    /// Whether the caller no longer holds the job's lease.
    pub fn is_lease_lost(&self) -> bool {
        self.kind == ErrorKind::LeaseLost
    }

    /// Whether the input broke a rule.
    pub fn is_invalid_input(&self) -> bool {
        self.kind == ErrorKind::InvalidInput
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source)
                if matches!(
                    self.kind,
                    ErrorKind::Storage | ErrorKind::StorageFull | ErrorKind::Unavailable
                ) =>
            {
                write!(f, "{}: {source}", self.message)?;
                // PostgreSQL's driver says only "db error" or "error connecting to server" at the top; what the
                // server or the socket said is below.
                #[cfg(feature = "postgres")]
                if source.is::<postgres::Error>() {
                    let mut cause = source.source();
                    while let Some(c) = cause {
                        write!(f, ": {c}")?;
                        cause = c.source();
                    }
                }
                Ok(())
            }
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// What kind of failure a database error is: one that passes with time (the database unreachable or out of room)
/// is told apart, so that callers are told to come back rather than that something broke.
fn storage_kind(source: &(dyn std::error::Error + 'static)) -> ErrorKind {
    #[cfg(feature = "sqlite")]
    if let Some(e) = source.downcast_ref::<rusqlite::Error>()
        && e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
    {
        return ErrorKind::StorageFull;
    }
    #[cfg(feature = "postgres")]
    if let Some(e) = source.downcast_ref::<postgres::Error>() {
        return postgres_error_kind(e);
    }
    ErrorKind::Storage
}

/// PostgreSQL's errors that pass with time: the session closed or could not be opened (a restart, a link that
/// went silent and was cut by keepalives or the user timeout), the server shutting down or starting, a write
/// refused as read-only (the server a standby, or a primary demoted or set read-only in a failover: the session is
/// opened again on the new primary), out of connections, a statement past its time bound, a transaction aborted for a conflict with another node's (a
/// deadlock, or a serialization failure: done again, it goes through); and a full disk.
#[cfg(feature = "postgres")]
fn postgres_error_kind(e: &postgres::Error) -> ErrorKind {
    use postgres::error::SqlState;
    if e.is_closed() {
        return ErrorKind::Unavailable;
    }
    match e.code() {
        Some(code) if *code == SqlState::DISK_FULL => ErrorKind::StorageFull,
        Some(code)
            if code.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::READ_ONLY_SQL_TRANSACTION,
                    SqlState::QUERY_CANCELED,
                    SqlState::TOO_MANY_CONNECTIONS,
                    SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
                    SqlState::T_R_DEADLOCK_DETECTED,
                    SqlState::T_R_SERIALIZATION_FAILURE,
                ]
                .contains(code) =>
        {
            ErrorKind::Unavailable
        }
        Some(_) => ErrorKind::Storage,
        // No SQLSTATE: the driver's own failure, which is the connection's (connecting, reading, writing).
        None if has_io_source(e) => ErrorKind::Unavailable,
        None => ErrorKind::Storage,
    }
}

/// Whether an I/O error (a refused connection, a timeout, a reset) is among `e`'s causes.
#[cfg(feature = "postgres")]
fn has_io_source(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = e.source();
    while let Some(c) = cause {
        if c.is::<std::io::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}

#[cfg(feature = "sqlite")]
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::storage("database error", e)
    }
}

impl Clone for Error {
    /// Clones keep the kind, field and message; a storage source is flattened into the message.
    fn clone(&self) -> Self {
        Error {
            kind: self.kind,
            field: self.field.clone(),
            message: self.to_string(),
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_input_names_field_and_rule() {
        let e = Error::invalid("priority", "must be an integer, got \"high\"");
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.field(), Some("priority"));
        assert_eq!(e.to_string(), "priority: must be an integer, got \"high\"");
    }

    /// Two sessions that lock two rows in opposite orders: PostgreSQL aborts one, and that is worth trying again.
    #[cfg(feature = "postgres")]
    #[test]
    fn a_deadlock_on_postgresql_is_a_failure_that_passes() {
        use std::sync::{Arc, Barrier};

        let db = crate::test_support::TestDatabase::new();
        let url = db.url.clone();
        std::thread::spawn(move || {
            let mut setup = postgres::Client::connect(&url, postgres::NoTls).unwrap();
            setup
                .batch_execute("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1), (2)")
                .unwrap();
            let both_hold_one = Arc::new(Barrier::new(2));
            let lock_in_order = |first: i32, second: i32| {
                let (url, barrier) = (url.clone(), both_hold_one.clone());
                std::thread::spawn(move || {
                    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                    let mut tx = client.transaction().unwrap();
                    tx.execute("UPDATE t SET id = id WHERE id = $1", &[&first])
                        .unwrap();
                    barrier.wait();
                    let second = tx.execute("UPDATE t SET id = id WHERE id = $1", &[&second]);
                    second.and_then(|_| tx.commit())
                })
            };
            let (a, b) = (lock_in_order(1, 2), lock_in_order(2, 1));
            let results = [a.join().unwrap(), b.join().unwrap()];
            let aborted: Vec<&postgres::Error> =
                results.iter().filter_map(|r| r.as_ref().err()).collect();
            assert_eq!(aborted.len(), 1, "{results:?}");
            assert_eq!(postgres_error_kind(aborted[0]), ErrorKind::Unavailable);
        })
        .join()
        .unwrap();
    }
}
