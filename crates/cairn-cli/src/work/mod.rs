//! `cairn work` (stub until written).

use clap::Args;

use crate::exit::Code;

/// `cairn work` arguments.
#[derive(Debug, Clone, Args)]
pub struct WorkArgs {}

/// Runs the worker manager.
pub async fn run(_args: WorkArgs) -> anyhow::Result<Code> {
    anyhow::bail!("not yet")
}
