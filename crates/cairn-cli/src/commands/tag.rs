//! `cairn tag ID --add T --remove T`: add and remove a job's tags, whatever its state (`cairn show` prints them,
//! `cairn list --tag` finds the jobs).

use anyhow::Context as _;
use cairn::Jobs;
use cairn::{ChangeTags, JobId};
use cairn_api::EmptyBody;
use clap::{ArgGroup, Args};

use crate::commands::args::{self, CommonArgs};
use crate::commands::output;
use crate::exit::Code;

/// `cairn tag` arguments.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("change").args(["add", "remove"]).required(true).multiple(true)))]
pub struct TagArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// A tag to add; repeat for several. Adding a tag the job has is not an error.
    #[arg(long, value_name = "TAG")]
    pub add: Vec<String>,
    /// A tag to remove; repeat for several. Removing a tag the job lacks is not an error.
    #[arg(long, value_name = "TAG")]
    pub remove: Vec<String>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl TagArgs {
    /// Changes the tags, and says what changed.
    ///
    /// # Errors
    /// A bad tag naming `tags`, [`cairn::ErrorKind::NotFound`], or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let id = self.id;
        self.common
            .client()?
            .change_tags(ChangeTags {
                job: id,
                add: self.add.clone(),
                remove: self.remove.clone(),
            })
            .await
            .with_context(|| format!("changing the tags of job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            let mut changes = Vec::new();
            if !self.add.is_empty() {
                changes.push(format!("added {}", self.add.join(", ")));
            }
            if !self.remove.is_empty() {
                changes.push(format!("removed {}", self.remove.join(", ")));
            }
            format!("job {id}: tags {}", changes.join("; "))
        })?;
        Ok(Code::Success)
    }
}
