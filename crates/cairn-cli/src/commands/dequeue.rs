//! `cairn dequeue PATTERN`: take (lease) ready jobs whose name matches a GLOB, like Bedrock's `GetJob`, and print
//! each with the lease token the calls about it need. Exits with [`Code::NoJob`] when none was ready in time.

use cairn::Jobs;
use std::time::Duration;

use anyhow::Context as _;
use cairn::Dequeue;
use cairn_api::{ClaimedJobBody, DequeueBody};
use clap::Args;

use crate::commands::args::CommonArgs;
use crate::commands::output::{self, Fields};
use crate::exit::Code;

/// The worker a take without `--worker` is made as: one name for every one-off take, so that they add one row to
/// the workers list, not one each.
const ONE_OFF_WORKER: &str = "cairn-cli";

/// `cairn dequeue` arguments.
#[derive(Debug, Clone, Args)]
pub struct DequeueArgs {
    /// Which job names to take, as a GLOB: `email.*`, `report.?`, `*` for any.
    pub pattern: String,
    /// A queue to take from; repeat for several (earlier ones first). `default` when absent.
    #[arg(long = "queue", value_name = "QUEUE")]
    pub queues: Vec<String>,
    /// Who takes the jobs, as their history records it. When absent, `cairn-cli`, which says it stops once it has
    /// taken them: a one-off take is not a worker to keep track of.
    #[arg(long, value_name = "ID")]
    pub worker: Option<String>,
    /// How long to wait for a job when none is ready (the server caps it): `0s` answers at once.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, default_value = "0s")]
    pub wait: Duration,
    /// The most jobs to take.
    #[arg(long, value_name = "N", default_value_t = 1, allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: u32,
    /// How long the leases last before a heartbeat, instead of each job's own lease timeout: a script that will
    /// not heartbeat should ask for as long as it needs.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse)]
    pub lease_timeout: Option<Duration>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl DequeueArgs {
    /// Takes the jobs and prints them: with `--json`, the `DequeueBody` (also when empty).
    ///
    /// # Errors
    /// Bad input, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let worker = self
            .worker
            .clone()
            .unwrap_or_else(|| ONE_OFF_WORKER.to_owned());
        let request = Dequeue {
            queues: self.queues.clone(),
            names: vec![self.pattern.clone()],
            limit: self.limit,
            wait: self.wait,
            lease_timeout: self.lease_timeout,
            ..Dequeue::new(worker)
        };
        let client = self.common.client()?;
        let claimed = client
            .dequeue(request)
            .await
            .with_context(|| format!("taking jobs matching {:?}", self.pattern))?;
        if self.worker.is_none() {
            // The workers list shows it stopped rather than live until it goes silent; its leases are untouched.
            if let Err(e) = client.worker_stopped(ONE_OFF_WORKER).await {
                tracing::warn!(error = %e, "could not say that {ONE_OFF_WORKER} stops");
            }
        }
        let body = DequeueBody {
            jobs: claimed.iter().map(ClaimedJobBody::from).collect(),
        };
        let printed = if self.common.json {
            output::emit_required(&output::json(&body))
        } else if !body.jobs.is_empty() {
            output::emit_required(&render(&body))
        } else {
            Ok(())
        };
        if let Err(e) = printed {
            // Nobody will see the tokens: give the jobs back rather than leave them leased until they expire.
            for c in &claimed {
                if let Err(release) = client.release(&c.lease).await {
                    tracing::warn!(job = %c.job.id, error = %release, "could not give back a job nobody saw");
                }
            }
            return Err(e);
        }
        if body.jobs.is_empty() {
            eprintln!(
                "no job matching {:?} was ready within {}",
                self.pattern,
                crate::duration::format(self.wait)
            );
            return Ok(Code::NoJob);
        }
        Ok(Code::Success)
    }
}

/// The human form: a block of `key: value` lines per job, with a blank line between jobs.
pub fn render(body: &DequeueBody) -> String {
    let blocks: Vec<String> = body
        .jobs
        .iter()
        .map(|claimed| {
            let job = &claimed.job;
            Fields::new()
                .add("id", job.id)
                .add("name", &job.name)
                .add("queue", &job.queue)
                .add(
                    "attempt",
                    format!("{} of {}", job.attempt, job.retry.max_attempts),
                )
                .add("lease", &claimed.lease.token)
                .add("lease_expires_at", output::time(claimed.lease.expires_at))
                .add("data", output::compact(&job.data))
                .finish()
        })
        .collect();
    blocks.join("\n")
}
