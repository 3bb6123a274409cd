//! `cairn queues` (every queue with its jobs counted by state) and `cairn queue
//! pause|resume|peek|limit|key-limit|key-weight|keys|rate|aging QUEUE`.
//! Failure groups and unfail are in `failures`.

use anyhow::Context as _;
use cairn::Jobs;
use cairn_api::{EmptyBody, PeekBody, QueueListBody, QueueStatsBody};
use clap::{Args, Subcommand};

use crate::commands::args::CommonArgs;
use crate::commands::output::{self, Table};
use crate::exit::Code;

/// How many jobs `cairn queue peek` shows unless told.
const DEFAULT_PEEK: u32 = 10;

/// `cairn queues` arguments.
#[derive(Debug, Clone, Args)]
pub struct QueuesArgs {
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn queue` commands.
#[derive(Debug, Clone, Args)]
pub struct QueueArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: QueueCommand,
}

/// What `cairn queue` can do.
#[derive(Debug, Clone, Subcommand)]
pub enum QueueCommand {
    /// Pause a queue: it hands out no job until it is resumed; everything else works as usual.
    Pause(QueueNameArgs),
    /// Resume a paused queue: its ready jobs go at once to the workers waiting for them.
    Resume(QueueNameArgs),
    /// Show the next jobs a worker would take from a queue, in that order, without taking them (none while the
    /// queue is paused).
    Peek(PeekArgs),
    /// Limit how many of a queue's jobs run at once across all workers (`--off` removes the limit).
    Limit(LimitArgs),
    /// Limit how many of a queue's jobs with one concurrency key run at once across all workers and nodes, unless
    /// a job carries its own limit (`--off` removes the limit).
    KeyLimit(KeyLimitArgs),
    /// Let a concurrency key take up to N jobs per turn where the others take one (`--off`: back to 1).
    KeyWeight(KeyWeightArgs),
    /// Show a queue's concurrency keys with the most running jobs, and how many ready jobs wait on a key at its
    /// limit.
    Keys(QueueNameArgs),
    /// Limit how many of a queue's jobs start per period across all workers (`--off` removes the limit).
    Rate(RateArgs),
    /// Let a queue's ready jobs gain one priority point per DURATION of waiting, so that a steady stream of
    /// high-priority jobs cannot starve the low ones (`--off`: strict priority, the default).
    Aging(AgingArgs),
}

/// `cairn queue aging` arguments.
#[derive(Debug, Clone, Args)]
pub struct AgingArgs {
    /// The queue's name.
    pub queue: String,
    /// How long a job waits to gain one point: `1s`, `1m`, `1h` (1 ms to a day).
    #[arg(value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, required_unless_present = "off",
          conflicts_with = "off")]
    pub every: Option<std::time::Duration>,
    /// Strict priority: no aging.
    #[arg(long)]
    pub off: bool,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl AgingArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let every = if self.off { None } else { self.every };
        self.common
            .client()?
            .age_queue(&self.queue, every)
            .await
            .with_context(|| format!("setting the priority aging of queue {:?}", self.queue))?;
        output::outcome(self.common.json, &EmptyBody {}, || match every {
            Some(every) => format!(
                "queue {}: a waiting job gains a priority point every {}",
                self.queue,
                crate::duration::format(every)
            ),
            None => format!("queue {}: strict priority", self.queue),
        })?;
        Ok(Code::Success)
    }
}

/// `cairn queue limit` arguments.
#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// The queue's name.
    pub queue: String,
    /// The most of its jobs that may run at once.
    #[arg(required_unless_present = "off", conflicts_with = "off", allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub concurrency: Option<u32>,
    /// Remove the limit.
    #[arg(long)]
    pub off: bool,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn queue key-limit` arguments.
#[derive(Debug, Clone, Args)]
pub struct KeyLimitArgs {
    /// The queue's name.
    pub queue: String,
    /// The most of its jobs with one key that may run at once.
    #[arg(required_unless_present = "off", conflicts_with = "off", allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: Option<u32>,
    /// Remove the limit.
    #[arg(long)]
    pub off: bool,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl KeyLimitArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let limit = if self.off { None } else { self.limit };
        self.common
            .client()?
            .limit_keys(&self.queue, limit)
            .await
            .with_context(|| format!("limiting the keys of queue {:?}", self.queue))?;
        output::outcome(self.common.json, &EmptyBody {}, || match limit {
            Some(n) => format!(
                "queue {}: at most {n} running at once per concurrency key",
                self.queue
            ),
            None => format!("queue {}: no limit per concurrency key", self.queue),
        })?;
        Ok(Code::Success)
    }
}

/// `cairn queue key-weight` arguments.
#[derive(Debug, Clone, Args)]
pub struct KeyWeightArgs {
    /// The queue's name.
    pub queue: String,
    /// The concurrency key.
    pub key: String,
    /// Jobs it takes per turn (1 to 1000).
    #[arg(required_unless_present = "off", conflicts_with = "off", allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub weight: Option<u32>,
    /// Back to one job per turn.
    #[arg(long)]
    pub off: bool,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl KeyWeightArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let weight = if self.off { None } else { self.weight };
        self.common
            .client()?
            .weigh_key(&self.queue, &self.key, weight)
            .await
            .with_context(|| format!("weighing key {:?} of queue {:?}", self.key, self.queue))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!(
                "queue {}: key {} takes {} job(s) per turn",
                self.queue,
                self.key,
                weight.unwrap_or(1)
            )
        })?;
        Ok(Code::Success)
    }
}

/// `cairn queue rate` arguments.
#[derive(Debug, Clone, Args)]
pub struct RateArgs {
    /// The queue's name.
    pub queue: String,
    /// How many jobs may start per period.
    #[arg(
        long,
        value_name = "N",
        required_unless_present = "off",
        conflicts_with = "off",
        requires = "per",
        value_parser = crate::commands::args::whole_number::<u32>
    )]
    pub jobs: Option<u32>,
    /// The period: `1s`, `1m`, `1h`.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, requires = "jobs")]
    pub per: Option<std::time::Duration>,
    /// Remove the limit.
    #[arg(long)]
    pub off: bool,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl LimitArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let concurrency = if self.off { None } else { self.concurrency };
        self.common
            .client()?
            .limit_queue(&self.queue, concurrency)
            .await
            .with_context(|| format!("limiting queue {:?}", self.queue))?;
        output::outcome(self.common.json, &EmptyBody {}, || match concurrency {
            Some(n) => format!("queue {}: at most {n} running at once", self.queue),
            None => format!("queue {}: no concurrency limit", self.queue),
        })?;
        Ok(Code::Success)
    }
}

impl RateArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let rate = match (self.off, self.jobs, self.per) {
            (false, Some(jobs), Some(per)) => Some(cairn::RateLimit { jobs, per }),
            _ => None,
        };
        self.common
            .client()?
            .rate_limit_queue(&self.queue, rate)
            .await
            .with_context(|| format!("rate-limiting queue {:?}", self.queue))?;
        output::outcome(self.common.json, &EmptyBody {}, || match rate {
            Some(rate) => format!(
                "queue {}: at most {} started per {}",
                self.queue,
                rate.jobs,
                crate::duration::format(rate.per)
            ),
            None => format!("queue {}: no rate limit", self.queue),
        })?;
        Ok(Code::Success)
    }
}

/// `cairn queue pause` and `cairn queue resume` arguments.
#[derive(Debug, Clone, Args)]
pub struct QueueNameArgs {
    /// The queue's name.
    pub queue: String,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `cairn queue peek` arguments.
#[derive(Debug, Clone, Args)]
pub struct PeekArgs {
    /// The queue's name.
    pub queue: String,
    /// At most this many jobs (1 to 1000).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PEEK, allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: u32,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl QueuesArgs {
    /// Prints every queue with its counts (with `--json`, the `QueueListBody`).
    ///
    /// # Errors
    /// The server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let body = self
            .common
            .client()?
            .answer(cairn::ListQueues)
            .await
            .context("listing the queues")?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render_queues(&body)
        })?;
        Ok(Code::Success)
    }
}

impl QueueArgs {
    /// Runs the `cairn queue` command.
    ///
    /// # Errors
    /// A bad queue name or limit, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        match self.command {
            QueueCommand::Pause(args) => args.pause(true).await,
            QueueCommand::Resume(args) => args.pause(false).await,
            QueueCommand::Peek(args) => args.run().await,
            QueueCommand::Limit(args) => args.run().await,
            QueueCommand::KeyLimit(args) => args.run().await,
            QueueCommand::KeyWeight(args) => args.run().await,
            QueueCommand::Keys(args) => args.keys().await,
            QueueCommand::Rate(args) => args.run().await,
            QueueCommand::Aging(args) => args.run().await,
        }
    }
}

impl QueueNameArgs {
    async fn pause(self, paused: bool) -> anyhow::Result<Code> {
        let (doing, done) = if paused {
            ("pausing", "paused")
        } else {
            ("resuming", "resumed")
        };
        self.common
            .client()?
            .pause_queue(&self.queue, paused)
            .await
            .with_context(|| format!("{doing} queue {:?}", self.queue))?;
        output::outcome(self.common.json, &EmptyBody {}, || {
            format!("queue {}: {done}", self.queue)
        })?;
        Ok(Code::Success)
    }
}

impl QueueNameArgs {
    /// Prints the queue's top concurrency keys (with `--json`, its `QueueStatsBody`).
    async fn keys(self) -> anyhow::Result<Code> {
        let body = self
            .common
            .client()?
            .answer(cairn::ListQueues)
            .await
            .context("listing the queues")?;
        let queue = body
            .queues
            .into_iter()
            .find(|q| q.queue == self.queue)
            .unwrap_or_else(|| QueueStatsBody {
                queue: self.queue.clone(),
                ..QueueStatsBody::default()
            });
        output::emit(&if self.common.json {
            output::json(&queue)
        } else {
            render_keys(&queue)
        })?;
        Ok(Code::Success)
    }
}

impl PeekArgs {
    async fn run(self) -> anyhow::Result<Code> {
        let body = self
            .common
            .client()?
            .answer(cairn::Peek {
                queue: self.queue.clone(),
                limit: self.limit,
            })
            .await
            .with_context(|| format!("peeking at queue {:?}", self.queue))?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render_peek(&body)
        })?;
        Ok(Code::Success)
    }
}

/// The human form of `cairn queues`: a table of the counts, or `no queues`.
fn render_queues(body: &QueueListBody) -> String {
    if body.queues.is_empty() {
        return "no queues\n".to_owned();
    }
    let mut table = Table::new(&[
        "QUEUE",
        "PAUSED",
        "SCHEDULED",
        "QUEUED",
        "WAITING",
        "SUSPENDED",
        "RUNNING",
        "STALLED",
        "FAILED",
        "COMPLETED",
        "CANCELLED",
        "SETTINGS",
    ]);
    for q in &body.queues {
        table.row(vec![
            q.queue.clone(),
            if q.paused { "yes" } else { "no" }.to_owned(),
            q.scheduled.to_string(),
            q.queued.to_string(),
            q.waiting.to_string(),
            q.suspended.to_string(),
            q.running.to_string(),
            q.stalled.to_string(),
            q.failed.to_string(),
            q.completed.to_string(),
            q.cancelled.to_string(),
            settings(q),
        ]);
    }
    table.render("")
}

/// A queue's limits in a few words (`concurrency=5 rate=10/1s aging=1m`), or `-` for none.
fn settings(q: &QueueStatsBody) -> String {
    let mut parts = Vec::new();
    if let Some(n) = q.concurrency {
        parts.push(format!("concurrency={n}"));
    }
    if let Some(n) = q.key_concurrency {
        parts.push(format!("per-key={n}"));
    }
    if let Some(rate) = q.rate_limit {
        let per = crate::duration::format(std::time::Duration::from_millis(rate.per_ms));
        parts.push(format!("rate={}/{per}", rate.jobs));
    }
    if let Some(ms) = q.priority_aging_ms {
        let every = crate::duration::format(std::time::Duration::from_millis(ms));
        parts.push(format!("aging={every}"));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(" ")
    }
}

/// The human form of `cairn queue keys`: the top keys, and the ready jobs that wait on a full one.
fn render_keys(q: &QueueStatsBody) -> String {
    if q.top_keys.is_empty() {
        return format!(
            "queue {}: no running or ready job has a concurrency key\n",
            q.queue
        );
    }
    let mut table = Table::new(&["KEY", "RUNNING", "QUEUED", "LIMIT", "FULL", "WEIGHT"]);
    for k in &q.top_keys {
        table.row(vec![
            k.key.clone(),
            k.running.to_string(),
            k.queued.to_string(),
            k.limit.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            if k.full { "yes" } else { "no" }.to_owned(),
            k.weight.to_string(),
        ]);
    }
    let mut text = table.render("");
    text.push_str(&format!(
        "{} ready jobs wait on a key at its limit\n",
        q.waiting_on_keys
    ));
    text
}

/// The human form of `cairn queue peek`: the jobs in claim order, or a line saying there are none.
fn render_peek(body: &PeekBody) -> String {
    if body.jobs.is_empty() {
        return "no jobs ready (a paused queue shows none)\n".to_owned();
    }
    let mut table = Table::new(&["ID", "NAME", "PRIORITY", "ATTEMPT", "RUN AT"]);
    for job in &body.jobs {
        table.row(vec![
            job.id.to_string(),
            job.name.clone(),
            job.priority.to_string(),
            format!("{}/{}", job.attempt, job.retry.max_attempts),
            output::time(job.run_at),
        ]);
    }
    table.render("")
}
