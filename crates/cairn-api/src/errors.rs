//! Every error response (`{"error": {"kind", "field", "message"}}`) to and from the engine's [`Error`], and how this
//! crate reports an answer that does not read as Cairn's.

use cairn::{Error, ErrorKind};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// Every error response: `{"error": {"kind", "field", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
pub struct ErrorDetail {
    /// A stable name to branch on: `invalid_input`, `not_found`, `lease_lost`, `invalid_state`,
    /// `unauthorized`, `payload_too_large`, `method_not_allowed`, `unavailable`, `storage`.
    pub kind: String,
    /// For `invalid_input`, the field that broke a rule (a path such as `jobs[2].priority`).
    pub field: Option<String>,
    /// What happened, for people.
    pub message: String,
}

impl ErrorBody {
    /// The wire form of an engine error.
    pub fn from_error(e: &Error) -> Self {
        ErrorBody {
            error: ErrorDetail {
                kind: e.kind().as_str().to_owned(),
                field: e.field().map(str::to_owned),
                message: e.to_string(),
            },
        }
    }

    /// The engine error this body stands for, as a client should see it: a server that is closing or cannot
    /// open its database is [`ErrorKind::Unavailable`] (try again later), never [`ErrorKind::Closed`], which
    /// would stop a worker for good.
    pub fn into_error(self) -> Error {
        let kind = match self.error.kind.as_str() {
            "invalid_input" | "payload_too_large" => ErrorKind::InvalidInput,
            "not_found" => ErrorKind::NotFound,
            "lease_lost" => ErrorKind::LeaseLost,
            "invalid_state" => ErrorKind::InvalidState,
            "storage" => ErrorKind::Storage,
            "storage_full" => ErrorKind::StorageFull,
            "unauthorized" => ErrorKind::Unauthorized,
            _ => ErrorKind::Unavailable,
        };
        Error::from_parts(kind, self.error.field, self.error.message)
    }
}

/// An answer that did not read as Cairn's: the client reports it as [`ErrorKind::Unavailable`].
pub(crate) fn malformed(what: impl std::fmt::Display) -> Error {
    Error::from_parts(
        ErrorKind::Unavailable,
        None,
        format!("the server sent a malformed answer: {what}"),
    )
}
