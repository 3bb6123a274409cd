//! `cairn track ID` and `cairn untrack ID`: mark a job to keep an eye on it, whatever becomes of it (`cairn list
//! --tracked` lists the tracked jobs with their states), or stop.

use anyhow::Context as _;
use cairn::JobId;
use cairn::Jobs;
use cairn_api::EmptyBody;
use clap::Args;

use crate::commands::args::{self, CommonArgs};
use crate::commands::output;
use crate::exit::Code;

/// `cairn track` and `cairn untrack` arguments.
#[derive(Debug, Clone, Args)]
pub struct TrackArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl TrackArgs {
    /// Tracks the job (`tracked`) or stops tracking it, and says so. Either is not an error when already done.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`], or the server's refusal.
    pub async fn run(self, tracked: bool) -> anyhow::Result<Code> {
        let id = self.id;
        let (doing, done) = if tracked {
            ("tracking", "tracked")
        } else {
            ("untracking", "untracked")
        };
        self.common
            .client()?
            .track(id, tracked)
            .await
            .with_context(|| format!("{doing} job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("job {id}: {done}")
        })?;
        Ok(Code::Success)
    }
}
