//! `cairn failures` (the failure groups with their counts), `cairn failures GROUP` (that group's failed jobs, paged
//! like `cairn list`) and `cairn unfail GROUP` (the oldest of them back in a queue, with fresh attempts).

use anyhow::Context as _;
use cairn::Jobs;
use cairn::{JobFilter, JobId, Unfail};
use cairn_api::{FailureGroupListBody, UnfailBody};
use clap::Args;

use crate::commands::args::{self, CommonArgs};
use crate::commands::list;
use crate::commands::output::{self, Table};
use crate::exit::Code;

/// `cairn failures` arguments.
#[derive(Debug, Clone, Args)]
pub struct FailuresArgs {
    /// A failure group: list its failed jobs, newest first, instead of the groups.
    pub group: Option<String>,
    /// At most this many jobs (1 to 1000).
    #[arg(long, value_name = "N", default_value_t = JobFilter::default().limit, requires = "group", allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: u32,
    /// Only jobs older than this one: the `--before` a previous page printed.
    #[arg(long, value_name = "ID", value_parser = args::job_id, requires = "group")]
    pub before: Option<JobId>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn unfail` arguments.
#[derive(Debug, Clone, Args)]
pub struct UnfailArgs {
    /// The failure group.
    pub group: String,
    /// Move the jobs to this queue instead of each job's own.
    #[arg(long)]
    pub queue: Option<String>,
    /// At most this many jobs, oldest first (1 to 1000000); all of them by default.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: Option<u32>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl FailuresArgs {
    /// Prints the failure groups (with `--json`, the `FailureGroupListBody`), or a page of one group's jobs (with
    /// `--json`, the `JobPageBody`).
    ///
    /// # Errors
    /// Bad input, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let client = self.common.client()?;
        let text = match &self.group {
            Some(group) => {
                let filter = JobFilter {
                    failure_group: Some(group.clone()),
                    before: self.before,
                    limit: self.limit,
                    ..JobFilter::default()
                };
                let page = client
                    .answer(filter)
                    .await
                    .with_context(|| format!("listing the failed jobs of group {group:?}"))?;
                if self.common.json {
                    output::json(&page)
                } else {
                    list::render(&page)
                }
            }
            None => {
                let body = client
                    .answer(cairn::ListFailures)
                    .await
                    .context("listing the failure groups")?;
                if self.common.json {
                    output::json(&body)
                } else {
                    render(&body)
                }
            }
        };
        output::emit(&text)?;
        Ok(Code::Success)
    }
}

impl UnfailArgs {
    /// Puts the oldest failed jobs of the group back, and says how many moved.
    ///
    /// # Errors
    /// A bad queue name or limit, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let unfail = Unfail {
            group: self.group.clone(),
            queue: self.queue.clone(),
            limit: self.limit.unwrap_or(cairn::MAX_UNFAIL),
        };
        let moved = self
            .common
            .client()?
            .unfail(unfail)
            .await
            .with_context(|| format!("unfailing group {:?}", self.group))?;
        output::outcome(self.common.json, &UnfailBody { moved }, || {
            let jobs = if moved == 1 { "job" } else { "jobs" };
            let to = match &self.queue {
                Some(queue) => format!("to queue {queue}"),
                None => "back to their queues".to_owned(),
            };
            format!("failures {}: moved {moved} {jobs} {to}", self.group)
        })?;
        Ok(Code::Success)
    }
}

/// How a failed job without a group shows in the table (the engine lists them under the empty group).
const NO_GROUP: &str = "(none)";

/// A group's name as the table shows it: the empty group, which a blank cell would hide, as [`NO_GROUP`].
fn group_name(group: &str) -> String {
    if group.is_empty() {
        NO_GROUP.to_owned()
    } else {
        group.to_owned()
    }
}

/// The human form of the groups: a table, or `no failures`.
fn render(body: &FailureGroupListBody) -> String {
    if body.groups.is_empty() {
        return "no failures\n".to_owned();
    }
    let mut table = Table::new(&["GROUP", "COUNT", "FIRST FAILED", "LAST FAILED"]);
    for g in &body.groups {
        table.row(vec![
            group_name(&g.group),
            g.count.to_string(),
            output::time(g.first_failed_at),
            output::time(g.last_failed_at),
        ]);
    }
    table.render("")
}

#[cfg(test)]
mod tests {
    use cairn_api::FailureGroupBody;

    use super::*;

    #[test]
    fn failed_jobs_without_a_group_show_as_none() {
        let at = "2025-01-31T09:00:00Z".parse().unwrap();
        let group = |name: &str, count| FailureGroupBody {
            group: name.to_owned(),
            count,
            first_failed_at: at,
            last_failed_at: at,
        };
        let body = FailureGroupListBody {
            groups: vec![group("", 2), group("timeout", 1)],
        };
        assert_eq!(
            render(&body),
            "\
GROUP    COUNT  FIRST FAILED          LAST FAILED
(none)   2      2025-01-31T09:00:00Z  2025-01-31T09:00:00Z
timeout  1      2025-01-31T09:00:00Z  2025-01-31T09:00:00Z
"
        );
    }
}
