//! `cairn recurring set|list|show|remove|pause|resume|run`: cron templates that create a job at every slot, once per slot even across
//! restarts of the server.

use anyhow::Context as _;
use cairn::Jobs;
use cairn::{PauseRecurring, ResumeRecurring, RunRecurring};
use cairn_api::{
    EmptyBody, PushRequest, RecurringBody, RecurringListBody, RecurringRequest, Route as _,
};
use clap::{Args, Subcommand};

use crate::commands::args::CommonArgs;
use crate::commands::output::{self, Table};
use crate::commands::push::JobSettings;
use crate::exit::Code;

/// `cairn recurring` commands.
#[derive(Debug, Clone, Args)]
pub struct RecurringArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: RecurringCommand,
}

/// What `cairn recurring` can do.
#[derive(Debug, Clone, Subcommand)]
pub enum RecurringCommand {
    /// Create or replace a template: at every slot of `--cron`, a job named `--name` is created, due at the slot.
    Set(Box<SetRecurringArgs>),
    /// List the templates with their next and last runs.
    List(ListRecurringArgs),
    /// Show one template with its next and last runs.
    Show(TemplateArgs),
    /// Remove a template; the jobs it already created stay.
    Remove(TemplateArgs),
    /// Pause a template: it creates no job until resumed.
    Pause(TemplateArgs),
    /// Resume a paused template: its next slot counts from now (the slots it passed paused are not made up).
    Resume(TemplateArgs),
    /// Create a template's job now, outside its schedule, as a slot would (its overlap policy and unique key
    /// hold); prints the job's id.
    Run(TemplateArgs),
}

/// `cairn recurring set` arguments.
#[derive(Debug, Clone, Args)]
pub struct SetRecurringArgs {
    /// The template's key; setting an existing key replaces that template.
    pub key: String,
    /// A cron expression, such as `0 4 * * *` (five fields, or six with seconds first).
    #[arg(long)]
    pub cron: String,
    /// The time zone the cron expression is read in, such as `Europe/Berlin`.
    #[arg(long, default_value = "UTC")]
    pub time_zone: String,
    /// Slots missed while the server was down: `skip`, `once` (one run for all of them), or `all`.
    #[arg(long, default_value = "once", value_parser = ["skip", "once", "all"])]
    pub missed: String,
    /// When the previous slot's job is still queued or running at the next slot: `allow` another run, `skip` the
    /// slot, or `replace` the previous run (cancelled; a running one's worker is refused from then on).
    #[arg(long, default_value = "allow", value_parser = ["allow", "skip", "replace"])]
    pub overlap: String,
    /// The name of the job each slot creates.
    #[arg(long)]
    pub name: String,
    /// The job's data, queue, priority, weight, tags, retries and time limits, as `cairn push` takes them.
    #[command(flatten)]
    pub settings: JobSettings,
    /// A slot adds nothing while a live job holds this key (one made by a slot, or pushed).
    #[arg(long, value_name = "KEY")]
    pub unique_key: Option<String>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn recurring list` arguments.
#[derive(Debug, Clone, Args)]
pub struct ListRecurringArgs {
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Arguments naming one template: `cairn recurring remove`, `pause`, `resume`, `run`.
#[derive(Debug, Clone, Args)]
pub struct TemplateArgs {
    /// The template's key.
    pub key: String,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl RecurringArgs {
    /// Runs the `cairn recurring` command.
    ///
    /// # Errors
    /// Bad input naming the flag or field, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        match self.command {
            RecurringCommand::Set(args) => args.run().await,
            RecurringCommand::List(args) => args.run().await,
            RecurringCommand::Show(args) => args.show().await,
            RecurringCommand::Remove(args) => args.run().await,
            RecurringCommand::Pause(args) => args.pause(true).await,
            RecurringCommand::Resume(args) => args.pause(false).await,
            RecurringCommand::Run(args) => args.run_now().await,
        }
    }
}

impl SetRecurringArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let request = RecurringRequest {
            cron: self.cron.clone(),
            time_zone: Some(self.time_zone.clone()),
            missed: Some(self.missed.clone()),
            overlap: Some(self.overlap.clone()),
            job: PushRequest {
                unique_key: self.unique_key.clone(),
                ..self.settings.request(&self.name)?
            },
        };
        let body = self
            .common
            .client()?
            .answer(cairn::SetRecurring {
                recurring: request.into_recurring(self.key.clone())?,
            })
            .await
            .with_context(|| format!("setting the recurring template {:?}", self.key))?;
        output::outcome(self.common.json, &body, || {
            let next = body
                .next_run
                .map_or_else(|| "never".to_owned(), output::time);
            format!("recurring {}: next run {next}", body.key)
        })?;
        Ok(Code::Success)
    }
}

impl ListRecurringArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let body = self
            .common
            .client()?
            .answer(cairn::ListRecurring)
            .await
            .context("listing the recurring templates")?;
        if self.common.json {
            output::emit(&output::json(&body))?;
        } else {
            output::emit(&render(&body))?;
        }
        Ok(Code::Success)
    }
}

impl TemplateArgs {
    async fn run(self) -> anyhow::Result<Code> {
        self.common
            .client()?
            .remove_recurring(&self.key)
            .await
            .with_context(|| format!("removing the recurring template {:?}", self.key))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("recurring {}: removed", self.key)
        })?;
        Ok(Code::Success)
    }

    async fn pause(self, paused: bool) -> anyhow::Result<Code> {
        let key = self.key.clone();
        let client = self.common.client()?;
        let (body, what) = if paused {
            let info = client.run(PauseRecurring { key: key.clone() }).await;
            (info.map(PauseRecurring::answer), "pausing")
        } else {
            let info = client.run(ResumeRecurring { key: key.clone() }).await;
            (info.map(ResumeRecurring::answer), "resuming")
        };
        let body = body.with_context(|| format!("{what} the recurring template {key:?}"))?;
        output::outcome(self.common.json, &body, || match body.next_run {
            _ if body.paused => format!("recurring {key}: paused"),
            Some(next) => format!("recurring {key}: next run {}", output::time(next)),
            None => format!("recurring {key}: no next run"),
        })?;
        Ok(Code::Success)
    }

    async fn show(self) -> anyhow::Result<Code> {
        let body = self
            .common
            .client()?
            .answer(cairn::GetRecurring {
                key: self.key.clone(),
            })
            .await
            .with_context(|| format!("reading the recurring template {:?}", self.key))?;
        if self.common.json {
            output::emit(&output::json(&body))?;
        } else {
            output::emit(&render(&RecurringListBody {
                recurring: vec![body],
            }))?;
        }
        Ok(Code::Success)
    }

    async fn run_now(self) -> anyhow::Result<Code> {
        let key = self.key.clone();
        let body = self
            .common
            .client()?
            .run(RunRecurring { key: key.clone() })
            .await
            .map(RunRecurring::answer)
            .with_context(|| format!("running the recurring template {key:?}"))?;
        output::outcome(self.common.json, &body, || body.id.to_string())?;
        if body.existing && !self.common.json {
            eprintln!(
                "note: a live job already held the template's unique key; {} is that job ({})",
                body.id, body.state
            );
        }
        Ok(Code::Success)
    }
}

/// The human form of a listing: a table, or `no recurring templates`.
fn render(body: &RecurringListBody) -> String {
    if body.recurring.is_empty() {
        return "no recurring templates\n".to_owned();
    }
    let mut table = Table::new(&[
        "KEY",
        "JOB",
        "QUEUE",
        "CRON",
        "TIME ZONE",
        "OVERLAP",
        "NEXT RUN",
        "LAST RUN",
    ]);
    for RecurringBody {
        key,
        cron,
        time_zone,
        next_run,
        last_run,
        overlap,
        paused,
        last_job: _,
        missed: _,
        job,
    } in &body.recurring
    {
        let when = |at: &Option<jiff::Timestamp>| at.map_or_else(|| "-".to_owned(), output::time);
        table.row(vec![
            key.clone(),
            job.name.clone(),
            job.queue.clone().unwrap_or_else(|| "default".to_owned()),
            cron.clone(),
            time_zone.clone(),
            overlap.clone(),
            if *paused {
                "paused".to_owned()
            } else {
                when(next_run)
            },
            when(last_run),
        ]);
    }
    table.render("")
}
