//! The calls a worker makes about a job it holds, each under the lease `cairn dequeue` printed (`--lease` or
//! `CAIRN_LEASE_TOKEN`): `update`, `heartbeat`, `checkpoint`, `finish`, `retry`, `fail`. The server fences every
//! one: a lost lease is refused with exit code 4 and changes nothing.
//!
//! `cairn finish --next-queue Q` completes only this step of the job: it goes on in queue Q (after `--next-delay`,
//! once the `--next-depends-on` jobs complete), with fresh attempts and the data it finished with.
//!
//! The human form is one line, `job ID: what happened`; `--json` prints the server's body.

use cairn::Jobs;
use std::time::Duration;

use anyhow::Context as _;
use cairn::{Continue, Fail, Finish, JobId, Retry};
use cairn_api::{EmptyBody, LeaseExpiryBody, StateBody};
use clap::Args;

use crate::commands::args::{self, CommonArgs, JsonInput, LeaseArgs};
use crate::commands::output;
use crate::exit::Code;

/// `cairn update` arguments.
#[derive(Debug, Clone, Args)]
pub struct UpdateArgs {
    /// The job and its lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The progress to record: JSON text, `@FILE`, or `-` for stdin.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub progress: JsonInput,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn heartbeat` arguments.
#[derive(Debug, Clone, Args)]
pub struct HeartbeatArgs {
    /// The job and its lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Progress to record with the heartbeat: JSON text, `@FILE`, or `-` for stdin.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub progress: Option<JsonInput>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn checkpoint` arguments.
#[derive(Debug, Clone, Args)]
pub struct CheckpointArgs {
    /// The job and its lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The data a retry starts from: JSON text, `@FILE`, or `-` for stdin.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub data: JsonInput,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn finish` arguments.
#[derive(Debug, Clone, Args)]
pub struct FinishArgs {
    /// The job and its lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// What the job produced, kept apart from its data (`cairn show` and `cairn wait` print it): JSON text, `@FILE`,
    /// or `-` for stdin.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub result: Option<JsonInput>,
    /// The job's new data, replacing its input (what a recurring job's next run starts from): JSON text, `@FILE`,
    /// or `-` for stdin.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub data: Option<JsonInput>,
    /// Complete only this step: the job goes on in this queue, with fresh attempts and the data it finished with.
    #[arg(long, value_name = "QUEUE")]
    pub next_queue: Option<String>,
    /// With `--next-queue`: the job is ready again after this long (`30s`, `5m`; at most a year).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, requires = "next_queue")]
    pub next_delay: Option<Duration>,
    /// With `--next-queue`: the job runs again only once this job completes; repeat for several.
    #[arg(long, value_name = "ID", value_parser = args::job_id, requires = "next_queue")]
    pub next_depends_on: Vec<JobId>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn retry` arguments.
#[derive(Debug, Clone, Args)]
pub struct RetryArgs {
    /// The job and its lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// What went wrong, kept in the job's history.
    #[arg(long, value_name = "MESSAGE")]
    pub error: String,
    /// Wait this long instead of the job's backoff: `30s`, `5m`.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse)]
    pub delay: Option<Duration>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn fail` arguments.
#[derive(Debug, Clone, Args)]
pub struct FailArgs {
    /// The job and its lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The kind of failure, for grouping alike ones, such as `invalid-address`.
    #[arg(long)]
    pub group: String,
    /// What happened.
    #[arg(long)]
    pub message: String,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl UpdateArgs {
    /// Records the progress.
    ///
    /// # Errors
    /// Bad input, a lost lease, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let progress = self.progress.read("--progress")?;
        let id = self.lease.id;
        self.common
            .client()?
            .update(&self.lease.lease(), progress)
            .await
            .with_context(|| format!("recording the progress of job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("job {id}: progress recorded")
        })?;
        Ok(Code::Success)
    }
}

impl HeartbeatArgs {
    /// Extends the lease (recording progress if given) and prints its new expiry.
    ///
    /// # Errors
    /// Bad input, a lost lease, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let progress = self
            .progress
            .as_ref()
            .map(|p| p.read("--progress"))
            .transpose()?;
        let id = self.lease.id;
        let expires = self
            .common
            .client()?
            .heartbeat(&self.lease.lease(), progress)
            .await
            .with_context(|| format!("extending the lease on job {id}"))?;
        let body = LeaseExpiryBody {
            lease_expires_at: expires,
        };
        output::outcome(self.common.json, &body, || {
            format!("job {id}: lease extended to {}", output::time(expires))
        })?;
        Ok(Code::Success)
    }
}

impl CheckpointArgs {
    /// Saves the data a retry starts from (which also extends the lease).
    ///
    /// # Errors
    /// Bad input, a lost lease, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let data = self.data.read("--data")?;
        let id = self.lease.id;
        let expires = self
            .common
            .client()?
            .checkpoint(&self.lease.lease(), data)
            .await
            .with_context(|| format!("saving a checkpoint of job {id}"))?;
        let body = LeaseExpiryBody {
            lease_expires_at: expires,
        };
        output::outcome(self.common.json, &body, || {
            format!(
                "job {id}: checkpoint saved, lease extended to {}",
                output::time(expires)
            )
        })?;
        Ok(Code::Success)
    }
}

impl FinishArgs {
    /// Completes the job, or with `--next-queue`, this step of it.
    ///
    /// # Errors
    /// Bad input (a next step's naming `next.queue`, `next.delay_ms` or `next.depends_on`), a lost lease, or the
    /// server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let next = self.next_queue.as_ref().map(|queue| Continue {
            queue: queue.clone(),
            delay: self.next_delay,
            depends_on: self.next_depends_on.clone(),
        });
        let said = next
            .as_ref()
            .map_or_else(|| "completed".to_owned(), goes_on);
        if matches!(
            (&self.result, &self.data),
            (Some(JsonInput::Stdin), Some(JsonInput::Stdin))
        ) {
            return Err(crate::commands::args::invalid(
                "--data",
                "only one of --result and --data can read stdin (`-`)",
            )
            .into());
        }
        let finish = Finish {
            result: self
                .result
                .as_ref()
                .map(|r| r.read("--result"))
                .transpose()?,
            data: self.data.as_ref().map(|d| d.read("--data")).transpose()?,
            next,
            ..Finish::new(&self.lease.lease())
        };
        let id = finish.job;
        self.common
            .client()?
            .finish_with(finish)
            .await
            .with_context(|| format!("finishing job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("job {id}: {said}")
        })?;
        Ok(Code::Success)
    }
}

/// What became of a job whose stage finished: `stage completed, goes on in queue Q after 5m once jobs 3, 4
/// complete`.
fn goes_on(next: &Continue) -> String {
    let mut said = format!("stage completed, goes on in queue {}", next.queue);
    if let Some(delay) = next.delay.filter(|d| !d.is_zero()) {
        said.push_str(&format!(" after {}", crate::duration::format(delay)));
    }
    match next.depends_on.as_slice() {
        [] => {}
        [one] => said.push_str(&format!(" once job {one} completes")),
        many => {
            let ids: Vec<String> = many.iter().map(JobId::to_string).collect();
            said.push_str(&format!(" once jobs {} complete", ids.join(", ")));
        }
    }
    said
}

impl RetryArgs {
    /// Ends the attempt with an error; the job runs again later, or fails when out of attempts.
    ///
    /// # Errors
    /// A lost lease, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let retry = Retry {
            delay: self.delay,
            ..Retry::new(&self.lease.lease(), self.error.as_str())
        };
        let id = retry.job;
        let state = self
            .common
            .client()?
            .retry_with(retry)
            .await
            .with_context(|| format!("retrying job {id}"))?;
        let body = StateBody::from(state);
        output::outcome(self.common.json, &body, || format!("job {id}: {state}"))?;
        Ok(Code::Success)
    }
}

impl FailArgs {
    /// Fails the job for good.
    ///
    /// # Errors
    /// A lost lease, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let fail = Fail::new(
            &self.lease.lease(),
            self.group.as_str(),
            self.message.as_str(),
        );
        let id = fail.job;
        self.common
            .client()?
            .fail_with(fail)
            .await
            .with_context(|| format!("failing job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("job {id}: failed")
        })?;
        Ok(Code::Success)
    }
}
