//! `cairn batch create|add|close|show|list`: groups of jobs with callbacks, pushed once every job has ended
//! (`--on-complete`) or completed (`--on-success`).

use anyhow::Context as _;
use cairn::{AddToBatch, BatchFilter, BatchId, BatchState, CloseBatch, CreateBatch, Push};
use cairn_api::{BatchBody, BatchListBody, PushRequest, Route as _};
use clap::{Args, Subcommand};

use crate::commands::args::{self, CommonArgs, JsonInput};
use crate::commands::output::{self, Fields, Table};
use crate::exit::Code;

/// `cairn batch` commands.
#[derive(Debug, Clone, Args)]
pub struct BatchArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: BatchCommand,
}

/// What `cairn batch` can do.
#[derive(Debug, Clone, Subcommand)]
pub enum BatchCommand {
    /// Create a batch of jobs, with the jobs to push when it ends; prints its id.
    Create(Box<CreateBatchArgs>),
    /// Add jobs to a batch that has not completed.
    Add(AddToBatchArgs),
    /// Close an open batch: it completes once every job has ended.
    Close(BatchIdArgs),
    /// Show a batch: its state, counts and callbacks.
    Show(BatchIdArgs),
    /// List batches, newest first.
    List(ListBatchesArgs),
}

/// The jobs of a batch, read from `--jobs`.
#[derive(Debug, Clone, Args)]
pub struct JobsInput {
    /// The jobs, as `POST /v1/jobs` takes them: a JSON array, or one JSON object per line; inline, `@FILE`, or `-`
    /// for stdin.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub jobs: Option<JsonInput>,
}

/// A callback's flags, `--on-success…` or `--on-complete…`.
#[derive(Debug, Clone, Args)]
pub struct CallbackArgs {
    /// The job to push once every job of the batch has completed: its name.
    #[arg(long, value_name = "NAME")]
    pub on_success: Option<String>,
    /// With `--on-success`: its queue (`default` when absent).
    #[arg(long, value_name = "QUEUE", requires = "on_success")]
    pub on_success_queue: Option<String>,
    /// With `--on-success`: its data, a JSON object (inline, `@FILE` or `-`), which gets the batch's counts as
    /// its member `batch`.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse, requires = "on_success")]
    pub on_success_data: Option<JsonInput>,
    /// The job to push once every job of the batch has completed, failed or been cancelled: its name.
    #[arg(long, value_name = "NAME")]
    pub on_complete: Option<String>,
    /// With `--on-complete`: its queue (`default` when absent).
    #[arg(long, value_name = "QUEUE", requires = "on_complete")]
    pub on_complete_queue: Option<String>,
    /// With `--on-complete`: its data, a JSON object, which gets the batch's counts as its member `batch`.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse, requires = "on_complete")]
    pub on_complete_data: Option<JsonInput>,
}

/// `cairn batch create` arguments.
#[derive(Debug, Clone, Args)]
pub struct CreateBatchArgs {
    /// The batch's jobs (none when absent: add them later with `cairn batch add`).
    #[command(flatten)]
    pub jobs: JobsInput,
    /// The callbacks.
    #[command(flatten)]
    pub callbacks: CallbackArgs,
    /// Hold the batch open until `cairn batch close`, so that it does not complete while jobs are still added.
    #[arg(long)]
    pub open: bool,
    /// What the batch is, for people.
    #[arg(long, value_name = "TEXT")]
    pub description: Option<String>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn batch add` arguments.
#[derive(Debug, Clone, Args)]
pub struct AddToBatchArgs {
    /// The batch's id.
    #[arg(value_parser = batch_id)]
    pub id: BatchId,
    /// The jobs to add.
    #[command(flatten)]
    pub jobs: JobsInput,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Arguments naming one batch.
#[derive(Debug, Clone, Args)]
pub struct BatchIdArgs {
    /// The batch's id.
    #[arg(value_parser = batch_id)]
    pub id: BatchId,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn batch list` arguments.
#[derive(Debug, Clone, Args)]
pub struct ListBatchesArgs {
    /// Only batches in this state.
    #[arg(long, value_parser = ["open", "running", "completed"])]
    pub state: Option<String>,
    /// Only batches older than this id (the last of the previous page).
    #[arg(long, value_name = "ID", value_parser = batch_id)]
    pub before: Option<BatchId>,
    /// At most this many.
    #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: u32,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Parses a batch id.
///
/// # Errors
/// The rule and the text given.
pub fn batch_id(text: &str) -> Result<BatchId, String> {
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .map(BatchId)
        .ok_or_else(|| format!("must be a batch id (a positive integer), got {text:?}"))
}

impl JobsInput {
    /// The jobs given, which must be some.
    ///
    /// # Errors
    /// As [`JobsInput::read`], and [`cairn::ErrorKind::InvalidInput`] naming `--jobs` when it gives none.
    fn read_some(&self) -> cairn::Result<Vec<Push>> {
        let jobs = self.read()?;
        if jobs.is_empty() {
            return Err(args::invalid(
                "--jobs",
                "must give at least one job (a JSON array, or one object per line)",
            ));
        }
        Ok(jobs)
    }

    /// The jobs given, none when `--jobs` is absent.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::InvalidInput`] naming `--jobs` (and the line) when it cannot be read or a job is not one
    /// `POST /v1/jobs` takes.
    fn read(&self) -> cairn::Result<Vec<Push>> {
        let Some(input) = &self.jobs else {
            return Ok(Vec::new());
        };
        let text = input.text("--jobs")?;
        let job = |value: serde_json::Value, at: &str| {
            serde_json::from_value::<PushRequest>(value)
                .map(Push::from)
                .map_err(|e| {
                    args::invalid(
                        "--jobs",
                        format!("{at}must be a job as POST /v1/jobs takes it ({e})"),
                    )
                })
        };
        if text.trim_start().starts_with('[') {
            let values: Vec<serde_json::Value> = serde_json::from_str(&text).map_err(|e| {
                args::invalid("--jobs", format!("must be a JSON array of jobs ({e})"))
            })?;
            values
                .into_iter()
                .enumerate()
                .map(|(i, v)| job(v, &format!("[{i}]: ")))
                .collect()
        } else {
            text.lines()
                .enumerate()
                .filter(|(_, line)| !line.trim().is_empty())
                .map(|(i, line)| {
                    let at = format!("line {}: ", i + 1);
                    let value = serde_json::from_str(line)
                        .map_err(|e| args::invalid("--jobs", format!("{at}must be JSON ({e})")))?;
                    job(value, &at)
                })
                .collect()
        }
    }
}

impl CallbackArgs {
    /// The callbacks these flags describe.
    fn callbacks(&self) -> cairn::Result<(Option<Push>, Option<Push>)> {
        let callback = |name: &Option<String>,
                        queue: &Option<String>,
                        data: &Option<JsonInput>,
                        flag: &str|
         -> cairn::Result<Option<Push>> {
            name.as_ref()
                .map(|name| {
                    let mut push = Push::new(name.as_str());
                    if let Some(queue) = queue {
                        push.queue.clone_from(queue);
                    }
                    if let Some(data) = data {
                        push.data = data.read(flag)?;
                    }
                    Ok(push)
                })
                .transpose()
        };
        Ok((
            callback(
                &self.on_success,
                &self.on_success_queue,
                &self.on_success_data,
                "--on-success-data",
            )?,
            callback(
                &self.on_complete,
                &self.on_complete_queue,
                &self.on_complete_data,
                "--on-complete-data",
            )?,
        ))
    }
}

impl BatchArgs {
    /// Runs the `cairn batch` command.
    ///
    /// # Errors
    /// Bad input naming the flag or field, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        match self.command {
            BatchCommand::Create(args) => args.run().await,
            BatchCommand::Add(args) => args.run().await,
            BatchCommand::Close(args) => args.close().await,
            BatchCommand::Show(args) => args.show().await,
            BatchCommand::List(args) => args.run().await,
        }
    }
}

impl CreateBatchArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let (on_success, on_complete) = self.callbacks.callbacks()?;
        let request = CreateBatch {
            jobs: self.jobs.read()?,
            on_success,
            on_complete,
            open: self.open,
            description: self.description.clone(),
        };
        let body = self
            .common
            .client()?
            .run(request)
            .await
            .map(CreateBatch::answer)
            .context("creating a batch")?;
        // Stdout is the bare id, so that `batch=$(cairn batch create …)` works.
        output::outcome(self.common.json, &body, || body.id.to_string())?;
        Ok(Code::Success)
    }
}

impl AddToBatchArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let id = self.id;
        let request = AddToBatch {
            batch: id,
            jobs: self.jobs.read_some()?,
        };
        let count = request.jobs.len();
        let body = self
            .common
            .client()?
            .run(request)
            .await
            .map(AddToBatch::answer)
            .with_context(|| format!("adding jobs to batch {id}"))?;
        output::outcome(self.common.json, &body, || {
            format!("batch {id}: {count} jobs added")
        })?;
        Ok(Code::Success)
    }
}

impl BatchIdArgs {
    async fn close(self) -> anyhow::Result<Code> {
        let id = self.id;
        let body = self
            .common
            .client()?
            .run(CloseBatch { batch: id })
            .await
            .map(CloseBatch::answer)
            .with_context(|| format!("closing batch {id}"))?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render(&body)
        })?;
        Ok(Code::Success)
    }

    async fn show(self) -> anyhow::Result<Code> {
        let body = self
            .common
            .client()?
            .answer(cairn::GetBatch { batch: self.id })
            .await
            .with_context(|| format!("showing batch {}", self.id))?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render(&body)
        })?;
        Ok(Code::Success)
    }
}

impl ListBatchesArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let filter = BatchFilter {
            state: self.state.as_deref().map(BatchState::parse).transpose()?,
            before: self.before,
            limit: self.limit,
        };
        let body = self
            .common
            .client()?
            .answer(filter)
            .await
            .context("listing batches")?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render_list(&body)
        })?;
        Ok(Code::Success)
    }
}

/// The human form of one batch: its fields, counts and callbacks.
fn render(batch: &BatchBody) -> String {
    let when = |at: Option<jiff::Timestamp>| at.map(output::time);
    let callback = |c: &cairn_api::BatchCallbackBody| {
        let job = match (c.job, &c.error) {
            (Some(id), _) => format!("job {id}"),
            (None, Some(error)) => format!("could not be made: {}", output::one_line(error)),
            (None, None) => "not yet".to_owned(),
        };
        format!("{} in {}: {job}", c.name, c.queue)
    };
    Fields::new()
        .add("id", batch.id)
        .add_some("description", batch.description.as_deref())
        .add("state", &batch.state)
        .add(
            "jobs",
            format!(
                "{} ({} pending, {} completed, {} failed, {} cancelled)",
                batch.total, batch.pending, batch.completed, batch.failed, batch.cancelled
            ),
        )
        .add("created_at", output::time(batch.created_at))
        .add_some("completed_at", when(batch.completed_at))
        .add_some("succeeded_at", when(batch.succeeded_at))
        .add_some("on_complete", batch.on_complete.as_ref().map(callback))
        .add_some("on_success", batch.on_success.as_ref().map(callback))
        .finish()
}

/// The human form of a listing: a table, or `no batches`.
fn render_list(body: &BatchListBody) -> String {
    if body.batches.is_empty() {
        return "no batches\n".to_owned();
    }
    let mut table = Table::new(&[
        "ID",
        "STATE",
        "TOTAL",
        "PENDING",
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "CREATED",
        "DESCRIPTION",
    ]);
    for b in &body.batches {
        table.row(vec![
            b.id.to_string(),
            b.state.clone(),
            b.total.to_string(),
            b.pending.to_string(),
            b.completed.to_string(),
            b.failed.to_string(),
            b.cancelled.to_string(),
            output::time(b.created_at),
            b.description
                .as_deref()
                .map(output::one_line)
                .unwrap_or_default(),
        ]);
    }
    table.render("")
}
