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
    /// The wire form of an engine error: its kind as the API names it, and its field as the request spelt it.
    pub fn from_error(e: &Error) -> Self {
        let message = e.to_string();
        let (field, message) = match e.field() {
            Some(field) => {
                let wire = wire_field(field);
                // The message starts with the engine's field name; say it the way the request spelt it.
                let message = match message.strip_prefix(field) {
                    Some(rest) => format!("{wire}{rest}"),
                    None => message,
                };
                (Some(wire), message)
            }
            None => (None, message),
        };
        ErrorBody {
            error: ErrorDetail {
                kind: wire_kind(e.kind()).1.to_owned(),
                field,
                message,
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
            // A token refused, or one whose role does not allow the route (403): neither passes with time.
            "unauthorized" | "forbidden" => ErrorKind::Unauthorized,
            _ => ErrorKind::Unavailable,
        };
        Error::from_parts(kind, self.error.field, self.error.message)
    }
}

/// The HTTP status and the wire name of an engine error's kind. The queue closing means the server is shutting
/// down, and a database out of reach in time passes too: both say to try again (`503`), here or on another node.
pub fn wire_kind(kind: ErrorKind) -> (u16, &'static str) {
    match kind {
        ErrorKind::InvalidInput => (400, "invalid_input"),
        ErrorKind::NotFound => (404, "not_found"),
        ErrorKind::LeaseLost => (409, "lease_lost"),
        ErrorKind::InvalidState => (409, "invalid_state"),
        ErrorKind::Unauthorized => (401, "unauthorized"),
        ErrorKind::Closed | ErrorKind::Locked | ErrorKind::Unavailable => (503, "unavailable"),
        ErrorKind::StorageFull => (507, "storage_full"),
        _ => (500, "storage"),
    }
}

/// The engine names a few fields differently from the JSON bodies (durations carry `_ms` on the wire, the retry
/// policy is an object); errors name the field as the client sent it, keeping the path to it: a batch prefix
/// (`jobs[2].`) or a nested object (`next.`, so that `next.delay` is `next.delay_ms`).
fn wire_field(field: &str) -> String {
    // An option's name is the same on the wire (`/v1/config/{key}`), even where it ends like a body field.
    if cairn::ConfigKey::parse(field).is_ok() {
        return field.to_owned();
    }
    let (prefix, name) = match field.rfind('.') {
        Some(at) => field.split_at(at + 1),
        None => ("", field),
    };
    let wire = match name {
        "delay" => "delay_ms",
        "wait" => "wait_ms",
        "lease_timeout" => "lease_timeout_ms",
        "timeout" => "timeout_ms",
        "per" => "per_ms",
        "every" => "every_ms",
        "backoff_initial" => "retry.initial_delay_ms",
        "backoff_multiplier" => "retry.multiplier",
        "backoff_jitter" => "retry.jitter",
        "backoff_max" => "retry.max_delay_ms",
        "max_attempts" => "retry.max_attempts",
        "name_pattern" => "names",
        other => other,
    };
    format!("{prefix}{wire}")
}

/// An answer that did not read as Cairn's: the client reports it as [`ErrorKind::Unavailable`].
pub(crate) fn malformed(what: impl std::fmt::Display) -> Error {
    Error::from_parts(
        ErrorKind::Unavailable,
        None,
        format!("the server sent a malformed answer: {what}"),
    )
}

#[cfg(test)]
mod tests {
    use super::wire_field;

    #[test]
    fn engine_field_names_become_the_wire_names() {
        assert_eq!(wire_field("lease_timeout"), "lease_timeout_ms");
        assert_eq!(
            wire_field("jobs[2].backoff_multiplier"),
            "jobs[2].retry.multiplier"
        );
        assert_eq!(wire_field("jobs[0].name"), "jobs[0].name");
        assert_eq!(wire_field("priority"), "priority");
        assert_eq!(wire_field("next.delay"), "next.delay_ms");
        assert_eq!(wire_field("next.queue"), "next.queue");
        assert_eq!(wire_field("next.depends_on"), "next.depends_on");
    }
}
