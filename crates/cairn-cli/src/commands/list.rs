//! `cairn list`: a page of jobs, newest first, as a table, with the flag that fetches the next page when there
//! is one.

use anyhow::Context as _;
use cairn::{JobFilter, JobId};
use cairn_api::JobPageBody;
use clap::Args;

use crate::commands::args::{self, CommonArgs};
use crate::commands::output::{self, Table};
use crate::exit::Code;

/// `cairn list` arguments.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Which jobs.
    #[command(flatten)]
    pub filter: args::JobFilterArgs,
    /// At most this many jobs (1 to 1000).
    #[arg(long, value_name = "N", default_value_t = JobFilter::default().limit, allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: u32,
    /// Only jobs older than this one: the `--before` a previous page printed.
    #[arg(long, value_name = "ID", value_parser = args::job_id)]
    pub before: Option<JobId>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ListArgs {
    /// Prints the page (with `--json`, the `JobPageBody`).
    ///
    /// # Errors
    /// Bad input, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let filter = JobFilter {
            before: self.before,
            limit: self.limit,
            ..self.filter.filter()
        };
        let page = self
            .common
            .client()?
            .answer(filter)
            .await
            .context("listing jobs")?;
        output::emit(&if self.common.json {
            output::json(&page)
        } else {
            render(&page)
        })?;
        Ok(Code::Success)
    }
}

/// The human form: a table, then `next: --before ID` when there is another page.
pub fn render(page: &JobPageBody) -> String {
    if page.jobs.is_empty() {
        return "no jobs\n".to_owned();
    }
    let mut table = Table::new(&[
        "ID", "STATE", "QUEUE", "NAME", "PRIORITY", "ATTEMPT", "RUN AT",
    ]);
    for job in &page.jobs {
        table.row(vec![
            job.id.to_string(),
            job.state.clone(),
            job.queue.clone(),
            job.name.clone(),
            job.priority.to_string(),
            format!("{}/{}", job.attempt, job.retry.max_attempts),
            output::time(job.run_at),
        ]);
    }
    let mut text = table.render("");
    if let Some(next) = page.next {
        text.push_str(&format!("next: --before {next}\n"));
    }
    text
}
