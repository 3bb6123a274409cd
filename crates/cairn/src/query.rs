//! Reading jobs: [`JobFilter`] for listings, [`JobPage`] for the results. Reads use the reader pool, never the writer.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params_from_iter};

use crate::error::{Error, Result};
use crate::job::{Job, JobId, JobState};
use crate::names::{NamePattern, QueueName, Tag};
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
    pub(crate) fn run(&self, conn: &Connection) -> Result<JobPage> {
        if !(1..=MAX_PAGE).contains(&self.limit) {
            return Err(Error::invalid(
                "limit",
                format!("must be between 1 and {MAX_PAGE}, got {}", self.limit),
            ));
        }
        let mut sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE 1 = 1");
        let mut args: Vec<SqlValue> = Vec::new();
        if let Some(state) = self.state {
            sql.push_str(" AND state = ?");
            args.push(SqlValue::Text(state.as_str().to_owned()));
        }
        if let Some(queue) = &self.queue {
            sql.push_str(" AND queue = ?");
            args.push(SqlValue::Text(
                QueueName::parse(queue.as_str())?.as_str().to_owned(),
            ));
        }
        if let Some(name) = &self.name {
            sql.push_str(" AND name GLOB ?");
            args.push(SqlValue::Text(
                NamePattern::parse(name.as_str())
                    .map_err(|e| e.renamed("name"))?
                    .as_str()
                    .to_owned(),
            ));
        }
        if let Some(tag) = &self.tag {
            sql.push_str(" AND id IN (SELECT job_id FROM job_tags WHERE tag = ?)");
            args.push(SqlValue::Text(
                Tag::parse(tag.as_str())?.as_str().to_owned(),
            ));
        }
        if self.tracked {
            sql.push_str(" AND tracked = 1");
        }
        if let Some(group) = &self.failure_group {
            sql.push_str(" AND state = 'failed' AND failure_group = ?");
            args.push(SqlValue::Text(group.clone()));
        }
        if let Some(parent) = self.parent {
            sql.push_str(" AND parent_id = ?");
            args.push(SqlValue::Integer(parent.0));
        }
        if let Some(before) = self.before {
            sql.push_str(" AND id < ?");
            args.push(SqlValue::Integer(before.0));
        }
        sql.push_str(" ORDER BY id DESC LIMIT 0 + ?");
        args.push(SqlValue::Integer(i64::from(self.limit) + 1));
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut jobs = stmt
            .query_map(params_from_iter(args), job_from_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
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
pub(crate) fn peek(conn: &Connection, queue: &str, limit: u32) -> Result<Vec<Job>> {
    let queue = QueueName::parse(queue)?;
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(Error::invalid(
            "limit",
            format!("must be between 1 and {MAX_PAGE}, got {limit}"),
        ));
    }
    if crate::ops::queues::is_paused(conn, queue.as_str())? {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(PEEK)?;
    let jobs = stmt
        .query_map(rusqlite::params![queue.as_str(), limit], job_from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(jobs)
}
