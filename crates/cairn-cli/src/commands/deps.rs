//! `cairn deps ID`: what a job waits for, each dependency with its state; with `--add` and `--remove`, change
//! them (only while the job has not started).

use anyhow::Context as _;
use cairn::Jobs;
use cairn::{ChangeDependencies, JobId};
use cairn_api::{JobBody, StateBody};
use clap::Args;

use crate::commands::args::{self, CommonArgs};
use crate::commands::output::{self, Table};
use crate::exit::Code;

/// `cairn deps` arguments.
#[derive(Debug, Clone, Args)]
pub struct DepsArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// A job it must also wait for; repeat for several.
    #[arg(long, value_name = "ID", value_parser = args::job_id)]
    pub add: Vec<JobId>,
    /// A job it no longer waits for; repeat for several.
    #[arg(long, value_name = "ID", value_parser = args::job_id)]
    pub remove: Vec<JobId>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl DepsArgs {
    /// Changes the dependencies (printing the job's new state), or lists them.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`], [`cairn::ErrorKind::InvalidState`] for a job that started, a cancelled
    /// dependency or a cycle, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let id = self.id;
        let client = self.common.client()?;
        if !self.add.is_empty() || !self.remove.is_empty() {
            let state = client
                .change_dependencies(ChangeDependencies {
                    job: id,
                    add: self.add.clone(),
                    remove: self.remove.clone(),
                })
                .await
                .with_context(|| format!("changing the dependencies of job {id}"))?;
            let body = StateBody::from(state);
            output::outcome(self.common.json, &body, || format!("job {id}: {state}"))?;
            return Ok(Code::Success);
        }
        let job = client
            .answer(cairn::GetJob::new(id))
            .await
            .with_context(|| format!("reading job {id}"))?;
        let mut dependencies = Vec::with_capacity(job.depends_on.len());
        for &dep in &job.depends_on {
            // A dependency deleted in between is simply no longer there.
            match client.answer(cairn::GetJob::new(JobId(dep))).await {
                Ok(body) => dependencies.push(body),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e).with_context(|| format!("reading job {dep}")),
            }
        }
        output::emit(&if self.common.json {
            output::json(&dependencies)
        } else {
            render(&job, &dependencies)
        })?;
        Ok(Code::Success)
    }
}

/// The human form: a table of the dependencies not yet met, or a line saying there are none.
fn render(job: &JobBody, dependencies: &[JobBody]) -> String {
    if dependencies.is_empty() {
        return format!("job {}: no dependencies left ({})\n", job.id, job.state);
    }
    let mut table = Table::new(&["ID", "STATE", "QUEUE", "NAME", "ERROR"]);
    for dep in dependencies {
        table.row(vec![
            dep.id.to_string(),
            dep.state.clone(),
            dep.queue.clone(),
            dep.name.clone(),
            dep.error.clone().unwrap_or_default(),
        ]);
    }
    table.render("")
}
