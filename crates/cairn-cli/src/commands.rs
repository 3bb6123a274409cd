//! Client commands (stub until written).

use clap::Subcommand;

use crate::exit::Code;

/// Client commands against a running server.
#[derive(Debug, Clone, Subcommand)]
pub enum ClientCommand {}

/// Runs a client command.
pub async fn run(command: ClientCommand) -> anyhow::Result<Code> {
    match command {}
}
