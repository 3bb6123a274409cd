//! Reading jobs: [`JobFilter`] for listings, [`JobPage`] for the results. Reads use the reader pool, never the writer.

use crate::error::{Error, Result};
use crate::job::{Job, JobState};
use crate::names::JobId;
use crate::names::{NamePattern, QueueName, Tag};
use crate::ops::rows::{JOB_COLUMNS, job_from_row};
use crate::store::db::{Db, OwnedSql, Params, Sql, ToValue, Value, params};

/// The most jobs one page may hold.
pub const MAX_PAGE: u32 = 1000;

/// Which jobs to list, newest first. Fields are outside input, validated when the listing runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this queue.
    pub queue: Option<String>,
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs whose name matches this GLOB.
    pub name: Option<String>,
    /// Only jobs with this tag.
    pub tag: Option<String>,
    /// Only tracked jobs (see [`Track`](crate::Track)).
    pub tracked: bool,
    /// Only the failed jobs of this failure group.
    pub failure_group: Option<String>,
    /// Only the children of this job: how a parent that runs again finds its children, their states and their
    /// data (a finishing child may replace its data with a result).
    pub parent: Option<JobId>,
    /// Only the jobs of this batch.
    pub batch: Option<crate::BatchId>,
    /// Only jobs with a lower id than this: pass the previous page's `next` to get the following page.
    pub before: Option<JobId>,
    /// At most this many jobs, 1 to [`MAX_PAGE`]; 100 by default.
    pub limit: u32,
}

impl Default for JobFilter {
    fn default() -> Self {
        JobFilter {
            queue: None,
            state: None,
            name: None,
            tag: None,
            tracked: false,
            failure_group: None,
            parent: None,
            batch: None,
            before: None,
            limit: 100,
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPage {
    /// The jobs, newest (highest id) first, without their history.
    pub jobs: Vec<Job>,
    /// Where the next page starts, if there are more jobs.
    pub next: Option<JobId>,
}

/// A listing's conditions as each database reads them, and their parameters, numbered as they are added.
#[derive(Default)]
struct Conditions<'a> {
    sqlite: String,
    postgres: String,
    args: Vec<Value<'a>>,
}

impl<'a> Conditions<'a> {
    /// Adds a parameter; returns its number.
    fn param(&mut self, value: Value<'a>) -> usize {
        self.args.push(value);
        self.args.len()
    }

    /// Adds text both databases read alike.
    fn both(&mut self, text: String) {
        self.sqlite.push_str(&text);
        self.postgres.push_str(&text);
    }
}

impl JobFilter {
    /// Runs the listing.
    pub(crate) fn run(&self, db: &Db<'_>) -> Result<JobPage> {
        if !(1..=MAX_PAGE).contains(&self.limit) {
            return Err(Error::invalid(
                "limit",
                format!("must be between 1 and {MAX_PAGE}, got {}", self.limit),
            ));
        }
        let mut w = Conditions::default();
        if let Some(state) = self.state {
            let n = w.param(state.as_str().to_value());
            w.both(format!(" AND state = ${n}"));
        }
        if let Some(queue) = &self.queue {
            let queue = QueueName::parse(queue.as_str())?;
            let n = w.param(queue.as_str().to_owned().to_value());
            w.both(format!(" AND queue = ${n}"));
        }
        if let Some(name) = &self.name {
            let pattern = NamePattern::parse(name.as_str()).map_err(|e| e.renamed("name"))?;
            let n = w.param(pattern.as_str().to_owned().to_value());
            w.sqlite.push_str(&format!(" AND name GLOB ${n}"));
            w.postgres.push_str(&format!(" AND cairn_glob(name, ${n})"));
        }
        if let Some(tag) = &self.tag {
            let n = w.param(Tag::parse(tag.as_str())?.as_str().to_owned().to_value());
            w.both(format!(
                " AND id IN (SELECT job_id FROM job_tags WHERE tag = ${n})"
            ));
        }
        if self.tracked {
            // Each as its partial index `jobs_tracked` says it, so that the planner uses it.
            w.sqlite.push_str(" AND tracked = 1");
            w.postgres.push_str(" AND tracked");
        }
        if let Some(group) = &self.failure_group {
            let n = w.param(group.clone().to_value());
            w.both(format!(" AND state = 'failed' AND failure_group = ${n}"));
        }
        if let Some(parent) = self.parent {
            let n = w.param(parent.0.to_value());
            w.both(format!(" AND parent_id = ${n}"));
        }
        if let Some(batch) = self.batch {
            let n = w.param(batch.0.to_value());
            w.both(format!(" AND batch_id = ${n}"));
        }
        if let Some(before) = self.before {
            let n = w.param(before.0.to_value());
            w.both(format!(" AND id < ${n}"));
        }
        let n = w.param((i64::from(self.limit) + 1).to_value());
        w.both(format!(" ORDER BY id DESC LIMIT 0 + ${n}"));
        let sql = OwnedSql {
            sqlite: format!("SELECT {JOB_COLUMNS} FROM jobs WHERE 1 = 1{}", w.sqlite),
            postgres: format!("SELECT {JOB_COLUMNS} FROM jobs WHERE 1 = 1{}", w.postgres),
        };
        let mut jobs = db.query(sql.as_sql(), &Params(w.args), job_from_row)?;
        let next = if jobs.len() > self.limit as usize {
            jobs.truncate(self.limit as usize);
            jobs.last().map(|j| j.id)
        } else {
            None
        };
        Ok(JobPage { jobs, next })
    }
}

/// A queue's first ready jobs without a concurrency key, in claim order, with their level (`claim_key`) after the
/// job's columns.
pub(crate) const PEEK: Sql = Sql {
    sqlite: concat!(
        "SELECT ",
        crate::ops::rows::job_columns!(),
        ", claim_key FROM jobs INDEXED BY jobs_ready WHERE state = 'queued' AND concurrency_key IS NULL \
         AND queue = $1 ORDER BY claim_key, run_at, id LIMIT 0 + $2"
    ),
    postgres: concat!(
        "SELECT ",
        crate::ops::rows::job_columns!(),
        ", claim_key FROM jobs WHERE state = 'queued' AND concurrency_key IS NULL AND queue = $1 \
         ORDER BY claim_key, run_at, id LIMIT 0 + $2"
    ),
};

/// A queue's first ready jobs with a concurrency key, by level, then key (the order of turns from the first key),
/// with their level after the job's columns.
pub(crate) const PEEK_KEYED: Sql = Sql {
    sqlite: concat!(
        "SELECT ",
        crate::ops::rows::job_columns!(),
        ", claim_key FROM jobs INDEXED BY jobs_ready_by_key WHERE state = 'queued' \
         AND concurrency_key IS NOT NULL AND queue = $1 ORDER BY claim_key, concurrency_key, run_at, id LIMIT 0 + $2"
    ),
    postgres: concat!(
        "SELECT ",
        crate::ops::rows::job_columns!(),
        ", claim_key FROM jobs WHERE state = 'queued' AND concurrency_key IS NOT NULL AND queue = $1 \
         ORDER BY claim_key, concurrency_key, run_at, id LIMIT 0 + $2"
    ),
};

/// The next `limit` ready jobs of `queue` in claim order, or none while it is paused.
pub(crate) fn peek(db: &Db<'_>, queue: &str, limit: u32) -> Result<Vec<Job>> {
    let queue = QueueName::parse(queue)?;
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(Error::invalid(
            "limit",
            format!("must be between 1 and {MAX_PAGE}, got {limit}"),
        ));
    }
    if crate::ops::queues::is_paused(db, queue.as_str())? {
        return Ok(Vec::new());
    }
    let read = |sql| {
        db.query(sql, &params![queue.as_str(), limit], |row| {
            Ok((
                row.get::<i64>(crate::ops::rows::JOB_COLUMN_COUNT)?,
                job_from_row(row)?,
            ))
        })
    };
    // Jobs without a key and keyed jobs merged by level: at one level, the jobs without a key first, as the turns
    // of a claim that starts afresh would take them (see `ops/claim/by_key.rs`); within a level keyed jobs go by key.
    let mut jobs = read(PEEK)?;
    jobs.extend(read(PEEK_KEYED)?);
    jobs.sort_by_key(|(level, _)| *level);
    jobs.truncate(limit as usize);
    Ok(jobs.into_iter().map(|(_, job)| job).collect())
}
