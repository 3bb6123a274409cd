//! The `cairn` command: `serve` (the server), `work` (the worker manager), `bench` (load generator), `schedule`
//! (preview schedules), and client commands against a running server. `main.rs` only parses and dispatches; every
//! command is library code that tests can call.
//!
//! Modules: `cli` (the command line), `config` (the server's settings from flags, environment and a TOML file),
//! `serve`, `commands` (the client commands and their output), `work` (the worker manager), `bench`, `schedule`,
//! `exit` (exit codes), `duration` (human durations such as `30s`), `logging`.

pub mod bench;
pub mod cli;
pub mod commands;
pub mod config;
pub mod duration;
pub mod exit;
pub mod logging;
pub mod schedule;
pub mod serve;
pub mod token;
pub mod work;

use std::process::ExitCode;

pub use cli::Cli;

use crate::cli::Command;

/// Runs one command to completion and returns the process's exit code.
pub fn run(cli: Cli) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let chosen = std::env::var_os("TOKIO_WORKER_THREADS").is_some();
    if let Some(threads) = worker_threads(&cli.command, cores).filter(|_| !chosen) {
        builder.worker_threads(threads);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return exit::Code::Failure.into();
        }
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Work(args) => work::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Schedule(args) => schedule::run(args),
            Command::Token(args) => token::run(args),
            Command::Client(command) => commands::run(command).await,
        }
    });
    match outcome {
        Ok(code) => code.into(),
        Err(e) => exit::report(&e).into(),
    }
}

/// The async runtime's threads on a machine of `cores`, unless tokio's default (a thread per core) is kept: one
/// fewer than the cores, and at least one. A queue's writer runs on a thread of its own and does the work every job
/// waits on; a runtime of a thread per core beside it, or beside a server on the same machine, leaves more threads
/// busy than cores, and each handoff between them waits for one to be scheduled. On 2 cores, a server whose runtime
/// had one thread (and a load generator with one) moved an 8-slot HTTP worker's jobs 15-25 % faster, and every other
/// server scenario as fast or faster. An embedded bench keeps the default: it measures the queue as an application
/// runs it under `#[tokio::main]` (where, with 128 busy slots, the second thread was worth 2-5 %).
/// `TOKIO_WORKER_THREADS`, when set, decides instead (see `run`).
fn worker_threads(command: &Command, cores: usize) -> Option<usize> {
    if let Command::Bench(args) = command
        && (args.embedded || args.db.is_some())
    {
        return None;
    }
    Some(cores.saturating_sub(1).max(1))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn threads(args: &[&str], cores: usize) -> Option<usize> {
        let cli = Cli::try_parse_from(args).expect("valid arguments");
        worker_threads(&cli.command, cores)
    }

    #[test]
    fn a_command_leaves_a_core_to_the_writer() {
        assert_eq!(threads(&["cairn", "serve"], 2), Some(1));
        assert_eq!(threads(&["cairn", "serve"], 8), Some(7));
        assert_eq!(threads(&["cairn", "serve"], 1), Some(1));
        assert_eq!(
            threads(&["cairn", "bench", "--scenario", "workers"], 2),
            Some(1)
        );
    }

    #[test]
    fn an_embedded_bench_runs_as_an_application_would() {
        assert_eq!(threads(&["cairn", "bench", "--embedded"], 2), None);
        assert_eq!(threads(&["cairn", "bench", "--db", "x.db"], 8), None);
    }
}
