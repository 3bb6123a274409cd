//! The `cairn` binary: parse the command line, set up logging, run the command, exit with its code.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cairn_cli::Cli::parse();
    cairn_cli::logging::init(cli.log_format(), cli.verbosity());
    cairn_cli::run(cli)
}
