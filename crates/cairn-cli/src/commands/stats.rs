//! `cairn stats` (counts, wait, run and service times over the last hour, day or week) and `cairn activity` (the
//! activity log, newest first).

use anyhow::Context as _;
use cairn::{ActivityFilter, JobId, StatsPeriod, StatsQuery};
use cairn_api::{ActivityPageBody, StatsBody, SummaryBody};
use clap::Args;

use crate::commands::args::CommonArgs;
use crate::commands::output::{self, Table};
use crate::exit::Code;

/// `cairn stats` arguments.
#[derive(Debug, Clone, Args)]
pub struct StatsArgs {
    /// The window, ending now: `hour`, `day` or `week`.
    #[arg(long, default_value = "hour", value_parser = ["hour", "day", "week"])]
    pub period: String,
    /// Only this queue's jobs.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only jobs of this name.
    #[arg(long)]
    pub name: Option<String>,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl StatsArgs {
    /// Prints the statistics (with `--json`, the `StatsBody`, series and histograms included).
    ///
    /// # Errors
    /// The server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let query = StatsQuery {
            period: StatsPeriod::parse(&self.period)?,
            queue: self.queue,
            name: self.name,
        };
        let body = self
            .common
            .client()?
            .answer(query)
            .await
            .context("reading the statistics")?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render_stats(&body)
        })?;
        Ok(Code::Success)
    }
}

/// The human form: the window, the counts, and a row per kind of duration.
fn render_stats(body: &StatsBody) -> String {
    let t = &body.totals;
    let mut out = format!(
        "{} to {}\nadded {}  started {}  finished {}  retried {}  failed {}\n\n",
        output::time(body.from),
        output::time(body.to),
        t.added,
        t.started,
        t.finished,
        t.retried,
        t.failed
    );
    let mut table = Table::new(&["", "COUNT", "MEAN", "STDDEV", "MIN", "MAX"]);
    for (label, s) in [
        ("wait", &body.wait),
        ("run", &body.run),
        ("service", &body.service),
    ] {
        table.row(summary_row(label, s));
    }
    out.push_str(&table.render(""));
    out
}

fn summary_row(label: &str, s: &SummaryBody) -> Vec<String> {
    let ms =
        |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| output::millis(v.round() as u64));
    vec![
        label.to_owned(),
        s.count.to_string(),
        ms(s.mean_ms),
        ms(s.stddev_ms),
        ms(s.min_ms.map(|v| v as f64)),
        ms(s.max_ms.map(|v| v as f64)),
    ]
}

/// `cairn activity` arguments.
#[derive(Debug, Clone, Args)]
pub struct ActivityArgs {
    /// Only this job's events: its story.
    #[arg(long)]
    pub job: Option<i64>,
    /// Only this worker's events.
    #[arg(long)]
    pub worker: Option<String>,
    /// Only this queue's events.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only events at or after this time (RFC 3339, such as 2026-01-31T09:00:00Z).
    #[arg(long)]
    pub since: Option<jiff::Timestamp>,
    /// Only events before this time.
    #[arg(long)]
    pub until: Option<jiff::Timestamp>,
    /// At most this many (1 to 1000).
    #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = crate::commands::args::whole_number::<u32>)]
    pub limit: u32,
    /// The server, and `--json`.
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ActivityArgs {
    /// Prints the events, newest first (with `--json`, the `ActivityPageBody`).
    ///
    /// # Errors
    /// A bad filter, or the server's refusal.
    pub async fn run(self) -> anyhow::Result<Code> {
        let filter = ActivityFilter {
            job: self.job.map(JobId),
            worker: self.worker,
            queue: self.queue,
            since: self.since,
            until: self.until,
            before: None,
            limit: self.limit,
        };
        let body = self
            .common
            .client()?
            .answer(filter)
            .await
            .context("reading the activity log")?;
        output::emit(&if self.common.json {
            output::json(&body)
        } else {
            render_activity(&body)
        })?;
        Ok(Code::Success)
    }
}

/// The human form: a table of the events, or `no activity`.
fn render_activity(body: &ActivityPageBody) -> String {
    if body.events.is_empty() {
        return "no activity\n".to_owned();
    }
    let mut table = Table::new(&["AT", "EVENT", "JOB", "QUEUE", "NAME", "WORKER", "DETAIL"]);
    let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
    for e in &body.events {
        table.row(vec![
            output::time(e.at),
            e.event.clone(),
            e.job.map_or_else(|| "-".to_owned(), |j| j.to_string()),
            cell(&e.queue),
            cell(&e.name),
            cell(&e.worker),
            cell(&e.detail),
        ]);
    }
    table.render("")
}
