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
pub mod work;

use std::process::ExitCode;

pub use cli::Cli;

use crate::cli::Command;

/// Runs one command to completion and returns the process's exit code.
pub fn run(cli: Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
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
            Command::Client(command) => commands::run(command).await,
        }
    });
    match outcome {
        Ok(code) => code.into(),
        Err(e) => exit::report(&e).into(),
    }
}
