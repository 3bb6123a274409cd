//! The `cairn` binary: parse the command line, set up logging, run the command, exit with its code.

use std::process::ExitCode;

use clap::Parser;

// Memory allocated on one thread (the queue's writer) is freed on others (the HTTP workers); mimalloc handles that
// far more cheaply than glibc's allocator (see BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cairn_cli::Cli::parse_from(cairn_cli::cli::client_flags_after_command(
        std::env::args_os().collect(),
    ));
    cairn_cli::logging::init(cli.log_format(), cli.verbosity());
    cairn_cli::run(cli)
}
