//! `cairn token new NAME --role ROLE [--queue QUEUE]…`: a new token for `cairn serve --token-file`. The token file's entry goes to
//! stdout (`>> tokens.toml` appends it), the token itself to stderr, once: the file keeps only its SHA-256.

use clap::{Args, Subcommand};

use crate::exit::Code;

/// A bad argument, named, which exits with the code of invalid input.
fn invalid(field: &str, rule: impl std::fmt::Display) -> cairn::Error {
    cairn::Error::from_parts(
        cairn::ErrorKind::InvalidInput,
        Some(field.to_owned()),
        format!("{field}: {rule}"),
    )
}

/// `cairn token` commands.
#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// What `cairn token` can do.
#[derive(Debug, Clone, Subcommand)]
pub enum TokenCommand {
    /// Make a new random token: its token file entry on stdout, the token on stderr
    /// (`cairn token new ci --role enqueue >> tokens.toml`).
    New {
        /// Its name, which 403s and the audit trail show.
        name: String,
        /// What it may do: read, enqueue, work or admin.
        #[arg(long)]
        role: String,
        /// Limit it to this queue (repeat for more): it may then name only these queues, and jobs and batches in
        /// them. Every queue if not given.
        #[arg(long = "queue", value_name = "QUEUE")]
        queues: Vec<String>,
    },
}

/// Runs a `cairn token` command.
///
/// # Errors
/// A bad name or role (the message names which), or no randomness from the system.
pub fn run(args: TokenArgs) -> anyhow::Result<Code> {
    match args.command {
        TokenCommand::New { name, role, queues } => {
            let role = cairn_api::Role::parse(&role).ok_or_else(|| {
                invalid(
                    "role",
                    format!("must be read, enqueue, work or admin, got {role:?}"),
                )
            })?;
            let secret = cairn_server::credentials::new_secret().map_err(anyhow::Error::msg)?;
            let entry =
                cairn_server::credentials::entry(&name, role, &queues, &secret).map_err(|e| {
                    // The file's words for the entry it would refuse (`tokens[0].queues[1]: …`), said of the
                    // argument at fault.
                    let (field, rule) = e.split_once(": ").unwrap_or(("", e.as_str()));
                    match field.strip_prefix("tokens[0].queues") {
                        Some(index) => invalid(&format!("queue{index}"), rule),
                        None => invalid("name", rule),
                    }
                })?;
            print!("{entry}");
            let limited = match queues.as_slice() {
                [] => String::new(),
                queues => format!(", limited to queues {}", queues.join(", ")),
            };
            eprintln!(
                "the token of {name:?} ({role}{limited}); give it to its client now, the file keeps only its \
                 SHA-256:\n{secret}"
            );
            Ok(Code::Success)
        }
    }
}
