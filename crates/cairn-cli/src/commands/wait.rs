//! `cairn wait ID`: waits for a job to end and prints it as `cairn show` does, its result or error included. The
//! exit code says how it ended, so that a script can wait for a job and act on its outcome.

use cairn::Jobs;
use std::time::Duration;

use anyhow::Context as _;
use cairn::{JobId, JobState};
use clap::Args;

use crate::commands::args::{self, CommonArgs};
use crate::commands::{output, show};
use crate::exit::Code;

/// `cairn wait` arguments.
#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// How long to wait for the job to end (`30s`, `10m`; at most a day); the server answers each request within
    /// its own cap, and this asks again until then.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, default_value = "60s")]
    pub timeout: Duration,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl WaitArgs {
    /// Prints the job once it ended (with `--json`, its `JobBody`), or as it stands when the wait ran out.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`] when no job has the id, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        if self.timeout > cairn::MAX_WAIT {
            anyhow::bail!(args::invalid(
                "--timeout",
                format!(
                    "must be at most {}",
                    crate::duration::format(cairn::MAX_WAIT)
                )
            ));
        }
        let job = self
            .common
            .client()?
            .wait(self.id, self.timeout)
            .await
            .map(|job| cairn_api::JobBody::from(&job))
            .with_context(|| format!("waiting for job {}", self.id))?;
        output::emit(&if self.common.json {
            output::json(&job)
        } else {
            show::render(&job)
        })?;
        Ok(match job.state.parse::<JobState>() {
            Ok(JobState::Completed) => Code::Success,
            Ok(JobState::Failed | JobState::Cancelled) => Code::Ended,
            _ => Code::StillLive,
        })
    }
}
