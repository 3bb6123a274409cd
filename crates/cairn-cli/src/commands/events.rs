//! `cairn events`: the server's event stream, a line per event as it is committed, until Ctrl-C. It reconnects by
//! itself, resuming after the last event printed; `--after ID` starts after an event printed before.

use anyhow::Context as _;
use cairn::{ActivityKind, EventFilter, EventsFrom, JobId};
use cairn_api::ActivityEventBody;
use clap::Args;

use crate::commands::args::{self, CommonArgs};
use crate::commands::output;
use crate::exit::Code;

/// `cairn events` arguments.
#[derive(Debug, Clone, Args)]
pub struct EventsArgs {
    /// Follow the stream until Ctrl-C, which is what it always does: the flag is accepted, and changes nothing.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Start after this event's id (the first column printed): every event still retained after it, then the new
    /// ones. Without it, from the next event.
    #[arg(long, value_name = "ID")]
    pub after: Option<i64>,
    /// Only events of jobs in this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only events of jobs whose name matches this GLOB.
    #[arg(long, value_name = "GLOB")]
    pub name: Option<String>,
    /// Only this job's events.
    #[arg(long, value_name = "ID", value_parser = args::job_id)]
    pub job: Option<JobId>,
    /// Only events of these kinds (added, started, finished, failed, …); repeat, or separate with commas.
    #[arg(long = "kind", value_name = "KIND", value_delimiter = ',', value_parser = kind)]
    pub kinds: Vec<ActivityKind>,
    /// The server, and `--json` (one JSON object per line).
    #[command(flatten)]
    pub common: CommonArgs,
}

fn kind(text: &str) -> Result<ActivityKind, String> {
    ActivityKind::parse(text).ok_or_else(|| {
        let all: Vec<&str> = ActivityKind::ALL.iter().map(|k| k.as_str()).collect();
        format!("must be one of {}, got {text:?}", all.join(", "))
    })
}

impl EventsArgs {
    /// Prints each event as it comes, until interrupted.
    ///
    /// # Errors
    /// Bad input, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let from = self.after.map_or(EventsFrom::Now, EventsFrom::After);
        let filter = EventFilter {
            queue: self.queue.clone(),
            name: self.name.clone(),
            job: self.job,
            kinds: self.kinds.clone(),
        };
        let mut events = self
            .common
            .client()?
            .events(from, filter)
            .await
            .context("following the event stream")?;
        loop {
            let event = tokio::select! {
                event = events.next() => event.context("following the event stream")?,
                _ = tokio::signal::ctrl_c() => return Ok(Code::Success),
            };
            if let Some(missed) = events.missed() {
                // To the person: stdout stays one event per line.
                eprintln!(
                    "note: the server no longer keeps the events after {} up to {} (its retention pruned them); \
                     going on from {}",
                    missed.after,
                    missed.oldest - 1,
                    missed.oldest
                );
            }
            let body = ActivityEventBody::from(&event);
            let line = if self.common.json {
                output::json(&body)
            } else {
                let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
                format!(
                    "{}  {}  {}  job {}  {}  {}  {}  {}\n",
                    body.id,
                    output::time(body.at),
                    body.event,
                    body.job.map_or_else(|| "-".to_owned(), |j| j.to_string()),
                    cell(&body.queue),
                    cell(&body.name),
                    cell(&body.worker),
                    cell(&body.detail),
                )
            };
            output::emit(&line)?;
        }
    }
}
