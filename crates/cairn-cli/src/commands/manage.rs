//! Managing a job from outside, without a lease: `cancel`, `delete`, `priority`, `reschedule`, `requeue`,
//! `set-data`, `move`.
//!
//! The human form is one line, `job ID: what happened`; `--json` prints the server's body.

use anyhow::Context as _;
use cairn::Jobs;
use cairn::{JobId, MoveJob};
use cairn_api::{EmptyBody, Route as _, StateBody};
use clap::Args;
use jiff::Timestamp;

use crate::commands::args::{self, CommonArgs, JsonInput};
use crate::commands::output;
use crate::exit::Code;

/// `cairn cancel` and `cairn delete` arguments.
#[derive(Debug, Clone, Args)]
pub struct JobArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn priority` arguments.
#[derive(Debug, Clone, Args)]
pub struct PriorityArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// The new priority: higher runs first (may be negative).
    #[arg(allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<i32>)]
    pub priority: i32,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn move` arguments.
#[derive(Debug, Clone, Args)]
pub struct MoveArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// The queue it moves to.
    pub queue: String,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn reschedule` arguments.
#[derive(Debug, Clone, Args)]
pub struct RescheduleArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// When it may run (RFC 3339, such as `2025-01-31T09:00:00Z`).
    #[arg(long, value_name = "TIME", value_parser = args::time)]
    pub run_at: Timestamp,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn requeue` arguments.
#[derive(Debug, Clone, Args)]
pub struct RequeueArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// When it may run (RFC 3339); now by default.
    #[arg(long, value_name = "TIME", value_parser = args::time)]
    pub run_at: Option<Timestamp>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn set-data` arguments.
#[derive(Debug, Clone, Args)]
pub struct SetDataArgs {
    /// The job's id.
    #[arg(value_parser = args::job_id)]
    pub id: JobId,
    /// The new data: JSON text, `@FILE`, or `-` for stdin.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub data: JsonInput,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl RequeueArgs {
    /// Runs the job again with a fresh count of attempts, and prints its new state.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`], [`cairn::ErrorKind::InvalidState`] when another live job holds its unique
    /// key, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let id = self.id;
        let state = self
            .common
            .client()?
            .requeue(id, self.run_at)
            .await
            .with_context(|| format!("requeueing job {id}"))?;
        let body = StateBody::from(state);
        output::outcome(self.common.json, &body, || format!("job {id}: {state}"))?;
        Ok(Code::Success)
    }
}

impl SetDataArgs {
    /// Replaces the data of a job that is not running.
    ///
    /// # Errors
    /// Bad JSON naming `--data`, [`cairn::ErrorKind::NotFound`], [`cairn::ErrorKind::InvalidState`] for a running
    /// job, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let id = self.id;
        let data = self.data.read("--data")?;
        self.common
            .client()?
            .set_data(id, data)
            .await
            .with_context(|| format!("setting the data of job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("job {id}: data replaced")
        })?;
        Ok(Code::Success)
    }
}

impl JobArgs {
    /// Cancels the job; a running job's worker is refused from then on.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`], [`cairn::ErrorKind::InvalidState`] for a finished job, or the server's
    /// refusal.
    pub async fn cancel(self) -> anyhow::Result<Code> {
        let id = self.id;
        self.common
            .client()?
            .cancel(id)
            .await
            .with_context(|| format!("cancelling job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("job {id}: cancelled")
        })?;
        Ok(Code::Success)
    }

    /// Deletes the job and its history.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`], or the server's refusal.
    pub async fn delete(self) -> anyhow::Result<Code> {
        let id = self.id;
        self.common
            .client()?
            .delete(id)
            .await
            .with_context(|| format!("deleting job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("job {id}: deleted")
        })?;
        Ok(Code::Success)
    }
}

impl PriorityArgs {
    /// Changes the priority of a job that has not finished.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`], [`cairn::ErrorKind::InvalidState`] for a finished job, or the server's
    /// refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let (id, priority) = (self.id, self.priority);
        self.common
            .client()?
            .set_priority(id, priority)
            .await
            .with_context(|| format!("changing the priority of job {id}"))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("job {id}: priority {priority}")
        })?;
        Ok(Code::Success)
    }
}

impl MoveArgs {
    /// Moves a job that is not running to another queue (one that ended runs again there).
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`], [`cairn::ErrorKind::InvalidState`] for a job that is running,
    /// [`cairn::ErrorKind::InvalidInput`] for a bad queue name, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let id = self.id;
        let body = self
            .common
            .client()?
            .run(MoveJob::new(id, self.queue.as_str()))
            .await
            .map(MoveJob::answer)
            .with_context(|| format!("moving job {id} to queue {:?}", self.queue))?;
        output::outcome(self.common.json, &body, || {
            format!("job {id}: moved to queue {}", self.queue)
        })?;
        Ok(Code::Success)
    }
}

impl RescheduleArgs {
    /// Moves a job that has not started and prints its new state.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::NotFound`], [`cairn::ErrorKind::InvalidState`] for a job that started, or the
    /// server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let id = self.id;
        let state = self
            .common
            .client()?
            .reschedule(id, self.run_at)
            .await
            .with_context(|| format!("rescheduling job {id}"))?;
        let body = StateBody::from(state);
        output::outcome(self.common.json, &body, || {
            format!("job {id}: {state}, runs at {}", output::time(self.run_at))
        })?;
        Ok(Code::Success)
    }
}
