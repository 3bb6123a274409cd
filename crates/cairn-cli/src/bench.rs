//! `cairn bench` (stub until written).

use clap::Args;

use crate::exit::Code;

/// `cairn bench` arguments.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {}

/// Runs the benchmark.
pub async fn run(_args: BenchArgs) -> anyhow::Result<Code> {
    anyhow::bail!("not yet")
}
