//! The command line: `cairn [-v] <command> …`. Each command's arguments live next to the code that runs it.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::logging::LogFormat;

/// Cairn: a durable job queue.
#[derive(Debug, Parser)]
#[command(name = "cairn", version, about, propagate_version = true, after_long_help = crate::commands::EXIT_CODES)]
pub struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace); `CAIRN_LOG` (an env-filter) overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How log lines look.
    #[arg(long, global = true, value_enum, env = "CAIRN_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Every command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server: the HTTP/JSON API on a SQLite database (`cairn.db` here by default).
    Serve(crate::serve::ServeArgs),
    /// Run a command for each job matching PATTERN: the worker manager.
    Work(crate::work::WorkArgs),
    /// Put load on a server (or an embedded queue) and report throughput and latency.
    Bench(crate::bench::BenchArgs),
    /// Preview schedules: `cairn schedule next "<spec>"`.
    Schedule(crate::schedule::ScheduleArgs),
    /// Make a token for `serve --token-file`: `cairn token new NAME --role ROLE >> tokens.toml`.
    Token(crate::token::TokenArgs),
    /// Client commands against a running server.
    #[command(flatten)]
    Client(crate::commands::ClientCommand),
}

/// How to reach a server; every command that talks to one takes these.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The server's URL.
    #[arg(long, env = "CAIRN_SERVER", default_value = "http://127.0.0.1:6670")]
    pub server: String,
    /// The server's bearer token, if it has one.
    #[arg(long, env = "CAIRN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Over HTTPS, trust this CA (PEM) instead of the machine's roots: a server's own certificate authority.
    #[arg(long, env = "CAIRN_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Over HTTPS, show this client certificate (PEM) to a server that requires one; with --client-key.
    #[arg(
        long,
        env = "CAIRN_CLIENT_CERT",
        value_name = "FILE",
        requires = "client_key"
    )]
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM, unencrypted).
    #[arg(
        long,
        env = "CAIRN_CLIENT_KEY",
        value_name = "FILE",
        requires = "client_cert"
    )]
    pub client_key: Option<PathBuf>,
}

impl ClientArgs {
    /// A client for the server these arguments name.
    ///
    /// # Errors
    /// When the URL is not a valid `http://` or `https://` URL, or a TLS file cannot be used.
    pub fn client(&self) -> cairn::Result<cairn_client::Client> {
        let tls = cairn_client::ClientTls {
            ca_file: self.ca_file.clone(),
            cert_file: self.client_cert.clone(),
            key_file: self.client_key.clone(),
        };
        let client = cairn_client::Client::new(&self.server)?.with_tls(&tls)?;
        Ok(match &self.token {
            Some(token) => client.with_token(token),
            None => client,
        })
    }
}

/// The flags of a command that talks to a server, which `cairn` also takes before the command (`cairn --server URL
/// list`), and whether each takes a value.
const CLIENT_FLAGS: [(&str, bool); 6] = [
    ("--server", true),
    ("--token", true),
    ("--ca-file", true),
    ("--client-cert", true),
    ("--client-key", true),
    ("--json", false),
];

/// `cairn`'s own flags, which stay where they are.
const OWN_FLAGS: [(&str, bool); 3] = [("--verbose", false), ("-v", false), ("--log-format", true)];

/// Moves the client flags given before the command to after it, where the command reads them: `cairn --server URL
/// queue pause mail` is `cairn queue pause mail --server URL`, and in `cairn --server URL work PAT -- CMD` they go
/// before the `--`. A command that takes no such flag (`cairn --server URL serve`) then refuses it, as it would
/// after it. Arguments from the first that is neither a client flag nor one of `cairn`'s own stay as they are.
pub fn client_flags_after_command(args: Vec<OsString>) -> Vec<OsString> {
    let takes_value = |arg: &OsString, flags: &[(&str, bool)]| {
        let arg = arg.to_str()?;
        flags.iter().find_map(|(flag, value)| {
            if arg == *flag {
                Some(*value)
            } else if arg.starts_with(flag) && arg[flag.len()..].starts_with('=') {
                // `--server=URL`: the value is in the argument.
                Some(false)
            } else {
                None
            }
        })
    };
    let mut args = args.into_iter();
    let mut kept: Vec<OsString> = args.next().into_iter().collect();
    let mut moved = Vec::new();
    let mut rest: Vec<OsString> = Vec::new();
    while let Some(arg) = args.next() {
        let is_verbosity = arg.to_str().is_some_and(|a| {
            a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| b == b'v')
        });
        let (into, value) = if let Some(value) = takes_value(&arg, &CLIENT_FLAGS) {
            (&mut moved, value)
        } else if let Some(value) = takes_value(&arg, &OWN_FLAGS) {
            (&mut kept, value)
        } else if is_verbosity {
            (&mut kept, false)
        } else {
            rest.push(arg);
            break;
        };
        into.push(arg);
        if value {
            into.extend(args.next());
        }
    }
    rest.extend(args);
    let at = rest.iter().position(|a| a == "--").unwrap_or(rest.len());
    kept.extend(rest.drain(..at));
    kept.extend(moved);
    kept.extend(rest);
    kept
}

impl Cli {
    /// The log format asked for (text by default).
    pub fn log_format(&self) -> LogFormat {
        self.log_format.unwrap_or_default()
    }

    /// The log verbosity: the server logs at info by default; client commands only warn.
    pub fn verbosity(&self) -> u8 {
        let base = u8::from(matches!(self.command, Command::Serve(_) | Command::Work(_)));
        base.saturating_add(self.verbose)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(args: &[&str]) -> Vec<String> {
        client_flags_after_command(args.iter().map(OsString::from).collect())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn client_flags_before_the_command_move_after_it() {
        assert_eq!(
            moved(&[
                "cairn",
                "--server",
                "http://h:1",
                "-v",
                "queue",
                "pause",
                "mail"
            ]),
            [
                "cairn",
                "-v",
                "queue",
                "pause",
                "mail",
                "--server",
                "http://h:1"
            ]
        );
        assert_eq!(
            moved(&[
                "cairn",
                "--token=t",
                "--json",
                "work",
                "a*",
                "--",
                "echo",
                "--json"
            ]),
            [
                "cairn",
                "work",
                "a*",
                "--token=t",
                "--json",
                "--",
                "echo",
                "--json"
            ]
        );
        assert_eq!(
            moved(&["cairn", "list", "--server", "u"]),
            ["cairn", "list", "--server", "u"]
        );
        assert_eq!(
            moved(&[
                "cairn",
                "--log-format",
                "json",
                "-vv",
                "--server",
                "u",
                "serve"
            ]),
            [
                "cairn",
                "--log-format",
                "json",
                "-vv",
                "serve",
                "--server",
                "u"
            ]
        );
        assert_eq!(moved(&["cairn", "--server"]), ["cairn", "--server"]);
    }

    #[test]
    fn a_command_after_moved_flags_parses_as_if_they_were_after_it() {
        let cli = Cli::try_parse_from(moved(&["cairn", "--server", "http://h:1", "list"])).unwrap();
        let Command::Client(_) = cli.command else {
            panic!("a client command")
        };
        let refused = Cli::try_parse_from(moved(&["cairn", "--server", "http://h:1", "serve"]));
        assert!(refused.is_err());
    }
}

/// docs/cli.md lists every command and flag `cairn --help` prints, and names none it does not.
#[cfg(test)]
mod docs {
    use std::collections::BTreeSet;

    use clap::CommandFactory;

    use super::Cli;

    const DOCS: &str = include_str!("../../../docs/cli.md");

    /// Every command's path (`queue pause`) and the long flags it takes, hidden ones left out.
    fn commands(command: &clap::Command, path: &str, out: &mut Vec<(String, BTreeSet<String>)>) {
        let flags = command
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect();
        out.push((path.to_owned(), flags));
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            let path = format!("{path} {}", sub.get_name()).trim().to_owned();
            commands(sub, &path, out);
        }
    }

    #[test]
    fn the_docs_list_every_command_and_flag_and_no_other() {
        let mut all = Vec::new();
        commands(&Cli::command(), "", &mut all);
        // A flag as a word of its own: `--throttle` is not mentioned by `--throttle-period`.
        let mentions = |flag: &str| {
            DOCS.match_indices(flag).any(|(at, _)| {
                !DOCS[at + flag.len()..]
                    .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
            })
        };
        let mut missing = Vec::new();
        for (path, flags) in &all {
            if !path.is_empty()
                && path != "help"
                && !path.ends_with(" help")
                && !DOCS.contains(&format!("cairn {path}"))
            {
                missing.push(format!("the command `cairn {path}`"));
            }
            for flag in flags {
                if flag != "--help" && flag != "--version" && !mentions(flag) {
                    missing.push(format!("`cairn {path} {flag}`"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "docs/cli.md does not mention:\n{}",
            missing.join("\n")
        );

        // The reverse: every flag the page names is one some command takes.
        // clap's own, and cargo's (`cargo install --path`, `cargo run --release`), which the page names too.
        let others = ["--help", "--version", "--path", "--release"];
        let known: BTreeSet<&str> = all
            .iter()
            .flat_map(|(_, f)| f.iter().map(String::as_str))
            .chain(others)
            .collect();
        let named: BTreeSet<&str> = DOCS
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| {
                w.starts_with("--") && w[2..].starts_with(|c: char| c.is_ascii_alphanumeric())
            })
            .collect();
        let unknown: Vec<&str> = named.difference(&known).copied().collect();
        assert!(
            unknown.is_empty(),
            "docs/cli.md names flags no command takes: {unknown:?}"
        );
    }
}
