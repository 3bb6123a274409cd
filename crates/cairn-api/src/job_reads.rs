//! Reading jobs: one with its history, at once or once it ends (`GET /v1/jobs/{id}`), and pages of them by filter
//! (`GET /v1/jobs`).

use std::time::Duration;

use cairn::{BatchId, GetJob, Job, JobFilter, JobPage, JobState};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

use crate::Named;
use crate::jobs::{JobBody, JobPageBody};
use crate::query::{bool_param, id_param, limit_param, optional, positive_param};
use crate::route::{Answer, JOB_ID, RouteVisitor, WhenStopping, invalid, route};
use crate::{READ, READ_ONE};

/// The longest a client may ask to wait for a job, in milliseconds: a day (the server cuts it to its own longest
/// wait, and the client asks again).
const MOST_WAIT_MS: u64 = 86_400_000;

/// How to read one job (`GET /v1/jobs/{id}`'s parameters).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GetJobQuery {
    /// Wait up to this long (ms, at most a day; the server caps it as it caps a dequeue's wait, 60 s by default) for
    /// the job to end, and answer the moment it does. Absent or 0: answer at once.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>, minimum = 0, maximum = 86_400_000))]
    pub wait_ms: Option<String>,
}

/// Which jobs to list (`GET /v1/jobs`'s parameters), each as the engine's [`JobFilter`] has it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JobListQuery {
    /// Only jobs in this queue.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::QueueName>))]
    pub queue: Option<String>,
    /// Only jobs in this state.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobStateName>))]
    pub state: Option<String>,
    /// Only jobs whose name matches this GLOB pattern.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::NamePattern>))]
    pub name: Option<String>,
    /// Only jobs with this tag.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::Tag>))]
    pub tag: Option<String>,
    /// Only the failed jobs of this failure group (see `GET /v1/failures`).
    pub failure_group: Option<String>,
    /// `true`: only tracked jobs (see `POST /v1/jobs/{id}/track`), whatever their state; `false` or absent: every
    /// job.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<bool>))]
    pub tracked: Option<String>,
    /// Only the children of this job.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobId>))]
    pub parent: Option<String>,
    /// Only the jobs of this batch.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::BatchId>))]
    pub batch: Option<String>,
    /// Only jobs older than this id (the `next` of the previous page).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<crate::rules::JobId>))]
    pub before: Option<String>,
    /// The most jobs on the page (default 100, at most 1000).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u32>, minimum = 1, maximum = 1000))]
    pub limit: Option<String>,
}

impl From<&JobFilter> for JobListQuery {
    fn from(filter: &JobFilter) -> Self {
        JobListQuery {
            queue: filter.queue.clone(),
            state: filter.state.map(|state| state.as_str().to_owned()),
            name: filter.name.clone(),
            tag: filter.tag.clone(),
            failure_group: filter.failure_group.clone(),
            tracked: filter.tracked.then(|| "true".to_owned()),
            parent: filter.parent.map(|job| job.to_string()),
            batch: filter.batch.map(|batch| batch.to_string()),
            before: filter.before.map(|job| job.to_string()),
            limit: Some(filter.limit.to_string()),
        }
    }
}

impl JobListQuery {
    /// The engine's filter.
    ///
    /// # Errors
    /// [`cairn::ErrorKind::InvalidInput`] naming the parameter that is not of its kind.
    pub fn into_filter(self) -> cairn::Result<JobFilter> {
        let mut filter = JobFilter {
            queue: self.queue,
            name: self.name,
            tag: self.tag,
            failure_group: self.failure_group,
            tracked: optional(self.tracked.as_ref(), |t| bool_param("tracked", t))?
                .unwrap_or(false),
            before: optional(self.before.as_ref(), |t| id_param("before", t))?,
            parent: optional(self.parent.as_ref(), |t| id_param("parent", t))?,
            batch: optional(self.batch.as_ref(), |t| {
                positive_param("batch", "a batch id", t).map(BatchId)
            })?,
            ..JobFilter::default()
        };
        if let Some(state) = self.state {
            filter.state = Some(state.parse::<JobState>()?);
        }
        if let Some(text) = self.limit {
            filter.limit = limit_param(&text, cairn::MAX_PAGE)?;
        }
        Ok(filter)
    }
}

impl Answer<Job> for JobBody {
    fn from_output(job: Job) -> Self {
        JobBody::from(&job)
    }

    fn into_output(self) -> cairn::Result<Job> {
        self.to_job()
    }
}

impl Answer<JobPage> for JobPageBody {
    fn from_output(page: JobPage) -> Self {
        JobPageBody {
            jobs: page.jobs.iter().map(JobBody::from).collect(),
            next: page.next.map(|job| job.0),
        }
    }

    fn into_output(self) -> cairn::Result<JobPage> {
        Ok(JobPage {
            jobs: self
                .jobs
                .iter()
                .map(JobBody::to_job)
                .collect::<cairn::Result<_>>()?,
            next: self.next.map(cairn::JobId),
        })
    }
}

/// The wait `wait_ms` asks for.
fn wait(text: Option<&String>) -> cairn::Result<Duration> {
    let Some(text) = text else {
        return Ok(Duration::ZERO);
    };
    text.parse::<u64>()
        .ok()
        .filter(|ms| *ms <= MOST_WAIT_MS)
        .map(Duration::from_millis)
        .ok_or_else(|| {
            invalid(
                "wait_ms",
                format!(
                    "must be a whole number of milliseconds up to a day ({MOST_WAIT_MS}), got {text:?}"
                ),
            )
        })
}

/// The reads of jobs declared here, for [`visit_routes`](crate::visit_routes).
pub(crate) fn visit_job_read_routes(visitor: &mut impl RouteVisitor) {
    visitor.visit::<GetJob>();
    visitor.visit::<JobFilter>();
}

route! {
    GetJob: Get "/v1/jobs/{id}", params [JOB_ID], tag "jobs", id "get_job", access READ_ONE, reach Queues,
    summary "A job with its history.",
    done "The job; with `wait_ms`, once it ended (its state completed, failed or cancelled, with its result or \
        error) or as it stands when the wait ran out",
    errors [
        (404, "No such job"),
        (400, "A bad id (not a positive integer) or `wait_ms`"),
    ],
    path |r| [r.job],
    body GetJobQuery = |r| GetJobQuery {
        wait_ms: (!r.wait.is_zero()).then(|| r.wait.as_millis().to_string()),
    },
    answer JobBody,
    from |received, query| Ok(GetJob { job: received.job()?, wait: wait(query.wait_ms.as_ref())? }),
    // Capped as a dequeue's long poll is: the caller asks again.
    limit |r, limits| {
        r.wait = r.wait.min(limits.max_wait);
        Ok(())
    },
    // A stopping server answers with the job as it stands, as it answers a long poll with no job.
    stopping |r| match r.wait.is_zero() {
        true => WhenStopping::Finish,
        false => WhenStopping::RunInstead(GetJob::new(r.job)),
    },
    waits |r| r.wait,
}

route! {
    JobFilter: Get "/v1/jobs", params [], tag "jobs", id "list_jobs", access READ, reach Queues,
    summary "A page of jobs, newest first, without their history.",
    done "A page of jobs",
    errors [(400, "Bad filter")],
    path |_r| [],
    body JobListQuery = |r| JobListQuery::from(r),
    answer JobPageBody,
    from |_received, query| query.into_filter(),
    names |r| match &r.queue {
        Some(queue) => Named::queues([queue.as_str()]),
        None => Named::every_queue(),
    },
}
