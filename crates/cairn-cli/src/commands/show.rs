//! `cairn show ID`: one job as `key: value` lines, then its history as a table (each attempt's worker, times,
//! outcome, error, and what its process used when the worker measured it).

use std::time::Duration;

use anyhow::Context as _;
use cairn::JobId;
use cairn_api::{AttemptBody, JobBody, StepBody};
use clap::Args;

use crate::commands::args::{self, CommonArgs};
use crate::commands::output::{self, Fields, Table};
use crate::exit::Code;

/// `cairn show` arguments.
#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ShowArgs {
    /// Prints the job (with `--json`, its `JobBody`).
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`] when no job has the id, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let job = self
            .common
            .client()?
            .answer(cairn::GetJob::new(self.id))
            .await
            .with_context(|| format!("showing job {}", self.id))?;
        output::emit(&if self.common.json {
            output::json(&job)
        } else {
            render(&job)
        })?;
        Ok(Code::Success)
    }
}

/// The human form: the fields that have a value, by their wire names, then the history.
pub fn render(job: &JobBody) -> String {
    let mut fields = Fields::new();
    fields
        .add("id", job.id)
        .add("name", &job.name)
        .add("queue", &job.queue)
        .add("state", &job.state)
        .add("priority", job.priority)
        .add("weight", job.weight)
        .add(
            "attempt",
            format!("{} of {}", job.attempt, job.retry.max_attempts),
        )
        .add("run_at", output::time(job.run_at))
        .add("created_at", output::time(job.created_at))
        .add_some("started_at", job.started_at.map(output::time))
        .add_some("finished_at", job.finished_at.map(output::time))
        .add_some("worker", job.worker.as_ref())
        .add_some("lease_expires_at", job.lease_expires_at.map(output::time))
        .add(
            "lease_timeout",
            crate::duration::format(Duration::from_millis(job.lease_timeout_ms)),
        )
        .add_some("unique_key", job.unique_key.as_ref())
        .add_some("debounce_key", job.debounce_key.as_ref())
        .add_some("throttle_key", job.throttle_key.as_ref())
        .add_some(
            "concurrency_key",
            job.concurrency_key
                .as_ref()
                .map(|key| match job.concurrency_limit {
                    Some(limit) => format!("{key} (at most {limit} at once)"),
                    None => key.clone(),
                }),
        )
        .add_some("tags", (!job.tags.is_empty()).then(|| job.tags.join(", ")))
        .add_some("tracked", job.tracked.then_some("yes"))
        .add_some("parent", job.parent)
        .add_some("waits_for", waits_for(job))
        .add_some("suspended_at", job.suspended_at.map(output::time))
        .add_some(
            "awaits_signal",
            job.awaits_signal
                .as_ref()
                .map(|key| format!("{key} (until {})", output::time(job.run_at))),
        )
        .add_some("schedule", job.schedule.as_ref().map(|s| schedule(s, job)))
        .add_some("error", job.error.as_ref())
        .add_some("failure_group", job.failure_group.as_ref())
        .add_some("trace_parent", job.trace_parent.as_ref())
        .add("data", output::compact(&job.data))
        .add_some("result", job.result.as_ref().map(output::compact))
        .add_some("progress", job.progress.as_ref().map(output::compact));
    if !job.steps.is_empty() {
        fields.add("steps", "").append(&steps(&job.steps));
    }
    if job.history.is_empty() {
        fields.add("history", "none");
    } else {
        fields.add("history", "").append(&history(&job.history));
    }
    fields.finish()
}

/// The steps its handler recorded, in order, indented under `steps:`.
fn steps(steps: &[StepBody]) -> String {
    let mut table = Table::new(&["STEP", "ATTEMPT", "RECORDED", "RESULT"]);
    for step in steps {
        table.row(vec![
            step.name.clone(),
            step.attempt.to_string(),
            output::time(step.recorded_at),
            output::compact(&step.result),
        ]);
    }
    table.render("  ")
}

/// What a waiting job waits for, in words.
fn waits_for(job: &JobBody) -> Option<String> {
    if job.state != "waiting" {
        return None;
    }
    let mut reasons = Vec::new();
    if job.awaits_parent {
        reasons.push("the run of its parent that created it to finish".to_owned());
    }
    if !job.depends_on.is_empty() {
        let ids: Vec<String> = job.depends_on.iter().map(i64::to_string).collect();
        reasons.push(format!("jobs {} (cairn deps {})", ids.join(", "), job.id));
    }
    if reasons.is_empty() {
        reasons.push(format!("its children (cairn list --parent {})", job.id));
    }
    Some(reasons.join("; "))
}

fn schedule(spec: &str, job: &JobBody) -> String {
    match &job.time_zone {
        Some(zone) => format!("{spec} ({zone})"),
        None => spec.to_owned(),
    }
}

/// The attempts, oldest first, indented under `history:`.
fn history(attempts: &[AttemptBody]) -> String {
    let mut table = Table::new(&[
        "#", "WORKER", "STARTED", "FINISHED", "OUTCOME", "RUN", "CPU", "MEMORY", "ERROR",
    ]);
    let none = || "-".to_owned();
    for attempt in attempts {
        let usage = attempt.usage.as_ref();
        table.row(vec![
            attempt.number.to_string(),
            attempt.worker.clone(),
            output::time(attempt.started_at),
            attempt.finished_at.map_or_else(none, output::time),
            attempt
                .outcome
                .clone()
                .unwrap_or_else(|| "running".to_owned()),
            usage.map_or_else(none, |u| output::millis(u.run_ms)),
            usage.map_or_else(none, |u| output::millis(u.cpu_ms)),
            usage.map_or_else(none, |u| output::bytes(u.peak_memory)),
            attempt.error.clone().unwrap_or_else(none),
        ]);
    }
    table.render("  ")
}
