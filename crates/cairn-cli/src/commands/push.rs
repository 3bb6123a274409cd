//! `cairn push NAME`: enqueue one job and print its id. The flags map one to one onto the wire's `PushRequest`;
//! the server validates every field (and names it when one breaks a rule).

use std::time::Duration;

use anyhow::Context as _;
use cairn::JobId;
use cairn_api::{
    ConcurrencyBody, DebounceBody, EnqueuedBody, PushRequest, RetryOverridesBody, ThrottleBody,
};
use clap::Args;
use jiff::Timestamp;

use crate::commands::args::{self, CommonArgs, JsonInput};
use crate::commands::output;
use crate::exit::Code;

/// `cairn push` arguments.
#[derive(Debug, Clone, Args)]
pub struct PushArgs {
    /// The job's name (its type), such as `email.send`: workers take jobs by name.
    pub name: String,
    /// The job's data, queue, priority, weight, tags, retries and time limits.
    #[command(flatten)]
    pub settings: JobSettings,
    /// Do not run before this long from now: `30s`, `5m`, `1h 30m`.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, conflicts_with = "run_at")]
    pub delay: Option<Duration>,
    /// Do not run before this time (RFC 3339, such as `2025-01-31T09:00:00Z`).
    #[arg(long, value_name = "TIME", value_parser = args::time)]
    pub run_at: Option<Timestamp>,
    /// While a live job holds this key, pushing another with it returns that job instead.
    #[arg(long, value_name = "KEY")]
    pub unique_key: Option<String>,
    /// Run again on this schedule: Bedrock's repeat syntax (`FINISHED, +5 MINUTES`) or a cron expression.
    #[arg(long, value_name = "SPEC")]
    pub schedule: Option<String>,
    /// The IANA time zone of a cron `--schedule` (UTC when absent).
    #[arg(long, value_name = "TZ", requires = "schedule")]
    pub time_zone: Option<String>,
    /// The job creating this one: a running job (the child starts when that run finishes) or one waiting for its
    /// children (a child adding a sibling).
    #[arg(long, value_name = "ID", value_parser = args::job_id)]
    pub parent: Option<JobId>,
    /// A job that must complete before this one runs; repeat for several.
    #[arg(long = "depends-on", value_name = "ID", value_parser = args::job_id)]
    pub depends_on: Vec<JobId>,
    /// Debounce under this key: a push whose key a pending job holds lands in that job, replacing its data and
    /// moving its run to `--debounce-delay` from now (never past `--debounce-max-wait` after the first push).
    #[arg(long, value_name = "KEY", requires_all = ["debounce_delay", "debounce_max_wait"])]
    pub debounce: Option<String>,
    /// With `--debounce`: how long after the latest push the job runs.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, requires = "debounce")]
    pub debounce_delay: Option<Duration>,
    /// With `--debounce`: the longest the job waits after the first push of its burst.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, requires = "debounce")]
    pub debounce_max_wait: Option<Duration>,
    /// One job per key per period: a push whose key a job created less than `--throttle-period` ago holds answers
    /// with that job, whatever became of it.
    #[arg(long, value_name = "KEY", requires = "throttle_period")]
    pub throttle: Option<String>,
    /// With `--throttle`: how long after a job was created its key refuses another (`1h`, `24h`).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse, requires = "throttle")]
    pub throttle_period: Option<Duration>,
    /// The W3C trace context the job runs in (`00-<trace id>-<span id>-<flags>`). When absent, a valid one in the
    /// `TRACEPARENT` environment variable, so that a command `cairn work` runs pushes its follow-up jobs in its own
    /// job's trace (an invalid one there is ignored, as W3C asks of a receiver).
    #[arg(long, value_name = "TRACEPARENT")]
    pub trace_parent: Option<String>,
    /// Add the job to this batch (`cairn batch create`), which must not have completed.
    #[arg(long, value_name = "ID", value_parser = crate::commands::batch::batch_id)]
    pub batch: Option<cairn::BatchId>,
    /// Whose the children are that the job's runs create: `run` (the default: a child starts when the run that
    /// created it finishes, and is cancelled if it does not) or `job` (a child waits for any run that finishes, as
    /// Bedrock's do; see docs/workflows.md).
    #[arg(long, value_name = "run|job", value_parser = ["run", "job"])]
    pub children: Option<String>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// What a job is and how it runs, apart from when: the flags `cairn push` and `cairn recurring set` share.
#[derive(Debug, Clone, Args)]
pub struct JobSettings {
    /// The job's input: JSON text, `@FILE` to read a file, or `-` to read stdin. `{}` when absent.
    #[arg(long, value_name = "JSON|@FILE|-", value_parser = JsonInput::parse)]
    pub data: Option<JsonInput>,
    /// The queue (`default` when absent).
    #[arg(long)]
    pub queue: Option<String>,
    /// Higher runs first (0 when absent).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<i32>)]
    pub priority: Option<i32>,
    /// How much of a worker's concurrency the job takes (1 when absent).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub weight: Option<u32>,
    /// A label for listing (`cairn list --tag`); repeat for several.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Attempts in all, counting the first, with the default backoff (the queue's policy when absent).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub max_attempts: Option<u32>,
    /// How long a worker may hold the job between heartbeats (the queue's default when absent).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse)]
    pub lease_timeout: Option<Duration>,
    /// The longest one attempt may run, heartbeats or not (at most a day); then the job is retried.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = crate::duration::parse)]
    pub timeout: Option<Duration>,
    /// The job's concurrency key, such as `customer:42`: keyed jobs take turns by key, and at most the queue's
    /// limit per key (`cairn queue key-limit`) run at once.
    #[arg(long, value_name = "KEY")]
    pub concurrency_key: Option<String>,
    /// With `--concurrency-key`: at most this many jobs of the key run at once when this job is next, instead of
    /// the queue's limit per key.
    #[arg(long, value_name = "N", requires = "concurrency_key", allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub concurrency_limit: Option<u32>,
}

impl JobSettings {
    /// A request for a job named `name` with these settings, and nothing about when it runs.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::InvalidInput`] naming `--data` when it is not JSON or cannot be read.
    pub fn request(&self, name: &str) -> cairn::Result<PushRequest> {
        Ok(PushRequest {
            queue: self.queue.clone(),
            name: name.to_owned(),
            data: self.data.as_ref().map(|d| d.read("--data")).transpose()?,
            priority: self.priority,
            weight: self.weight,
            // The server's default backoff for the rest.
            retry: self.max_attempts.map(|n| RetryOverridesBody {
                max_attempts: Some(n),
                ..RetryOverridesBody::default()
            }),
            lease_timeout_ms: self.lease_timeout.map(args::millis),
            timeout_ms: self.timeout.map(args::millis),
            tags: self.tags.clone(),
            concurrency: self.concurrency_key.clone().map(|key| ConcurrencyBody {
                key,
                limit: self.concurrency_limit,
            }),
            ..PushRequest::default()
        })
    }
}

impl PushArgs {
    /// The wire request these flags describe, with `--data` read.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::InvalidInput`] naming `--data` when it is not JSON or cannot be read.
    pub fn request(&self) -> cairn::Result<PushRequest> {
        Ok(PushRequest {
            run_at: self.run_at,
            delay_ms: self.delay.map(args::millis),
            unique_key: self.unique_key.clone(),
            parent: self.parent.map(|p| p.0),
            depends_on: self.depends_on.iter().map(|d| d.0).collect(),
            schedule: self.schedule.clone(),
            time_zone: self.time_zone.clone(),
            debounce: self.debounce.clone().map(|key| DebounceBody {
                key,
                delay_ms: self.debounce_delay.map_or(0, args::millis),
                max_wait_ms: self.debounce_max_wait.map_or(0, args::millis),
            }),
            throttle: self.throttle.clone().map(|key| ThrottleBody {
                key,
                period_ms: self.throttle_period.map_or(0, args::millis),
                states: Vec::new(),
            }),
            batch: self.batch.map(|b| b.0),
            children: self.children.as_deref().map(|children| match children {
                "job" => cairn_api::ChildrenBody::Job,
                _ => cairn_api::ChildrenBody::Run,
            }),
            trace_parent: self.trace_parent.clone().or_else(|| {
                std::env::var("TRACEPARENT")
                    .ok()
                    .filter(|v| cairn::TraceParent::parse(v.as_str()).is_ok())
            }),
            ..self.settings.request(&self.name)?
        })
    }

    /// Enqueues the job and prints its id alone on a line (or, with `--json`, the `EnqueuedBody`).
    ///
    /// # Errors
    /// Bad input, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let request = self.request()?;
        let body = self
            .common
            .client()?
            .answer(cairn::Push::from(request))
            .await
            .with_context(|| format!("enqueueing {:?}", self.name))?;
        if self.common.json {
            output::emit(&output::json(&body))?;
        } else {
            output::emit(&render(&body))?;
            if body.existing {
                // Stdout stays the bare id for scripts; the surprise goes to the person.
                let why = if self.debounce.is_some() {
                    "the push landed in the pending job of its debounce key"
                } else if self.throttle.is_some() {
                    "a job of the throttle's period already held its key"
                } else {
                    "a live job already held the unique key"
                };
                eprintln!("note: {why}; {} is that job ({})", body.id, body.state);
            }
        }
        Ok(Code::Success)
    }
}

/// The human form: the id alone, so that `id=$(cairn push …)` works.
pub fn render(body: &EnqueuedBody) -> String {
    format!("{}\n", body.id)
}
