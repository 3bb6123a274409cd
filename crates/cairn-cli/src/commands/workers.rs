//! `cairn workers`: the workers the server's queue has seen, with when each was last seen, the jobs it holds, and
//! which of them stalled (their lease ran out and the queue has not retried them yet).

use anyhow::Context as _;
use cairn_api::WorkerListBody;
use clap::Args;

use crate::commands::args::CommonArgs;
use crate::commands::output::{self, Table};
use crate::exit::Code;

/// How many job ids a cell lists before it says how many more there are.
const IDS_SHOWN: usize = 10;

/// `cairn workers` arguments.
#[derive(Debug, Clone, Args)]
pub struct WorkersArgs {
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl WorkersArgs {
    /// Prints the workers (with `--json`, the `WorkerListBody`).
    ///
    /// # Errors
    /// The server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let body = self
            .common
            .client()?
            .answer(cairn::ListWorkers)
            .await
            .context("listing the workers")?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render(&body)
        })?;
        Ok(Code::Success)
    }
}

/// The human form: a table of the workers, or `no workers`.
fn render(body: &WorkerListBody) -> String {
    if body.workers.is_empty() {
        return "no workers\n".to_owned();
    }
    let mut table = Table::new(&["WORKER", "STATUS", "LAST SEEN", "JOBS", "STALLED"]);
    for w in &body.workers {
        table.row(vec![
            w.id.clone(),
            w.status.clone(),
            output::time(w.last_seen),
            ids(&w.jobs),
            ids(&w.stalled),
        ]);
    }
    table.render("")
}

/// Job ids as a cell: `-` for none, the first few and how many more for many.
fn ids(jobs: &[i64]) -> String {
    if jobs.is_empty() {
        return "-".to_owned();
    }
    let shown: Vec<String> = jobs.iter().take(IDS_SHOWN).map(i64::to_string).collect();
    let mut cell = shown.join(",");
    if jobs.len() > IDS_SHOWN {
        cell.push_str(&format!(" (+{} more)", jobs.len() - IDS_SHOWN));
    }
    cell
}

#[cfg(test)]
mod tests {
    use cairn_api::WorkerBody;

    use super::*;

    #[test]
    fn workers_are_a_table_with_their_jobs_held_and_stalled() {
        let at = "2025-01-31T09:00:00Z".parse().unwrap();
        let body = WorkerListBody {
            workers: vec![
                WorkerBody {
                    id: "alpha".into(),
                    first_seen: at,
                    last_seen: at,
                    jobs: (1..=12).collect(),
                    stalled: vec![3],
                    status: "live".into(),
                },
                WorkerBody {
                    id: "beta".into(),
                    first_seen: at,
                    last_seen: at,
                    jobs: vec![],
                    stalled: vec![],
                    status: "gone".into(),
                },
            ],
        };
        assert_eq!(
            render(&body),
            "\
WORKER  STATUS  LAST SEEN             JOBS                            STALLED
alpha   live    2025-01-31T09:00:00Z  1,2,3,4,5,6,7,8,9,10 (+2 more)  3
beta    gone    2025-01-31T09:00:00Z  -                               -
"
        );
        assert_eq!(render(&WorkerListBody::default()), "no workers\n");
    }
}
