//! `cairn signal KEY [--data JSON]`: send a signal, which the job waiting for KEY receives (or the first that waits
//! later: docs/workflows.md, "Signals").

use anyhow::Context as _;
use cairn::{Jobs, SignalKey, SignalSent};
use cairn_api::{Answer as _, SignalSentBody};
use clap::Args;

use crate::commands::args::{CommonArgs, JsonInput};
use crate::commands::output;
use crate::exit::Code;

/// `cairn signal` arguments.
#[derive(Debug, Clone, Args)]
pub struct SignalArgs {
    /// The key a job waits for, such as `order-42/packed`.
    pub key: String,
    /// What the job receives: JSON text, `@FILE` to read a file, or `-` to read stdin. `null` when absent.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub data: Option<JsonInput>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl SignalArgs {
    /// Sends the signal and says whether a job received it or it is kept.
    ///
    /// # Errors
    /// Bad input naming the argument, or the server's refusal (a key only a cancelled job waited for).
    pub async fn run(self) -> anyhow::Result<Code> {
        let key = SignalKey::parse(self.key.as_str())?;
        let data = self
            .data
            .as_ref()
            .map(|d| d.read("--data"))
            .transpose()?
            .unwrap_or_default();
        let sent = self
            .common
            .client()?
            .signal(key.clone(), data)
            .await
            .with_context(|| format!("sending signal {key}"))?;
        output::outcome(
            self.common.json,
            &SignalSentBody::from_output(sent),
            || match sent {
                SignalSent::Delivered { job } => format!("signal {key}: received by job {job}"),
                SignalSent::Kept => {
                    format!("signal {key}: kept, for the first job that waits for it")
                }
            },
        )?;
        Ok(Code::Success)
    }
}
