//! Exit codes that scripts can rely on, and how errors map to them.

use std::process::ExitCode;

use cairn::ErrorKind;

/// Every exit code `cairn` uses. The numbers are part of the interface: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// The command did what was asked.
    Success = 0,
    /// Something unexpected failed (a storage error on the server, an I/O error here).
    Failure = 1,
    /// The command line or the input was invalid (also what clap uses for usage errors).
    Invalid = 2,
    /// No job has that id.
    NotFound = 3,
    /// The lease was lost, or the job's state does not allow the operation.
    Conflict = 4,
    /// The server could not be reached, is shutting down, cannot reach its database or has no room on disk: try
    /// again later.
    Unavailable = 5,
    /// The server refused the token.
    Unauthorized = 6,
    /// `cairn dequeue` found no job before its wait ended.
    NoJob = 7,
    /// `cairn wait`: the job failed or was cancelled.
    Ended = 8,
    /// `cairn wait`: the job had not ended when the wait ran out.
    StillLive = 9,
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> Self {
        ExitCode::from(code as u8)
    }
}

/// The exit code for an engine or client error.
pub fn code_for(e: &cairn::Error) -> Code {
    match e.kind() {
        ErrorKind::InvalidInput => Code::Invalid,
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::LeaseLost | ErrorKind::InvalidState => Code::Conflict,
        ErrorKind::Unauthorized => Code::Unauthorized,
        ErrorKind::Unavailable | ErrorKind::Closed | ErrorKind::Locked | ErrorKind::StorageFull => {
            Code::Unavailable
        }
        _ => Code::Failure,
    }
}

/// Prints an error (with its causes) to stderr and picks the exit code: an engine error's own code when there
/// is one in the chain, [`Code::Failure`] otherwise. The chain ends at the first engine error, whose message already
/// says what caused it.
pub fn report(e: &anyhow::Error) -> Code {
    let mut said = Vec::new();
    for cause in e.chain() {
        said.push(cause.to_string());
        if cause.is::<cairn::Error>() {
            break;
        }
    }
    eprintln!("error: {}", said.join(": "));
    e.chain()
        .find_map(|cause| cause.downcast_ref::<cairn::Error>())
        .map_or(Code::Failure, code_for)
}
