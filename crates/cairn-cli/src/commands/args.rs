//! The arguments client commands share (`--server`, `--token`, `--json`, a lease) and the parsers that check
//! outside input at the edge: job ids, lease tokens, times, and JSON given inline, in a file or on stdin.
//! Rendering is left to `output`; each command's own flags live with the command.

use std::path::PathBuf;

use anyhow::Context as _;
use cairn::{Error, ErrorKind, JobId, JobState, Lease, WorkerId};
use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use jiff::Timestamp;
use serde_json::Value;

use crate::cli::ClientArgs;

/// What every client command takes: how to reach the server, and whether to print JSON.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// How to reach the server.
    #[command(flatten)]
    pub server: ClientArgs,
    /// Print the server's JSON body (the wire form) instead of the human form.
    #[arg(long)]
    pub json: bool,
}

impl CommonArgs {
    /// A client for the server `--server` names.
    ///
    /// # Errors
    /// When `--server` is not an `http://` URL.
    pub fn client(&self) -> anyhow::Result<cairn_client::Client> {
        self.server
            .client()
            .with_context(|| format!("using --server {:?}", self.server.server))
    }
}

/// A job and the lease it runs under: what every call a worker makes about its job needs.
#[derive(Debug, Clone, Args)]
pub struct LeaseArgs {
    /// The job's id.
    #[arg(value_parser = job_id)]
    pub id: JobId,
    /// The lease token `cairn dequeue` printed (the job's fencing token, not the server's `--token`).
    #[arg(
        long = "lease",
        env = "CAIRN_LEASE_TOKEN",
        value_name = "TOKEN",
        value_parser = lease_token,
        // Tokens are random 64-bit integers, so half of them are negative.
        allow_negative_numbers = true,
        hide_env_values = true
    )]
    pub lease_token: i64,
}

impl LeaseArgs {
    /// The lease as the client's calls take it.
    pub fn lease(&self) -> Lease {
        Lease {
            job: self.id,
            token: self.lease_token,
            // The client sends only the job and the token: the server checks the token, which is what fences, so
            // the worker and expiry here are placeholders that never leave this process.
            worker: WorkerId::parse("cairn-cli").expect("a fixed, valid worker id"),
            expires_at: Timestamp::UNIX_EPOCH,
        }
    }
}

/// Parses a job id: a positive integer.
///
/// # Errors
/// The rule and the text given, for clap to show with the argument's name.
pub fn job_id(text: &str) -> Result<JobId, String> {
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .map(JobId)
        .ok_or_else(|| format!("must be a job id (a positive integer), got {text:?}"))
}

/// A whole-number type a flag takes, and its range in words.
pub trait WholeNumber: std::str::FromStr {
    /// `from -2147483648 to 2147483647`, for the error.
    const RANGE: &'static str;
}

impl WholeNumber for i32 {
    const RANGE: &'static str = "from -2147483648 to 2147483647";
}

impl WholeNumber for u32 {
    const RANGE: &'static str = "from 0 to 4294967295";
}

impl WholeNumber for u64 {
    const RANGE: &'static str = "from 0 to 18446744073709551615";
}

/// Parses a whole number, with an error that says what is accepted (`--priority high` would otherwise say "invalid
/// digit found in string").
///
/// # Errors
/// The rule, the range and the text given.
pub fn whole_number<T: WholeNumber>(text: &str) -> Result<T, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("must be a whole number {}, got {text:?}", T::RANGE))
}

/// Parses a lease token: the decimal integer `cairn dequeue` printed.
///
/// # Errors
/// The rule and the text given.
pub fn lease_token(text: &str) -> Result<i64, String> {
    text.trim()
        .parse::<i64>()
        .map_err(|_| format!("must be a lease token (a decimal integer), got {text:?}"))
}

/// Parses a time: RFC 3339 with an offset.
///
/// # Errors
/// The rule, an example, and the text given.
pub fn time(text: &str) -> Result<Timestamp, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("must be an RFC 3339 time such as 2025-01-31T09:00:00Z, got {text:?}"))
}

/// A clap parser for a job state, listing the states in `--help` and in its error.
pub fn state() -> impl TypedValueParser<Value = JobState> {
    PossibleValuesParser::new(JobState::ALL.map(JobState::as_str)).map(|text| {
        text.parse::<JobState>()
            .expect("the possible values are the states' names")
    })
}

/// Where a JSON argument comes from: the text itself, `@FILE`, or `-` for stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonInput {
    /// The JSON text, given inline.
    Inline(String),
    /// A file holding the JSON (`@path`).
    File(PathBuf),
    /// Standard input (`-`).
    Stdin,
}

impl JsonInput {
    /// Reads the argument's form; the JSON itself is read (and checked) by [`JsonInput::read`].
    ///
    /// # Errors
    /// An `@` without a path.
    pub fn parse(text: &str) -> Result<JsonInput, String> {
        match text {
            "-" => Ok(JsonInput::Stdin),
            "@" => Err("must name a file after @, such as @data.json".to_owned()),
            _ => Ok(match text.strip_prefix('@') {
                Some(path) => JsonInput::File(PathBuf::from(path)),
                None => JsonInput::Inline(text.to_owned()),
            }),
        }
    }

    /// Reads and parses the JSON; `flag` (such as `--data`) names the argument in errors.
    ///
    /// Stdin is read with blocking I/O: it happens once, before the command talks to the server.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming `flag`, when the file or stdin cannot be read or the text is not JSON.
    pub fn read(&self, flag: &str) -> cairn::Result<Value> {
        let (text, from) = self.text_from(flag)?;
        serde_json::from_str(&text).map_err(|e| {
            let shown = if text.chars().count() > 60 {
                format!("{}…", text.chars().take(60).collect::<String>())
            } else {
                text.clone()
            };
            invalid(flag, format!("must be JSON{from} ({e}), got {shown:?}"))
        })
    }

    /// Reads the text as it is, for a caller that parses it itself (JSON lines, say).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming `flag`, when the file or stdin cannot be read.
    pub fn text(&self, flag: &str) -> cairn::Result<String> {
        self.text_from(flag).map(|(text, _)| text)
    }

    /// The text, and where it came from for errors (` in FILE`, ` on stdin`, or nothing when inline).
    fn text_from(&self, flag: &str) -> cairn::Result<(String, String)> {
        Ok(match self {
            JsonInput::Inline(text) => (text.clone(), String::new()),
            JsonInput::File(path) => (
                std::fs::read_to_string(path)
                    .map_err(|e| invalid(flag, format!("reading {}: {e}", path.display())))?,
                format!(" in {}", path.display()),
            ),
            JsonInput::Stdin => (
                std::io::read_to_string(std::io::stdin())
                    .map_err(|e| invalid(flag, format!("reading stdin: {e}")))?,
                " on stdin".to_owned(),
            ),
        })
    }
}

/// An input error naming the flag and the rule, as the engine words its own: `--data: must be JSON …`.
pub fn invalid(flag: &str, rule: impl std::fmt::Display) -> Error {
    Error::from_parts(
        ErrorKind::InvalidInput,
        Some(flag.to_owned()),
        format!("{flag}: {rule}"),
    )
}

/// Whole milliseconds, as the wire carries durations.
pub fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_positive_integers() {
        assert_eq!(job_id("12"), Ok(JobId(12)));
        for bad in ["0", "-3", "abc", "", "1.5"] {
            assert!(
                job_id(bad).unwrap_err().contains("positive integer"),
                "{bad}"
            );
        }
    }

    #[test]
    fn json_input_reads_inline_text_and_names_the_flag_when_it_is_not_json() {
        let input = JsonInput::parse(r#"{"a": 1}"#).unwrap();
        assert_eq!(input.read("--data").unwrap(), serde_json::json!({"a": 1}));
        let e = JsonInput::parse("{bad")
            .unwrap()
            .read("--data")
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert_eq!(e.field(), Some("--data"));
        assert!(e.to_string().starts_with("--data: must be JSON ("), "{e}");
    }

    #[test]
    fn json_input_reads_files_and_names_a_missing_one() {
        assert_eq!(JsonInput::parse("-"), Ok(JsonInput::Stdin));
        assert!(JsonInput::parse("@").is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.json");
        std::fs::write(&path, "[1, 2]").unwrap();
        let input = JsonInput::parse(&format!("@{}", path.display())).unwrap();
        assert_eq!(input.read("--data").unwrap(), serde_json::json!([1, 2]));
        let missing = JsonInput::File(dir.path().join("nope.json"));
        let e = missing.read("--progress").unwrap_err();
        assert_eq!(e.field(), Some("--progress"));
        assert!(e.to_string().contains("reading "), "{e}");
    }
}

/// The filters of `cairn list` and `cairn bulk`: which jobs.
#[derive(Debug, Clone, clap::Args)]
pub struct JobFilterArgs {
    /// Only jobs in this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs in this state.
    #[arg(long, value_parser = state())]
    pub state: Option<cairn::JobState>,
    /// Only jobs whose name matches this GLOB, such as `email.*`.
    #[arg(long, value_name = "GLOB")]
    pub name: Option<String>,
    /// Only jobs with this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// Only the failed jobs of this failure group (`cairn failures` lists the groups).
    #[arg(long, value_name = "GROUP")]
    pub failure_group: Option<String>,
    /// Only tracked jobs (`cairn track`), whatever their state.
    #[arg(long)]
    pub tracked: bool,
    /// Only the children of this job.
    #[arg(long, value_name = "ID", value_parser = job_id)]
    pub parent: Option<cairn::JobId>,
    /// Only the jobs of this batch.
    #[arg(long, value_name = "ID", value_parser = crate::commands::batch::batch_id)]
    pub batch: Option<cairn::BatchId>,
}

impl JobFilterArgs {
    /// The filter, with the default page.
    pub fn filter(&self) -> cairn::JobFilter {
        cairn::JobFilter {
            queue: self.queue.clone(),
            state: self.state,
            name: self.name.clone(),
            tag: self.tag.clone(),
            failure_group: self.failure_group.clone(),
            tracked: self.tracked,
            parent: self.parent,
            batch: self.batch,
            ..cairn::JobFilter::default()
        }
    }
}
