//! `cairn bulk ACTION`: one action over every job a filter lists (the `cairn list` filters), or over the ids given:
//! cancel, delete, retry or move. Prints how many jobs it matched, acted on and skipped.

use anyhow::Context as _;
use cairn::Jobs;
use cairn::{BulkAction, BulkSelection, JobFilter, JobId};
use cairn_api::BulkBody;
use clap::{Args, ValueEnum};

use crate::commands::args::{self, CommonArgs};
use crate::commands::output;
use crate::exit::Code;

/// What `cairn bulk` does to each job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Action {
    /// Cancel the jobs that have not completed (a running one's worker is refused from then on).
    Cancel,
    /// Delete the jobs and their history (a live one is cancelled first).
    Delete,
    /// Run again, with fresh attempts, the jobs that failed, were cancelled or completed.
    Retry,
    /// Move the jobs that are not running to the queue `--to` names.
    Move,
}

/// `cairn bulk` arguments.
#[derive(Debug, Clone, Args)]
pub struct BulkArgs {
    /// What to do to each job.
    #[arg(value_enum)]
    pub action: Action,
    /// With `move`: the queue the jobs go to.
    #[arg(long, value_name = "QUEUE")]
    pub to: Option<String>,
    /// These jobs (instead of a filter); repeat, or separate with commas.
    #[arg(long, value_name = "ID", value_parser = args::job_id, value_delimiter = ',')]
    pub ids: Vec<JobId>,
    /// Which jobs.
    #[command(flatten)]
    pub filter: args::JobFilterArgs,
    /// Act on every job of the server when no filter and no `--ids` are given (without it, that is refused).
    #[arg(long)]
    pub all: bool,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl BulkArgs {
    /// Runs the action and prints what it did (with `--json`, the `BulkBody`).
    ///
    /// # Errors
    /// Bad input (naming the flag), or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let action = match (self.action, &self.to) {
            (Action::Move, Some(queue)) => BulkAction::Move {
                queue: queue.clone(),
            },
            (Action::Move, None) => anyhow::bail!(args::invalid("--to", "is required with move")),
            (_, Some(_)) => anyhow::bail!(args::invalid("--to", "applies only to move")),
            (Action::Cancel, None) => BulkAction::Cancel,
            (Action::Delete, None) => BulkAction::Delete,
            (Action::Retry, None) => BulkAction::Retry,
        };
        let filter = self.filter.filter();
        let filtered = filter != JobFilter::default();
        let selection = match (self.ids.is_empty(), filtered) {
            (false, false) => BulkSelection::Ids(self.ids.clone()),
            (false, true) => {
                anyhow::bail!(args::invalid("--ids", "cannot be combined with a filter"))
            }
            (true, true) => BulkSelection::Filter(filter),
            (true, false) if self.all => BulkSelection::Filter(filter),
            (true, false) => anyhow::bail!(args::invalid(
                "--ids",
                "give jobs: --ids, a filter (--queue, --state, --name, …), or --all for every job"
            )),
        };
        let name = action.as_str();
        let outcome = self
            .common
            .client()?
            .bulk(action, selection)
            .await
            .with_context(|| format!("running {name} over jobs"))?;
        let body = BulkBody {
            matched: outcome.matched,
            done: outcome.done,
            skipped: outcome.skipped,
        };
        output::outcome(self.common.json, &body, || {
            format!(
                "{name}: {} of {} jobs ({} skipped: gone, or in a state {name} does not apply to)",
                body.done, body.matched, body.skipped
            )
        })?;
        Ok(Code::Success)
    }
}
