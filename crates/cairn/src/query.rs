//! Reading jobs: [`JobFilter`] for listings, [`JobPage`] for the results. Reads use the reader pool, never the writer.

use crate::error::{Error, Result};
use crate::job::{Job, JobId, JobState};
use crate::names::{NamePattern, QueueName, Tag};
use crate::store::db::{Db, Params, ToValue, numbered};
use crate::store::sqlite::rows::{JOB_COLUMNS, job_from_row};

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

impl JobFilter {
    /// Runs the listing.
    pub(crate) fn run(&self, db: &Db<'_>) -> Result<JobPage> {
        if !(1..=MAX_PAGE).contains(&self.limit) {
            return Err(Error::invalid(
                "limit",
                format!("must be between 1 and {MAX_PAGE}, got {}", self.limit),
            ));
        }
        let mut sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE 1 = 1");
        let mut args = Vec::new();
        if let Some(state) = self.state {
            sql.push_str(" AND state = ?");
            args.push(state.as_str().to_value());
        }
        if let Some(queue) = &self.queue {
            sql.push_str(" AND queue = ?");
            args.push(
                QueueName::parse(queue.as_str())?
                    .as_str()
                    .to_owned()
                    .to_value(),
            );
        }
        if let Some(name) = &self.name {
            sql.push_str(" AND name GLOB ?");
            let pattern = NamePattern::parse(name.as_str()).map_err(|e| e.renamed("name"))?;
            args.push(pattern.as_str().to_owned().to_value());
        }
        if let Some(tag) = &self.tag {
            sql.push_str(" AND id IN (SELECT job_id FROM job_tags WHERE tag = ?)");
            args.push(Tag::parse(tag.as_str())?.as_str().to_owned().to_value());
        }
        if self.tracked {
            sql.push_str(" AND tracked = 1");
        }
        if let Some(group) = &self.failure_group {
            sql.push_str(" AND state = 'failed' AND failure_group = ?");
            args.push(group.clone().to_value());
        }
        if let Some(parent) = self.parent {
            sql.push_str(" AND parent_id = ?");
            args.push((parent.0).to_value());
        }
        if let Some(before) = self.before {
            sql.push_str(" AND id < ?");
            args.push((before.0).to_value());
        }
        sql.push_str(" ORDER BY id DESC LIMIT 0 + ?");
        args.push((i64::from(self.limit) + 1).to_value());
        let mut jobs = db.query(&sql, &Params::Numbered(args), job_from_row)?;
        let next = if jobs.len() > self.limit as usize {
            jobs.truncate(self.limit as usize);
            jobs.last().map(|j| j.id)
        } else {
            None
        };
        Ok(JobPage { jobs, next })
    }
}

pub(crate) const PEEK: &str = concat!(
    "SELECT ",
    crate::store::sqlite::rows::job_columns!(),
    " FROM jobs INDEXED BY jobs_ready WHERE state = 'queued' AND queue = ?1 \
     ORDER BY claim_key, run_at, id LIMIT 0 + ?2"
);

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
    db.query(PEEK, &numbered![queue.as_str(), limit], job_from_row)
}
