//! The command line: `cairn [-v] <command> …`. Each command's arguments live next to the code that runs it.

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
